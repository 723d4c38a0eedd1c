package reports

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// closedOctober writes an hour of October and one of November (ml's
// queue train on h100), builds October's chargeback (before), closes
// October, then rewrites both hours as node 7's backfill found them: 3
// adjustments of October billed in November and 2 restatements of
// November.
func closedOctober(t *testing.T) (s *embedded.Store, oct, nov time.Time, before *Chargeback, res ledger.RewriteResult) {
	t.Helper()
	ctx := context.Background()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	oct = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	nov = oct.AddDate(0, 1, 0)
	hour := func(h time.Time, ml, ds, unalloc int64) []ledger.Row {
		return []ledger.Row{
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml", LocalQueue: "train", ClusterQueue: "cq-ml", Flavor: "h100"},
				GPUSeconds: float64(ml) / 1911, CostMicros: ml},
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: "ds", Namespace: "ds", Flavor: "h100"}, GPUSeconds: float64(ds) / 1911, CostMicros: ds},
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: float64(unalloc) / 1911,
				CostMicros: unalloc, UnallocatedCostMicros: unalloc},
		}
	}
	h1, h2 := oct.Add(5*time.Hour), nov.Add(7*time.Hour)
	first := append(hour(h1, 6_880_000, 6_880_000, 13_760_000), hour(h2, 6_880_000, 0, 20_640_000)...)
	if _, err := ledger.Rewrite(ctx, s, first, nil, ledger.Provenance{Source: "live:c1", By: "gpuledger serve"}); err != nil {
		t.Fatal(err)
	}
	if before, err = Build(ctx, s, oct, Options{Currency: "USD", Teams: []string{"ml", "ds"}}); err != nil {
		t.Fatal(err)
	}
	if err := ledger.CloseMonth(ctx, s, ledger.MonthClose{Month: oct, By: "finance", Note: "INV-10"}, nov.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	fix := append(hour(h1, 13_760_000, 3_440_000, 10_320_000), hour(h2, 6_880_000, 3_440_000, 17_200_000)...)
	res, err = ledger.Rewrite(ctx, s, fix, nil, ledger.Provenance{Source: "backfill:file:///node7.jsonl", By: "ops", Reason: "node 7's exporter was down",
		Now: func() time.Time { return nov.Add(72 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	return s, oct, nov, before, res
}

// TestClosedMonthAdjustment: October is invoiced and closed; a backfill
// then finds ds's GPU was held by ml for an hour of October and
// restates an hour of November. October's chargeback is unchanged but
// lists the adjustment; November's bills it on ml's and ds's lines, and
// its TOTAL charge is November's cost plus the adjustments, to the
// micro.
func TestClosedMonthAdjustment(t *testing.T) {
	ctx := context.Background()
	s, oct, nov, before, res := closedOctober(t)
	if res.Adjusted != 3 || res.Restated != 2 {
		t.Fatalf("rewrite: %+v, want 3 adjustments (October) and 2 restatements (November)", res)
	}

	after, err := Build(ctx, s, oct, Options{Currency: "USD", Teams: []string{"ml", "ds"}})
	if err != nil {
		t.Fatal(err)
	}
	if after.Total.CostMicros != before.Total.CostMicros || after.Total.ChargeMicros() != before.Total.ChargeMicros() {
		t.Errorf("October after the close: cost %d charge %d, invoiced %d", after.Total.CostMicros, after.Total.ChargeMicros(), before.Total.CostMicros)
	}
	if len(after.Restatements) != 3 || !after.Restatements[0].Adjustment() {
		t.Errorf("October's restatements: %+v, want its 3 adjustments, billed later", after.Restatements)
	}

	cb, err := Build(ctx, s, nov, Options{Currency: "USD", Teams: []string{"ml", "ds"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ml": 6_880_000, "ds": -3_440_000, ledger.TeamUnallocated: -3_440_000}
	var cost int64
	for _, l := range cb.Lines {
		if l.AdjustmentMicros != want[l.Team] {
			t.Errorf("%s's adjustment in November: %d, want %d", l.Team, l.AdjustmentMicros, want[l.Team])
		}
		cost += l.CostMicros
	}
	if cost != 27_520_000 || cb.Total.CostMicros != cost || cb.Total.ChargeMicros() != cost+0 || cb.Total.AdjustmentMicros != 0 {
		t.Errorf("November: lines' cost %d, TOTAL cost %d charge %d adjustment %d; want 27520000 each, adjustments summing to 0 (the cluster's cost did not change)",
			cost, cb.Total.CostMicros, cb.Total.ChargeMicros(), cb.Total.AdjustmentMicros)
	}
	if len(cb.Restatements) != 2 || cb.Restatements[0].Adjustment() {
		t.Errorf("November's restatements: %+v, want 2 of its own hour", cb.Restatements)
	}

	recs := csvRecords(t, cb)
	var notes []string
	for _, r := range recs {
		if strings.Contains(r[0], ":") {
			notes = append(notes, r[0]+" "+r[len(r)-1])
		}
	}
	if len(notes) != 5 {
		t.Fatalf("CSV notes: %d, want 3 adjustment: and 2 restated: lines:\n%s", len(notes), strings.Join(notes, "\n"))
	}
	for _, want := range []string{"adjustment:ml c1 2026-10-01T05:00Z to 2026-10-01T06:00Z (1 hour(s)): 6.880000 before, 13.760000 after (+6.880000)",
		"billed in 2026-11; by ops with backfill:file:///node7.jsonl", "node 7's exporter was down", "restated:ds c1 2026-11-01T07:00Z"} {
		if !strings.Contains(strings.Join(notes, "\n"), want) {
			t.Errorf("CSV notes lack %q:\n%s", want, strings.Join(notes, "\n"))
		}
	}

	var buf bytes.Buffer
	if err := cb.WriteXLSX(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.GetRows(SheetRestatements)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || rows[1][0] != "adjustment billed here" || rows[4][0] != "restated before close" || rows[6][0] != "TOTAL adjustments billed here" || rows[6][8] != "0.00" {
		t.Errorf("Restatements sheet: %q", rows)
	}
}
