package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/ledger"
)

// testRewrite checks ledger.Rewrite on s: restatements of open hours,
// adjustments of a closed month billed in the next, nothing recorded
// twice, and each hour's money reconciling with its adjustments.
func testRewrite(t *testing.T, s ledger.Store) {
	ctx := context.Background()
	defer s.Close()
	at := time.Date(2026, 11, 5, 8, 0, 0, 0, time.UTC)
	prov := ledger.Provenance{Source: "backfill:file:///fix.jsonl", By: "ops", Reason: "node 7 was missing", Now: func() time.Time { return at }}
	rewrite := func(rows []ledger.Row) ledger.RewriteResult {
		t.Helper()
		res, err := ledger.Rewrite(ctx, s, rows, nil, prov)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := rewrite(fixture()); res.Restated != 0 || res.Adjusted != 0 || res.Written != 6 {
		t.Fatalf("first write: %+v, want 6 cluster-hours written and nothing restated", res)
	}
	if res := rewrite(fixture()); res.Restated != 0 || res.Adjusted != 0 {
		t.Errorf("the same rows again: %+v, want nothing restated", res)
	}
	// A backfill that saw one node of c1 at 22:00: ds's GPU went
	// unallocated, ml's cost is the same; c2 is untouched.
	h1 := []ledger.Row{
		row(h0, "c1", "ml", "h100", 7_000_001, 1_500_000, 4800),
		row(h0, "c1", ledger.TeamUnallocated, "h100", 2_234_566, 2_234_566, 2700),
	}
	if res := rewrite(h1); res.Restated != 2 || res.Adjusted != 0 {
		t.Errorf("a rewrite of 22:00: %+v, want 2 team-hours restated (ds and _unallocated; ml's cost and time unchanged)", res)
	}
	got, err := s.Restatements(ctx, "c1", h0, h0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Restatement{
		{At: at, Cluster: "c1", Hour: h0, Team: ledger.TeamUnallocated, BeforeMicros: 999_999, AfterMicros: 2_234_566,
			BeforeGPUSeconds: 900, AfterGPUSeconds: 2700, Source: prov.Source, By: "ops", Reason: prov.Reason},
		{At: at, Cluster: "c1", Hour: h0, Team: "ds", BeforeMicros: 1_234_567, AfterMicros: 0,
			BeforeGPUSeconds: 1800, AfterGPUSeconds: 0, Source: prov.Source, By: "ops", Reason: prov.Reason},
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("restatements of 22:00 (-want +got):\n%s", diff)
	}

	// October closes; a correction of 23:00 (October) and 00:00
	// (November) comes after.
	if err := s.CloseMonth(ctx, ledger.MonthClose{Month: ledger.StepMonth.Truncate(h0), At: at, By: "finance"}); err != nil {
		t.Fatal(err)
	}
	h2, h3 := h0.Add(time.Hour), h0.Add(2*time.Hour)
	closedBefore := hourCost(t, s, "c1", h2)
	fix := []ledger.Row{
		row(h2, "c1", "ml", "h100", 8_000_000, 1_000_000, 5000),
		row(h2, "c1", "ds", "a100", 1_234_567, 1_234_567, 1800),
		row(h3, "c1", "ml", "h100", 8_000_000, 1_000_000, 5000),
		row(h3, "c1", "ds", "a100", 1_234_567, 1_234_567, 1800),
	}
	res := rewrite(fix)
	// ml: 7,000,001 → 8,000,000; _unallocated: 999,999 → 0 in each hour.
	if res.Adjusted != 2 || res.Restated != 2 || res.Written != 1 {
		t.Errorf("a correction over the close: %+v, want 2 adjustments (23:00), 2 restatements and 1 hour written (00:00)", res)
	}
	if after := hourCost(t, s, "c1", h2); after != closedBefore {
		t.Errorf("closed hour 23:00 costs %d after the correction, was invoiced at %d: a closed month changed", after, closedBefore)
	}
	if got := hourCost(t, s, "c1", h3); got != 9_234_567 {
		t.Errorf("open hour 00:00 costs %d after the correction, want 9234567", got)
	}
	nov := ledger.StepMonth.Truncate(h3)
	adj, err := s.Adjustments(ctx, "c1", nov)
	if err != nil {
		t.Fatal(err)
	}
	var delta int64
	for _, a := range adj {
		if !a.Hour.Equal(h2) || !a.BilledIn.Equal(nov) || !a.Adjustment() {
			t.Errorf("adjustment %+v: want hour 23:00 billed in November", a)
		}
		delta += a.DeltaMicros()
	}
	if len(adj) != 2 || closedBefore+delta != 9_234_567 {
		t.Errorf("%d adjustments summing to %d: the closed hour's %d plus them is %d, want the correction's 9234567",
			len(adj), delta, closedBefore, closedBefore+delta)
	}
	// The same correction again (a re-run): nothing more to adjust.
	if res := rewrite(fix); res.Adjusted != 0 || res.Restated != 0 {
		t.Errorf("the correction again: %+v, want nothing recorded", res)
	}
	if again, err := s.Adjustments(ctx, "", nov); err != nil || len(again) != 2 {
		t.Errorf("adjustments billed in November after a re-run: %d, %v; want 2", len(again), err)
	}
	if adj, err := s.Adjustments(ctx, "c1", ledger.StepMonth.Truncate(h0)); err != nil || len(adj) != 0 {
		t.Errorf("adjustments billed in October: %v, %v; want none", adj, err)
	}
}

// hourCost is a cluster-hour's cost in the ledger.
func hourCost(t *testing.T, s ledger.Store, cluster string, hour time.Time) int64 {
	t.Helper()
	rows, err := s.Query(context.Background(), ledger.Query{From: hour, To: hour.Add(time.Hour), Step: ledger.StepHour, Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, r := range rows {
		sum += r.CostMicros
	}
	return sum
}
