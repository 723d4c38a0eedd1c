// Package ledgertest is the contract test suite every ledger.Store must
// pass: the same inputs give the same answers on every backend.
package ledgertest

import (
	"context"
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
	return ledger.Row{Key: ledger.Key{Hour: hour, Cluster: cluster, Team: team, Namespace: team + "-ns", Flavor: flavor},
		GPUSeconds: secs, ActiveGPUSeconds: secs / 2, CostMicros: cost, IdleCostMicros: idle, EnergyJoules: secs * 100}
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
		if err := s.WriteHours(ctx, fixture()); err != nil {
			t.Fatal(err)
		}
		first, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteHours(ctx, fixture()); err != nil {
			t.Fatal(err)
		}
		second, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != 12 {
			t.Errorf("%d rows after the first write, want 12", len(first))
		}
		if diff := cmp.Diff(first, second, approx); diff != "" {
			t.Errorf("writing the same hours twice changed the ledger (-first +second):\n%s", diff)
		}
	})
	t.Run("RewriteReplacesTheHour", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture()); err != nil {
			t.Fatal(err)
		}
		// A re-run of c1's first hour finds only the unallocated row: the
		// hour's other c1 rows must go, c2's and other hours' stay.
		redo := []ledger.Row{row(h0, "c1", ledger.TeamUnallocated, "h100", 7_234_567, 7_234_567, 6300)}
		if err := s.WriteHours(ctx, redo); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(ctx, ledger.Query{From: h0, To: h0.Add(time.Hour), Step: ledger.StepHour,
			GroupBy: []ledger.Dimension{ledger.DimCluster, ledger.DimTeam}})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Row{
			{Key: ledger.Key{Hour: h0, Cluster: "c1", Team: ledger.TeamUnallocated}, GPUSeconds: 6300, ActiveGPUSeconds: 3150,
				CostMicros: 7_234_567, IdleCostMicros: 7_234_567, EnergyJoules: 630000},
			{Key: ledger.Key{Hour: h0, Cluster: "c2", Team: "ml"}, GPUSeconds: 1, ActiveGPUSeconds: 0.5, CostMicros: 7, EnergyJoules: 100},
		}
		if diff := cmp.Diff(want, got, approx); diff != "" {
			t.Errorf("after rewrite (-want +got):\n%s", diff)
		}
	})
	t.Run("QuerySteps", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		if err := s.WriteHours(ctx, fixture()); err != nil {
			t.Fatal(err)
		}
		oct, nov := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		month, err := s.Query(ctx, ledger.Query{From: oct, To: nov.AddDate(0, 1, 0), Step: ledger.StepMonth,
			GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		want := []ledger.Row{
			{Key: ledger.Key{Hour: oct, Team: ledger.TeamUnallocated}, GPUSeconds: 1800, ActiveGPUSeconds: 900, CostMicros: 1_999_998, IdleCostMicros: 1_999_998, EnergyJoules: 180000},
			{Key: ledger.Key{Hour: oct, Team: "ds"}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 2_469_134, IdleCostMicros: 2_469_134, EnergyJoules: 360000},
			{Key: ledger.Key{Hour: oct, Team: "ml"}, GPUSeconds: 7200, ActiveGPUSeconds: 3600, CostMicros: 10_000_002, IdleCostMicros: 2_000_000, EnergyJoules: 720000},
			{Key: ledger.Key{Hour: nov, Team: ledger.TeamUnallocated}, GPUSeconds: 900, ActiveGPUSeconds: 450, CostMicros: 999_999, IdleCostMicros: 999_999, EnergyJoules: 90000},
			{Key: ledger.Key{Hour: nov, Team: "ds"}, GPUSeconds: 1800, ActiveGPUSeconds: 900, CostMicros: 1_234_567, IdleCostMicros: 1_234_567, EnergyJoules: 180000},
			{Key: ledger.Key{Hour: nov, Team: "ml"}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 5_000_001, IdleCostMicros: 1_000_000, EnergyJoules: 360000},
		}
		if diff := cmp.Diff(want, month, approx); diff != "" {
			t.Errorf("monthly by team (-want +got):\n%s", diff)
		}
		day, err := s.Query(ctx, ledger.Query{From: oct, To: nov.AddDate(0, 1, 0), Step: ledger.StepDay, Team: "ml"})
		if err != nil {
			t.Fatal(err)
		}
		wantDay := []ledger.Row{
			{Key: ledger.Key{Hour: h0.Truncate(24 * time.Hour)}, GPUSeconds: 7202, ActiveGPUSeconds: 3601, CostMicros: 10_000_016, IdleCostMicros: 2_000_000, EnergyJoules: 720200},
			{Key: ledger.Key{Hour: nov}, GPUSeconds: 3601, ActiveGPUSeconds: 1800.5, CostMicros: 5_000_008, IdleCostMicros: 1_000_000, EnergyJoules: 360100},
		}
		if diff := cmp.Diff(wantDay, day, approx); diff != "" {
			t.Errorf("daily for team ml (-want +got):\n%s", diff)
		}
		none, err := s.Query(ctx, ledger.Query{From: nov.AddDate(0, 1, 0), To: nov.AddDate(0, 2, 0), Step: ledger.StepHour})
		if err != nil || len(none) != 0 {
			t.Errorf("empty range gave %v, %v", none, err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		s := open(t)
		defer s.Close()
		bad := fixture()[:1]
		bad[0].Hour = bad[0].Hour.Add(time.Minute)
		if err := s.WriteHours(ctx, bad); err == nil {
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
}
