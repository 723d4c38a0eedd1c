package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestDataVersion: the version changes when another process (here another
// Store on the same file) commits hours, and when this Store does; it
// stays while nothing is written.
func TestDataVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	serve, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	backfill, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer backfill.Close()
	version := func() uint64 {
		t.Helper()
		v, err := serve.DataVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	hour := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	row := ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: "ml", Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 6_880_000}
	v0 := version()
	if v := version(); v != v0 {
		t.Fatalf("version moved from %d to %d with nothing written", v0, v)
	}
	if err := backfill.WriteHours(ctx, []ledger.Row{row}, nil); err != nil {
		t.Fatal(err)
	}
	v1 := version()
	if v1 == v0 {
		t.Errorf("version %d unchanged after another process wrote an hour", v1)
	}
	row.CostMicros = 6_880_001
	if err := serve.WriteHours(ctx, []ledger.Row{row}, nil); err != nil {
		t.Fatal(err)
	}
	if v := version(); v == v1 {
		t.Errorf("version %d unchanged after this Store rewrote the hour", v)
	}
}
