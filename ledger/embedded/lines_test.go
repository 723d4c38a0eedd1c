package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestLinesDamage: a line changed behind the store's back is a
// DamageError, never a changed explanation.
func TestLinesDamage(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	line := ledger.Line{Key: ledger.Key{Hour: h0, Cluster: "c1", Team: "ml", Flavor: "h100"}, Kind: ledger.LineUsage, Node: "n1", GPU: "0",
		Pod: "p", WorkloadKind: "Job", Workload: "j", RateMicrosPerHour: 6_880_000, GPUSeconds: 3600, CostMicros: 6_880_000}
	if err := s.WriteLineHours(ctx, []ledger.Line{line}); err != nil {
		t.Fatal(err)
	}
	q := ledger.LineQuery{From: h0, To: h0.Add(time.Hour), Team: "ml"}
	if got, err := s.Lines(ctx, q); err != nil || len(got) != 1 {
		t.Fatalf("lines %+v, %v", got, err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE line_rows SET cost_micros = cost_micros + 1 WHERE team = 'ml'`); err != nil {
		t.Fatal(err)
	}
	var de *ledger.DamageError
	if _, err := s.Lines(ctx, q); !errors.As(err, &de) {
		t.Errorf("a changed line read as %v; want a DamageError", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM line_rows WHERE team = 'ml'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lines(ctx, q); !errors.As(err, &de) {
		t.Errorf("a missing line read as %v; want a DamageError", err)
	}
}
