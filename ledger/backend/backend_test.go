package backend

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// TestOpen: a reading command refuses a ledger that is not there, says
// what to do and creates nothing; a writing one creates it; an unknown
// backend is a usage error naming the flag.
func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	open := func(mode Mode, args ...string) error {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := Flags(fs, path, mode)
		if err := fs.Parse(args); err != nil {
			return err
		}
		s, err := o(context.Background(), nil)
		if err == nil {
			err = s.Close()
		}
		return err
	}
	var ue flagutil.UsageError
	for _, m := range []Mode{Read, Verify} {
		if err := open(m); !errors.As(err, &ue) || !strings.Contains(err.Error(), "run gpuledger serve or gpuledger ingest first") {
			t.Errorf("mode %d on a missing ledger: %v", m, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("mode %d created %s", m, path)
		}
	}
	if err := open(Write); err != nil {
		t.Fatal(err)
	}
	if err := open(Read); err != nil {
		t.Errorf("reading the ledger written: %v", err)
	}
	if err := open(Read, "-ledger.store=postgres"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `-ledger.store="postgres": want embedded or clickhouse`) {
		t.Errorf("an unknown backend: %v", err)
	}
}
