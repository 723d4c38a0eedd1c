// Package embeddedtest gives tests an embedded ledger holding given rows.
package embeddedtest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// Open is an embedded ledger in a temporary folder holding rows, closed
// when the test ends.
func Open(t testing.TB, rows ...ledger.Row) ledger.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if len(rows) > 0 {
		if err := s.WriteHours(context.Background(), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
