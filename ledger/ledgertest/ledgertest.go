// Package ledgertest is the contract test suite every ledger.Store must
// pass: the same inputs give the same answers on every backend.
package ledgertest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

// Opener returns a new, empty Store; the suite closes it.
type Opener func(t *testing.T) ledger.Store

var h0 = time.Date(2026, 10, 31, 22, 0, 0, 0, time.UTC)

func row(hour time.Time, cluster, team, flavor string, cost, idle int64, secs float64) ledger.Row {
	r := ledger.Row{Key: ledger.Key{Hour: hour, Cluster: cluster, Team: team, Namespace: team + "-ns", Flavor: flavor},
		GPUSeconds: secs, ActiveGPUSeconds: secs / 2, CostMicros: cost, IdleCostMicros: idle, EnergyJoules: secs * 100,
		EnergyCostMicros: int64(secs) * 3}
	if team == ledger.TeamUnallocated {
		r.IdleCostMicros, r.UnallocatedCostMicros = 0, idle
	}
	return r
}

// workloads spans the same hours: two jobs of ml and a pod of ds, in c1.
func workloads() []ledger.WorkloadRow {
	var ws []ledger.WorkloadRow
	for i := range 3 {
		h := h0.Add(time.Duration(i) * time.Hour)
		ws = append(ws,
			ledger.WorkloadRow{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml-ns", Kind: "Job", Name: "train-1",
				GPUSeconds: 3000, ActiveGPUSeconds: 2500, CostMicros: 4_000_000, IdleCostMicros: 600_000},
			ledger.WorkloadRow{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml-ns", Kind: "JobSet", Name: "sweep",
				GPUSeconds: 600, ActiveGPUSeconds: 0, CostMicros: 1_000_001, IdleCostMicros: 400_000},
			ledger.WorkloadRow{Hour: h, Cluster: "c1", Team: "ds", Namespace: "ds-ns", Kind: "Pod", Name: "nb-0",
				GPUSeconds: 1800, ActiveGPUSeconds: 100, CostMicros: 1_234_567, IdleCostMicros: 1_200_000},
		)
	}
	return ws
}

// fixture spans a month boundary: 22:00 and 23:00 on Oct 31, 00:00 on Nov 1.
func fixture() []ledger.Row {
	var rows []ledger.Row
	for i := range 3 {
		h := h0.Add(time.Duration(i) * time.Hour)
		rows = append(rows,
			row(h, "c1", "ml", "h100", 5_000_001, 1_000_000, 3600),
			row(h, "c1", "ds", "a100", 1_234_567, 1_234_567, 1800),
			row(h, "c1", ledger.TeamUnallocated, "h100", 999_999, 999_999, 900),
			row(h, "c2", "ml", "h100", 7, 0, 1),
		)
		b := row(h, "c1", "ml", "h100", 2_000_000, 500_000, 1200)
		b.Borrowed = true
		rows = append(rows, b)
	}
	return rows
}

var approx = cmpopts.EquateApprox(0, 1e-9)

