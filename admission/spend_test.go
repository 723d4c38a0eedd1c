package admission

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// spendStore answers Query with its rows, grouped by nothing: the test
// checks what was asked for.
type spendStore struct {
	ledger.Store
	rows  []ledger.Row
	asked ledger.Query
}

func (s *spendStore) Query(_ context.Context, q ledger.Query) ([]ledger.Row, error) {
	s.asked = q
	return s.rows, nil
}

// TestLedgerSpendBy: the spend is keyed by team or by ClusterQueue, as
// asked, decayed from each hour's middle, energy included, and the
// unallocated and unkeyed rows are left out; another dimension is refused
// with its name.
func TestLedgerSpendBy(t *testing.T) {
	h0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	row := func(team, cq string, hour time.Time, cost, energy int64) ledger.Row {
		return ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "c", Team: team, ClusterQueue: cq}, CostMicros: cost, EnergyCostMicros: energy}
	}
	s := &spendStore{rows: []ledger.Row{
		row("a", "qa", h0, 1000, 0),
		row("a", "qa", h0.Add(time.Hour), 500, 500),
		row("b", "qb", h0.Add(time.Hour), 2000, 0),
		row(ledger.TeamUnallocated, "", h0.Add(time.Hour), 9999, 0),
	}}
	now := h0.Add(2*time.Hour + 30*time.Minute) // the second hour's middle plus an hour
	l := LedgerSpend{Store: s, Cluster: "c", HalfLife: time.Hour}
	got, err := l.Spend(context.Background(), now, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.asked.GroupBy, []ledger.Dimension{ledger.DimTeam}) || s.asked.Cluster != "c" {
		t.Errorf("asked %+v, want the cluster's spend by team", s.asked)
	}
	want := map[string]float64{"a": 1000/4.0 + 1000/2.0, "b": 2000 / 2.0}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("team %s: %g, want %g", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want the teams %v only", got, want)
	}
	// The newest hour read ends at h0 + 2 h: the ledger is settled to there.
	if _, settled, err := l.SpendThrough(context.Background(), now, now); err != nil || !settled.Equal(h0.Add(2*time.Hour)) {
		t.Errorf("settled through %s (%v), want %s", settled, err, h0.Add(2*time.Hour))
	}
	l.By = ledger.DimClusterQueue
	got, err = l.Spend(context.Background(), now, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.asked.GroupBy, []ledger.Dimension{ledger.DimClusterQueue}) {
		t.Errorf("asked %+v, want the spend by ClusterQueue", s.asked)
	}
	if math.Abs(got["qa"]-want["a"]) > 1e-9 || math.Abs(got["qb"]-want["b"]) > 1e-9 || len(got) != 2 {
		t.Errorf("by ClusterQueue: %v, want qa %g and qb %g", got, want["a"], want["b"])
	}
	l.By = ledger.DimFlavor
	if _, err := l.Spend(context.Background(), now, now); err == nil || !strings.Contains(err.Error(), `"flavor"`) {
		t.Errorf("spend by flavor: %v, want an error naming it", err)
	}
}

// TestLedgerSpendIdlePenalty: with IdlePenalty p an hour's idle cost counts
// 1+p times, the rest once; without it idle time costs what it costs; a
// negative or non-finite penalty is refused with its value.
func TestLedgerSpendIdlePenalty(t *testing.T) {
	h0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	s := &spendStore{rows: []ledger.Row{{Key: ledger.Key{Hour: h0, Cluster: "c", Team: "notebooks"}, CostMicros: 4000, IdleCostMicros: 3000, EnergyCostMicros: 100}}}
	now := h0.Add(30 * time.Minute) // the hour's middle: no decay
	for _, c := range []struct {
		penalty, want float64
	}{{0, 4100}, {1, 7100}, {0.5, 5600}} {
		got, err := LedgerSpend{Store: s, Cluster: "c", HalfLife: time.Hour, IdlePenalty: c.penalty}.Spend(context.Background(), now, now)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got["notebooks"]-c.want) > 1e-9 {
			t.Errorf("idle penalty %g: %g, want %g", c.penalty, got["notebooks"], c.want)
		}
	}
	for _, bad := range []float64{-0.5, math.NaN(), math.Inf(1)} {
		_, err := LedgerSpend{Store: s, Cluster: "c", HalfLife: time.Hour, IdlePenalty: bad}.Spend(context.Background(), now, now)
		if err == nil || !strings.Contains(err.Error(), "idle penalty") {
			t.Errorf("idle penalty %v: %v, want an error naming it", bad, err)
		}
	}
}
