package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestLines: lines are written per (cluster, hour), replaced when the
// hour is written again, summed per identity over a range, narrowed to a
// team or a workload, and a line changed behind the store's back is a
// DamageError, never a changed explanation.
func TestLines(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	hour := func(h time.Time, mlCost int64) []ledger.Line {
		ml := ledger.Key{Hour: h, Cluster: "c1", Team: "ml", Namespace: "research", Flavor: "h100"}
		un := ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}
		return []ledger.Line{
			{Key: ml, Kind: ledger.LineUsage, Node: "n1", GPU: "0", Pod: "train-0-a", WorkloadKind: "Job", Workload: "train-0", RateMicrosPerHour: 6_880_000,
				GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: mlCost, IdleCostMicros: mlCost / 2},
			{Key: un, Kind: ledger.LineUnallocated, Node: "n1", GPU: "1", RateMicrosPerHour: 6_880_000, GPUSeconds: 3600,
				CostMicros: 6_880_000, UnallocatedCostMicros: 6_880_000},
		}
	}
	if err := s.WriteLineHours(ctx, append(hour(h0, 6_880_000), hour(h0.Add(time.Hour), 6_880_000)...)); err != nil {
		t.Fatal(err)
	}
	// Written again: replaced, not doubled.
	if err := s.WriteLineHours(ctx, hour(h0.Add(time.Hour), 3_440_000)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lines(ctx, ledger.LineQuery{From: h0, To: h0.Add(2 * time.Hour), Team: "ml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].CostMicros != 6_880_000+3_440_000 || got[0].GPUSeconds != 7200 || got[0].Pod != "train-0-a" || !got[0].Hour.Equal(h0) {
		t.Fatalf("ml's lines %+v; want one line of 10,320,000 over 7,200 GPU-seconds", got)
	}
	all, err := s.Lines(ctx, ledger.LineQuery{From: h0, To: h0.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Team != ledger.TeamUnallocated || all[0].CostMicros != 13_760_000 {
		t.Fatalf("every line %+v; want the unallocated GPU's first (13,760,000), then ml's", all)
	}
	// As written, summed in Go: the same answer.
	want := ledger.SumLines(append(hour(h0, 6_880_000), hour(h0.Add(time.Hour), 3_440_000)...), h0)
	if len(want) != len(all) || want[0] != all[0] || want[1] != all[1] {
		t.Errorf("stored %+v; SumLines of what was written %+v", all, want)
	}
	wl, err := s.Lines(ctx, ledger.LineQuery{From: h0, To: h0.Add(2 * time.Hour), Namespace: "research", Workload: "train-0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(wl) != 1 || wl[0].Workload != "train-0" {
		t.Errorf("train-0's lines %+v; want its one line", wl)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE line_rows SET cost_micros = cost_micros + 1 WHERE team = 'ml' AND hour = ?`, h0.Unix()); err != nil {
		t.Fatal(err)
	}
	var de *ledger.DamageError
	if _, err := s.Lines(ctx, ledger.LineQuery{From: h0, To: h0.Add(2 * time.Hour), Team: "ml"}); !errors.As(err, &de) {
		t.Errorf("a changed line read as %v; want a DamageError", err)
	}
}