// Run runs the contract suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	ctx := context.Background()
	t.Run("WriteTwiceIsIdempotent", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		q := ledger.Query{From: h0, To: h0.Add(3 * time.Hour), Step: ledger.StepHour, GroupBy: ledger.Dimensions}
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		first, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		second, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != 15 {
			t.Errorf("%d rows after the first write, want 15", len(first))
		}
		if diff := cmp.Diff(first, second, approx); diff != "" {
			t.Errorf("writing the same hours twice changed the ledger (-first +second):\n%s", diff)
		}
	})
	t.Run("RewriteReplacesTheHour", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		// A re-run of c1's first hour finds only the unallocated row: the
		// hour's other c1 rows must go, c2's and other hours' stay.
		redo := []ledger.Row{row(h0, "c1", ledger.TeamUnallocated, "h100", 7_234_567, 7_234_567, 6300)}
		if err := s.WriteHours(ctx, redo, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour), Step: ledger.StepHour,
			GroupBy: []ledger.Dimension{ledger.DimCluster, ledger.DimTeam}})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Row{
			{Key: ledger.Key{Hour: h0, Cluster: "c1", Team: ledger.TeamUnallocated}, GPUSeconds: 6300, ActiveGPUSeconds: 3150,
				CostMicros: 7_234_567, UnallocatedCostMicros: 7_234_567, EnergyJoules: 630000, EnergyCostMicros: 18900},
			{Key: ledger.Key{Hour: h0, Cluster: "c2", Team: "ml"}, GPUSeconds: 1, ActiveGPUSeconds: 0.5, CostMicros: 7, EnergyJoules: 100, EnergyCostMicros: 3},
		}
		if diff := cmp.Diff(want, got, approx); diff != "" {
			t.Errorf("after rewrite (-want +got):\n%s", diff)
		}
		// The rewritten hour's workload rows went with it; the next hour's
		// stayed.
		ws, err := s.TopWorkloads(ctx, ledger.Query{From: h0, To: h0.Add(2 * time.Hour), Cluster: "c1"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 3 || ws[0].CostMicros != 1_234_567 {
			t.Errorf("workloads after rewrite: %+v", ws)
		}
	})
	t.Run("QuerySteps", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		oct, nov := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		month, err := s.Query(ctx, ledger.Query{From: oct, To: nov.AddDate(0, 1, 0), Step: ledger.StepMonth,
			GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Row{
			{Key: ledger.Key{Hour: oct, Team: ledger.TeamUnallocated}, GPUSeconds: 1800, ActiveGPUSeconds: 900, CostMicros: 1_999_998, UnallocatedCostMicros: 1_999_998, EnergyJoules: 180000, EnergyCostMicros: 5400},
			{Key: ledger.Key{Hour: oct, Team: "ds"}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 2_469_134, IdleCostMicros: 2_469_134, EnergyJoules: 360000, EnergyCostMicros: 10800},
			{Key: ledger.Key{Hour: oct, Team: "ml"}, GPUSeconds: 9600, ActiveGPUSeconds: 4800, CostMicros: 14_000_002, IdleCostMicros: 3_000_000, EnergyJoules: 960000, EnergyCostMicros: 28800},
			{Key: ledger.Key{Hour: nov, Team: ledger.TeamUnallocated}, GPUSeconds: 900, ActiveGPUSeconds: 450, CostMicros: 999_999, UnallocatedCostMicros: 999_999, EnergyJoules: 90000, EnergyCostMicros: 2700},
			{Key: ledger.Key{Hour: nov, Team: "ds"}, GPUSeconds: 1800, ActiveGPUSeconds: 900, CostMicros: 1_234_567, IdleCostMicros: 1_234_567, EnergyJoules: 180000, EnergyCostMicros: 5400},
			{Key: ledger.Key{Hour: nov, Team: "ml"}, GPUSeconds: 4800, ActiveGPUSeconds: 2400, CostMicros: 7_000_001, IdleCostMicros: 1_500_000, EnergyJoules: 480000, EnergyCostMicros: 14400},
		}
		if diff := cmp.Diff(want, month, approx); diff != "" {
			t.Errorf("monthly by team (-want +got):\n%s", diff)
		}
		day, err := s.Query(ctx, ledger.Query{From: oct, To: nov.AddDate(0, 1, 0), Step: ledger.StepDay, Team: "ml"})
		if err != nil {
			t.Fatal(err)
		}
		wantDay := []ledger.Row{
			{Key: ledger.Key{Hour: h0.Truncate(24 * time.Hour)}, GPUSeconds: 9602, ActiveGPUSeconds: 4801, CostMicros: 14_000_016, IdleCostMicros: 3_000_000, EnergyJoules: 960200, EnergyCostMicros: 28806},
			{Key: ledger.Key{Hour: nov}, GPUSeconds: 4801, ActiveGPUSeconds: 2400.5, CostMicros: 7_000_008, IdleCostMicros: 1_500_000, EnergyJoules: 480100, EnergyCostMicros: 14403},
		}
		if diff := cmp.Diff(wantDay, day, approx); diff != "" {
			t.Errorf("daily for team ml (-want +got):\n%s", diff)
		}
		borrowed, err := s.Query(ctx, ledger.Query{From: oct, To: nov.AddDate(0, 1, 0), Step: ledger.StepMonth,
			GroupBy: []ledger.Dimension{ledger.DimBorrowed}, Team: "ml", Cluster: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		wantBorrowed := []ledger.Row{
			{Key: ledger.Key{Hour: oct}, GPUSeconds: 7200, ActiveGPUSeconds: 3600, CostMicros: 10_000_002, IdleCostMicros: 2_000_000, EnergyJoules: 720000, EnergyCostMicros: 21600},
			{Key: ledger.Key{Hour: oct, Borrowed: true}, GPUSeconds: 2400, ActiveGPUSeconds: 1200, CostMicros: 4_000_000, IdleCostMicros: 1_000_000, EnergyJoules: 240000, EnergyCostMicros: 7200},
			{Key: ledger.Key{Hour: nov}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 5_000_001, IdleCostMicros: 1_000_000, EnergyJoules: 360000, EnergyCostMicros: 10800},
			{Key: ledger.Key{Hour: nov, Borrowed: true}, GPUSeconds: 1200, ActiveGPUSeconds: 600, CostMicros: 2_000_000, IdleCostMicros: 500_000, EnergyJoules: 120000, EnergyCostMicros: 3600},
		}
		if diff := cmp.Diff(wantBorrowed, borrowed, approx); diff != "" {
			t.Errorf("ml in c1 by borrowed (-want +got):\n%s", diff)
		}
		none, err := s.Query(ctx, ledger.Query{From: nov.AddDate(0, 1, 0), To: nov.AddDate(0, 2, 0), Step: ledger.StepHour})
		if err != nil || len(none) != 0 {
			t.Errorf("empty range gave %v, %v", none, err)
		}
	})
	t.Run("TopWorkloads", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		q := ledger.Query{From: h0, To: h0.Add(3 * time.Hour)}
		got, err := s.TopWorkloads(ctx, q, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.WorkloadRow{
			{Hour: h0, Cluster: "c1", Team: "ds", Namespace: "ds-ns", Kind: "Pod", Name: "nb-0", GPUSeconds: 5400, ActiveGPUSeconds: 300, CostMicros: 3_703_701, IdleCostMicros: 3_600_000},
			{Hour: h0, Cluster: "c1", Team: "ml", Namespace: "ml-ns", Kind: "Job", Name: "train-1", GPUSeconds: 9000, ActiveGPUSeconds: 7500, CostMicros: 12_000_000, IdleCostMicros: 1_800_000},
		}
		if diff := cmp.Diff(want, got, approx); diff != "" {
			t.Errorf("top 2 workloads (-want +got):\n%s", diff)
		}
		q.Team = "ml"
		got, err = s.TopWorkloads(ctx, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1].Name != "sweep" || got[1].IdleCostMicros != 1_200_000 {
			t.Errorf("ml's workloads: %+v", got)
		}
		if _, err := s.TopWorkloads(ctx, q, 0); err == nil {
			t.Error("limit 0 accepted")
		}
	})
	t.Run("Checkpoints", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if got, err := s.Checkpoint(ctx, "vm"); err != nil || !got.IsZero() {
			t.Fatalf("new store's checkpoint: %v, %v", got, err)
		}
		at := time.Date(2026, 10, 5, 7, 0, 0, 0, time.UTC)
		for _, cp := range []time.Time{at.Add(-time.Hour), at} {
			if err := s.SetCheckpoint(ctx, "vm", cp); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetCheckpoint(ctx, "file", at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Checkpoint(ctx, "vm"); err != nil || !got.Equal(at) {
			t.Errorf("checkpoint vm = %v, %v; want %v", got, err, at)
		}
	})
	t.Run("StepsAgreeAfterRewrite", func(t *testing.T) {
		// Day and month answers (from a rollup, where a store keeps one)
		// are the sums of the hours, also after an hour was rewritten.
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture(), workloads()); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteHours(ctx, []ledger.Row{row(h0.Add(time.Hour), "c1", "ml", "h100", 1, 0, 60)}, nil); err != nil {
			t.Fatal(err)
		}
		// Whole days, and whole months (from a monthly rollup, where a
		// store keeps one).
		month := ledger.StepMonth.Truncate(h0)
		for _, span := range [][2]time.Time{{h0.Truncate(24 * time.Hour), h0.Truncate(24 * time.Hour).Add(48 * time.Hour)}, {month, month.AddDate(0, 2, 0)}} {
			stepsAgree(ctx, t, s, span[0], span[1])
		}
	})
	t.Run("Unmeasured", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		r := row(h0, "c1", "ml", "h100", 3_600_000, 400_000, 3600)
		r.UnmeasuredGPUSeconds, r.UnmeasuredCostMicros = 1200.5, 1_200_500
		w := ledger.WorkloadRow{Hour: h0, Cluster: "c1", Team: "ml", Namespace: "ml-ns", Kind: "Job", Name: "train-1",
			GPUSeconds: 3600, ActiveGPUSeconds: 1000, UnmeasuredGPUSeconds: 1200.5, CostMicros: 3_600_000, IdleCostMicros: 400_000, UnmeasuredCostMicros: 1_200_500}
		if err := s.WriteHours(ctx, []ledger.Row{r}, []ledger.WorkloadRow{w}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour), Step: ledger.StepHour, GroupBy: ledger.Dimensions})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.Row{r}, got, approx); diff != "" {
			t.Errorf("row with unmeasured time (-want +got):\n%s", diff)
		}
		ws, err := s.TopWorkloads(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour)}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.WorkloadRow{w}, ws, approx); diff != "" {
			t.Errorf("workload with unmeasured time (-want +got):\n%s", diff)
		}
	})
	t.Run("HourFlags", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		at := time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)
		f1 := ledger.HourFlag{Cluster: "c1", From: h0, To: h0.Add(2 * time.Hour), Reason: ledger.FlagLogLoss, Detail: "records 5-9 of 00000000000000000001.wal", At: at}
		f2 := ledger.HourFlag{Cluster: "c2", From: h0.Add(time.Hour), To: h0.Add(3 * time.Hour), Reason: ledger.FlagLogLoss, Detail: "x", At: at}
		if err := s.FlagHours(ctx, []ledger.HourFlag{f1, f2}); err != nil {
			t.Fatal(err)
		}
		// Written again, later (a second restart over the same damage):
		// kept once, with its first time.
		again := f1
		again.At = at.Add(time.Hour)
		if err := s.FlagHours(ctx, []ledger.HourFlag{again}); err != nil {
			t.Fatal(err)
		}
		got, err := s.HourFlags(ctx, "", h0.Add(time.Hour), h0.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.HourFlag{f1, f2}, got); diff != "" {
			t.Errorf("flags overlapping [h0+1h, h0+2h) (-want +got):\n%s", diff)
		}
		if got, err := s.HourFlags(ctx, "c1", h0.Add(2*time.Hour), h0.Add(9*time.Hour)); err != nil || len(got) != 0 {
			t.Errorf("c1's flags after its flagged hours: %v, %v", got, err)
		}
		if got, err := s.HourFlags(ctx, "c2", h0, h0.Add(9*time.Hour)); err != nil || len(got) != 1 || got[0].Cluster != "c2" {
			t.Errorf("c2's flags: %v, %v", got, err)
		}
		bad := f1
		bad.To = bad.From.Add(time.Minute)
		if err := s.FlagHours(ctx, []ledger.HourFlag{bad}); err == nil {
			t.Error("a flag of part of an hour was taken")
		}
	})
	t.Run("MonthClose", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		c := ledger.MonthClose{Month: oct, At: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC), By: "finance", Note: "invoiced"}
		if err := s.CloseMonth(ctx, c); err != nil {
			t.Fatal(err)
		}
		again := c
		again.At, again.By = c.At.Add(time.Hour), "someone-else"
		if err := s.CloseMonth(ctx, again); !errors.Is(err, ledger.ErrMonthClosed) {
			t.Errorf("closing October again: %v, want ErrMonthClosed", err)
		}
		if err := s.CloseMonth(ctx, ledger.MonthClose{Month: oct.Add(time.Hour), By: "x"}); err == nil {
			t.Error("a close of an hour that is not a month's start was taken")
		}
		if err := s.CloseMonth(ctx, ledger.MonthClose{Month: oct.AddDate(0, 1, 0)}); err == nil {
			t.Error("a close naming no one was taken")
		}
		got, err := s.ClosedMonths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.MonthClose{c}, got); diff != "" {
			t.Errorf("closed months (-want +got):\n%s", diff)
		}
		// ledger.CloseMonth: not before the month is over, nor before
		// every live path has settled it.
		if err := s.WriteHours(ctx, fixture(), nil); err != nil {
			t.Fatal(err)
		}
		nov := oct.AddDate(0, 1, 0)
		if err := ledger.CloseMonth(ctx, s, ledger.MonthClose{Month: nov, By: "finance"}, nov.AddDate(0, 0, 20)); err == nil {
			t.Error("November was closed on November 21st")
		}
		if err := s.SetCheckpoint(ctx, ledger.LiveCheckpoint("c2"), nov.AddDate(0, 0, 30).Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := ledger.CloseMonth(ctx, s, ledger.MonthClose{Month: nov, By: "finance"}, nov.AddDate(0, 1, 1)); err == nil || !strings.Contains(err.Error(), "c2") {
			t.Errorf("November closed while c2's live path had not settled its last hour: %v", err)
		}
		if err := s.SetCheckpoint(ctx, ledger.LiveCheckpoint("c2"), nov.AddDate(0, 1, 0)); err != nil {
			t.Fatal(err)
		}
		if err := ledger.CloseMonth(ctx, s, ledger.MonthClose{Month: nov, By: "finance"}, nov.AddDate(0, 1, 1)); err != nil {
			t.Errorf("November, settled: %v", err)
		}
		if got, err := s.ClosedMonths(ctx); err != nil || len(got) != 2 || !got[1].Month.Equal(nov) || !got[1].At.Equal(nov.AddDate(0, 1, 1)) {
			t.Errorf("closed months after November: %+v, %v", got, err)
		}
	})
	t.Run("Rewrite", func(t *testing.T) { testRewrite(t, open(t)) })
	t.Run("Audit", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		e := ledger.AuditEntry{At: time.Date(2026, 11, 2, 9, 30, 0, 123_000_000, time.UTC), Cluster: "c1", From: h0, To: h0.Add(2 * time.Hour),
			Source: "backfill:file:///x.jsonl", Rows: 42, Note: "rewrote 2 settled hours"}
		if err := s.RecordAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		later := e
		later.At, later.From, later.To = e.At.Add(time.Hour), h0.Add(5*time.Hour), h0.Add(6*time.Hour)
		if err := s.RecordAudit(ctx, later); err != nil {
			t.Fatal(err)
		}
		got, err := s.Audit(ctx, h0.Add(time.Hour), h0.Add(3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.AuditEntry{e}, got); diff != "" {
			t.Errorf("audit overlapping [h0+1h, h0+3h) (-want +got):\n%s", diff)
		}
		if got, err := s.Audit(ctx, h0.Add(2*time.Hour), h0.Add(5*time.Hour)); err != nil || len(got) != 0 {
			t.Errorf("audit of untouched hours: %v, %v", got, err)
		}
	})
	t.Run("QueueHours", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		inf := math.Inf(1)
		wait := ledger.Histogram{Bounds: []float64{1, 2.5, 1280, 2560, inf}, Counts: []float64{0, 1, 3, 7, 8}}
		pending := ledger.Histogram{Bounds: []float64{1280, 2560, inf}, Counts: []float64{1, 1, 2}}
		q := func(h time.Time, cluster, cq string, n float64) ledger.QueueRow {
			return ledger.QueueRow{Hour: h, Cluster: cluster, ClusterQueue: cq, PendingWorkloads: n, PendingGPUs: 8 * n, Admitted: 8,
				AdmittedWait: wait, PendingWait: pending}
		}
		first := []ledger.QueueRow{q(h0, "c1", "ml", 2), q(h0, "c1", "vision", 1), q(h0.Add(time.Hour), "c1", "ml", 3), q(h0, "c2", "ml", 4)}
		first[1].AdmittedWait, first[1].PendingWait = ledger.Histogram{}, ledger.Histogram{}
		if err := s.WriteQueueHours(ctx, first); err != nil {
			t.Fatal(err)
		}
		// Rewriting c1's first hour replaces both of its queues' rows:
		// vision is gone from it.
		redo := []ledger.QueueRow{q(h0, "c1", "ml", 5)}
		if err := s.WriteQueueHours(ctx, redo); err != nil {
			t.Fatal(err)
		}
		got, err := s.QueueHours(ctx, "c1", h0, h0.Add(3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.QueueRow{redo[0], first[2]}
		if diff := cmp.Diff(want, got, approx); diff != "" {
			t.Errorf("c1's queue hours (-want +got):\n%s", diff)
		}
		all, err := s.QueueHours(ctx, "", h0, h0.Add(time.Hour))
		if err != nil || len(all) != 2 || all[1].Cluster != "c2" {
			t.Errorf("every cluster's first hour: %+v, %v", all, err)
		}
		bad := q(h0, "c1", "ml", 1)
		bad.AdmittedWait.Counts = []float64{0, 1, 3, 2, 8}
		if err := s.WriteQueueHours(ctx, []ledger.QueueRow{bad}); err == nil {
			t.Error("a histogram whose cumulative counts fall was accepted")
		}
		bad = q(h0, "c1", "", 1)
		if err := s.WriteQueueHours(ctx, []ledger.QueueRow{bad}); err == nil {
			t.Error("a queue row without a ClusterQueue was accepted")
		}
		if got, err := s.QueueHours(ctx, "c1", h0, h0.Add(time.Hour)); err != nil || len(got) != 1 || got[0].PendingWorkloads != 5 {
			t.Errorf("after rejected writes: %+v, %v", got, err)
		}
	})
	t.Run("EndpointHours", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		var gaps ledger.Gaps
		for _, g := range []float64{45, 45, 290, 7300, 20000} {
			gaps.Add(g)
		}
		// The requests that came as they ended: kept as written.
		gaps.AddWoken(ledger.Bucket(60), []float64{1, 2, 2, 3, 3.5}, 5)
		gaps.AddWoken(ledger.Bucket(60), []float64{1, 1, 1, 1, 1}, 3)
		gaps.AddWoken(ledger.Bucket(300), []float64{0, 0, 2, 2, 2}, 5)
		gaps.AddWoken(ledger.Bucket(7300), []float64{4, 4, 9, 12, 30}, 5)
		gaps.AddUnmeasured(ledger.Bucket(20000))
		e := func(h time.Time, cluster, model string, busy float64) ledger.EndpointRow {
			return ledger.EndpointRow{Hour: h, Cluster: cluster, Namespace: "serve", Model: model, Kind: "ReplicaSet", Name: model + "-7d9f8b6c5",
				Pods: 2, ReportedSeconds: 3600, BusySeconds: busy, Requests: 120, GenerationTokens: 51200, Gaps: gaps}
		}
		// Two serving workloads of the namespace known from GPU activity
		// alone (no model): one row each.
		gpuA, gpuB := e(h0.Add(time.Hour), "c1", "", 60), e(h0.Add(time.Hour), "c1", "", 120)
		gpuA.Name, gpuB.Name, gpuB.Kind = "sd-5f6d8c7b9", "sd-xl", "LeaderWorkerSet"
		gpuA.Requests, gpuA.GenerationTokens, gpuB.Requests, gpuB.GenerationTokens = 0, 0, 0, 0
		first := []ledger.EndpointRow{e(h0, "c1", "llama", 600), e(h0, "c1", "qwen", 0), e(h0.Add(time.Hour), "c1", "llama", 30), e(h0, "c2", "llama", 1), gpuA, gpuB}
		first[1].Gaps, first[1].IdleSince = ledger.Gaps{}, h0.Add(-90*time.Minute)
		if err := s.WriteEndpointHours(ctx, first); err != nil {
			t.Fatal(err)
		}
		// Rewriting c1's first hour replaces both of its endpoints' rows:
		// qwen is gone from it.
		redo := []ledger.EndpointRow{e(h0, "c1", "llama", 900)}
		if err := s.WriteEndpointHours(ctx, redo); err != nil {
			t.Fatal(err)
		}
		got, err := s.EndpointHours(ctx, "c1", h0, h0.Add(3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.EndpointRow{redo[0], gpuB, gpuA, first[2]}, got, approx); diff != "" {
			t.Errorf("c1's endpoint hours (-want +got):\n%s", diff)
		}
		all, err := s.EndpointHours(ctx, "", h0, h0.Add(time.Hour))
		if err != nil || len(all) != 2 || all[1].Cluster != "c2" {
			t.Errorf("every cluster's first hour: %+v, %v", all, err)
		}
		s2 := e(h0.Add(2*time.Hour), "c1", "qwen", 0)
		s2.Gaps, s2.IdleSince = ledger.Gaps{}, h0.Add(-90*time.Minute)
		if err := s.WriteEndpointHours(ctx, []ledger.EndpointRow{s2}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.EndpointHours(ctx, "c1", h0.Add(2*time.Hour), h0.Add(3*time.Hour)); err != nil || len(got) != 1 || !got[0].IdleSince.Equal(s2.IdleSince) || got[0].Gaps.Counts != nil {
			t.Errorf("an idle endpoint's hour: %+v, %v", got, err)
		}
		bad := e(h0, "c1", "llama", 1)
		bad.Gaps.Seconds = append([]float64{}, bad.Gaps.Seconds...)
		bad.Gaps.Seconds[0] = 1e6 // more than 30 s per gap in the first bucket
		if err := s.WriteEndpointHours(ctx, []ledger.EndpointRow{bad}); err == nil {
			t.Error("gaps too long for their bucket were accepted")
		}
		bad = e(h0, "c1", "", 1)
		bad.Name = ""
		if err := s.WriteEndpointHours(ctx, []ledger.EndpointRow{bad}); err == nil {
			t.Error("an endpoint row with neither a model nor a workload was accepted")
		}
		bad = e(h0, "c1", "llama", 4000)
		if err := s.WriteEndpointHours(ctx, []ledger.EndpointRow{bad}); err == nil {
			t.Error("more busy seconds than reported were accepted")
		}
		if got, err := s.EndpointHours(ctx, "c1", h0, h0.Add(time.Hour)); err != nil || len(got) != 1 || got[0].BusySeconds != 900 {
			t.Errorf("after rejected writes: %+v, %v", got, err)
		}
	})
	t.Run("WorkloadTimes", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		w := func(name string, submit time.Duration) ledger.WorkloadTime {
			return ledger.WorkloadTime{Cluster: "c1", Namespace: "ml", Name: name, LocalQueue: "train", Resource: "nvidia.com/gpu", Count: 8,
				Submit: h0.Add(submit)}
		}
		a, b, c := w("a", 0), w("b", 10*time.Minute), w("c", 2*time.Hour)
		d := w("d", 20*time.Minute)
		d.Cluster = "c2"
		if err := s.WriteWorkloadTimes(ctx, []ledger.WorkloadTime{a, b, c, d}); err != nil {
			t.Fatal(err)
		}
		// a is admitted and finishes: written again, it replaces itself.
		a.Admit, a.Finish = h0.Add(40*time.Minute), h0.Add(3*time.Hour)
		if err := s.WriteWorkloadTimes(ctx, []ledger.WorkloadTime{a}); err != nil {
			t.Fatal(err)
		}
		got, err := s.WorkloadTimes(ctx, "c1", h0, h0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ledger.WorkloadTime{a, b}, got); diff != "" {
			t.Errorf("c1's workloads submitted in the first hour (-want +got):\n%s", diff)
		}
		if all, err := s.WorkloadTimes(ctx, "", h0, h0.Add(time.Hour)); err != nil || len(all) != 3 {
			t.Errorf("every cluster's: %+v, %v", all, err)
		}
		bad := w("e", 0)
		bad.Admit = h0.Add(-time.Minute)
		if err := s.WriteWorkloadTimes(ctx, []ledger.WorkloadTime{b, bad}); err == nil {
			t.Error("a workload admitted before its submission was accepted")
		}
		bad = w("f", 0)
		bad.Finish = h0.Add(time.Hour)
		if err := s.WriteWorkloadTimes(ctx, []ledger.WorkloadTime{bad}); err == nil {
			t.Error("a workload finished without an admission was accepted")
		}
		if got, err := s.WorkloadTimes(ctx, "c1", h0, h0.Add(3*time.Hour)); err != nil || len(got) != 3 {
			t.Errorf("after rejected writes: %+v, %v", got, err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		bad := fixture()[:1]
		bad[0].Hour = bad[0].Hour.Add(time.Minute)
		if err := s.WriteHours(ctx, bad, nil); err == nil {
			t.Error("a row not on an hour boundary was accepted")
		}
		if _, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour), Step: 0}); err == nil {
			t.Error("a query without a step was accepted")
		}
		if _, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour), Step: ledger.StepHour, GroupBy: []ledger.Dimension{"pod"}}); err == nil {
			t.Error("an unknown dimension was accepted")
		}
		// Nothing of the rejected write landed.
		got, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(3 * time.Hour), Step: ledger.StepHour})
		if err != nil || len(got) != 0 {
			t.Errorf("after a rejected write: %v, %v", got, err)
		}
	})
	t.Run("Lines", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		RunLines(t, s)
	})
}

// RunLines: lines are written per (cluster, hour), replaced when the hour
// is written again, summed per identity over a range (as ledger.SumLines
// sums them), and narrowed to a team or a workload. store must hold no
// lines yet.
func RunLines(t *testing.T, store ledger.Store) {
	t.Helper()
	ctx := context.Background()
	s, ok := store.(ledger.LineStore)
	if !ok {
		t.Fatalf("%T keeps no lines (ledger.LineStore)", store)
	}
	hour := func(h time.Time, mlCost int64) []ledger.Line {
		ml := ledger.Key{Hour: h, Cluster: "c1", Team: "ml", Namespace: "research", Flavor: "h100"}
		un := ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}
		return []ledger.Line{
			{Key: ml, Kind: ledger.LineUsage, Node: "n1", GPU: "0", Pod: "train-0-a", WorkloadKind: "Job", Workload: "train-0", RateMicrosPerHour: 6_880_000,
				RateSource: "price book aws/p5.48xlarge on-demand",
				GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: mlCost, IdleCostMicros: mlCost / 2, EnergyCostMicros: 17},
			{Key: un, Kind: ledger.LineUnallocated, Node: "n1", GPU: "1", MIG: "3g.40gb+4g.40gb", RateMicrosPerHour: 6_880_000, GPUSeconds: 3600,
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
	span := ledger.LineQuery{From: h0, To: h0.Add(2 * time.Hour)}
	ml := span
	ml.Team = "ml"
	got, err := s.Lines(ctx, ml)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].CostMicros != 6_880_000+3_440_000 || got[0].GPUSeconds != 7200 || got[0].Pod != "train-0-a" || !got[0].Hour.Equal(h0) ||
		got[0].RateSource != "price book aws/p5.48xlarge on-demand" {
		t.Fatalf("ml's lines %+v; want one line of 10,320,000 over 7,200 GPU-seconds", got)
	}
	all, err := s.Lines(ctx, span)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.SumLines(append(hour(h0, 6_880_000), hour(h0.Add(time.Hour), 3_440_000)...), h0)
	if diff := cmp.Diff(want, all, approx); diff != "" {
		t.Errorf("stored lines differ from ledger.SumLines of what was written (-want +got):\n%s", diff)
	}
	wl := span
	wl.Namespace, wl.Workload = "research", "train-0"
	if got, err := s.Lines(ctx, wl); err != nil || len(got) != 1 || got[0].Workload != "train-0" {
		t.Errorf("train-0's lines %+v, %v; want its one line", got, err)
	}
	if got, err := s.Lines(ctx, ledger.LineQuery{From: h0.Add(2 * time.Hour), To: h0.Add(3 * time.Hour)}); err != nil || len(got) != 0 {
		t.Errorf("an hour with no lines: %+v, %v", got, err)
	}
}

// Dump returns everything a Store holds for [from, to): every hour's rows
// by every dimension, and its workload rows (up to 10,000), for tests that
// compare two ledgers.
func Dump(t testing.TB, s ledger.Store, from, to time.Time) ([]ledger.Row, []ledger.WorkloadRow) {
	t.Helper()
	rows, err := s.Query(context.Background(), ledger.Query{From: from, To: to, Step: ledger.StepHour, GroupBy: ledger.Dimensions})
	if err != nil {
		t.Fatal(err)
	}
	wls, err := s.TopWorkloads(context.Background(), ledger.Query{From: from, To: to}, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	return rows, wls
}

// stepsAgree checks that s's day and month answers over [from, to) are
// the sums of its hours.
func stepsAgree(ctx context.Context, t *testing.T, s ledger.Store, from, to time.Time) {
	t.Helper()
	group := []ledger.Dimension{ledger.DimCluster, ledger.DimTeam, ledger.DimFlavor, ledger.DimBorrowed}
	hours, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepHour, GroupBy: group})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []ledger.Step{ledger.StepDay, ledger.StepMonth} {
		sum := map[ledger.Key]ledger.Row{}
		for _, r := range hours {
			k := r.Key
			k.Hour = step.Truncate(k.Hour)
			acc := sum[k]
			acc.Key = k
			acc.GPUSeconds += r.GPUSeconds
			acc.ActiveGPUSeconds += r.ActiveGPUSeconds
			acc.CostMicros += r.CostMicros
			acc.IdleCostMicros += r.IdleCostMicros
			acc.UnallocatedCostMicros += r.UnallocatedCostMicros
			acc.EnergyJoules += r.EnergyJoules
			acc.EnergyCostMicros += r.EnergyCostMicros
			sum[k] = acc
		}
		got, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: step, GroupBy: group})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(sum) {
			t.Errorf("%s: %d rows, the hours sum to %d", step, len(got), len(sum))
		}
		for _, r := range got {
			if diff := cmp.Diff(sum[r.Key], r, approx); diff != "" {
				t.Errorf("%s differs from the sum of its hours (-hours +%s):\n%s", step, step, diff)
			}
		}
	}
}
