package admission

import (
	"math"
	"testing"
)

func TestMoneyWeights(t *testing.T) {
	for _, c := range []struct {
		name               string
		spend, entitlement map[string]float64
		want               map[string]float64
	}{
		{"nothing spent: Kueue's own order", map[string]float64{}, map[string]float64{"a": 1, "b": 3}, map[string]float64{"a": 1, "b": 1}},
		{"spent as entitled", map[string]float64{"a": 10, "b": 30}, map[string]float64{"a": 1, "b": 3}, map[string]float64{"a": 1, "b": 1}},
		// The cohort spent 40 for 2 of entitlement (20 each); a spent 30
		// on 1 (30: 1.5x), b 10 on 1 (10: 0.5x).
		{"over and under", map[string]float64{"a": 30, "b": 10}, map[string]float64{"a": 1, "b": 1}, map[string]float64{"a": 2.0 / 3, "b": 2}},
		// The cohort's 1009 for 10 is 100.9 each; a's 1000 on 1 is ten times
		// that, b's 9 on 9 a hundredth.
		{"bounded", map[string]float64{"a": 1000, "b": 9}, map[string]float64{"a": 1, "b": 9}, map[string]float64{"a": 1 / MoneyWeightBound, "b": MoneyWeightBound}},
		{"spent nothing while others spent", map[string]float64{"a": 5}, map[string]float64{"a": 1, "b": 1}, map[string]float64{"a": 0.5, "b": MoneyWeightBound}},
		{"no entitlement: left out", map[string]float64{"a": 5, "x": 50}, map[string]float64{"a": 1, "x": 0}, map[string]float64{"a": 1}},
	} {
		got := MoneyWeights(c.spend, c.entitlement)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for q, w := range c.want {
			if math.Abs(got[q]-w) > 1e-12 {
				t.Errorf("%s: weight of %s %g, want %g (all: %v)", c.name, q, got[q], w, got)
			}
		}
	}
}

// TestMoneyWeightsReorderBorrowers: the weights change Kueue's order only
// among borrowers, and put the one that spent more per entitlement behind.
func TestMoneyWeightsReorderBorrowers(t *testing.T) {
	s := &Snapshot{Queues: map[string]*ClusterQueue{
		"a": {Name: "a", Cohort: "c", Quotas: map[FlavorResource]Quota{{"h100", "gpu"}: {Nominal: 10, LendingLimit: -1}}},
		"b": {Name: "b", Cohort: "c", Quotas: map[FlavorResource]Quota{{"h100", "gpu"}: {Nominal: 10, LendingLimit: -1}}},
		"c": {Name: "c", Cohort: "c", Quotas: map[FlavorResource]Quota{{"h100", "gpu"}: {Nominal: 10, LendingLimit: -1}}},
	}, Usage: map[string]map[FlavorResource]int64{
		"a": {{"h100", "gpu"}: 12}, "b": {{"h100", "gpu"}: 12}, "c": {{"h100", "gpu"}: 4},
	}}
	p := KueueFairSharing{PolicyName: "costfair-drs"}
	if a, b := p.QueueShare(s, "a"), p.QueueShare(s, "b"); a != b || a <= 0 {
		t.Fatalf("equal borrowers, equal weights: shares %g and %g", a, b)
	}
	for q, w := range MoneyWeights(map[string]float64{"a": 30, "b": 10, "c": 20}, map[string]float64{"a": 1, "b": 1, "c": 1}) {
		s.Queues[q].Weight = w
	}
	if a, b := p.QueueShare(s, "a"), p.QueueShare(s, "b"); a <= b {
		t.Errorf("a spent three times b's money: share %g, want above b's %g", a, b)
	}
	if c := p.QueueShare(s, "c"); c != 0 {
		t.Errorf("c is within its quota: share %g, want 0 whatever its weight", c)
	}
	if p.Name() != "costfair-drs" || (KueueFairSharing{}).Name() != "kueue" {
		t.Errorf("names %q and %q", p.Name(), KueueFairSharing{}.Name())
	}
}

// TestUsageWeights: usage / share for the queues with both, scaled to
// average 1, so that usage / weight is in the ratio of the shares; a queue
// with usage but no share, or a share but no usage, gets 1; the bounds
// hold; a weight is written only past the hysteresis.
func TestUsageWeights(t *testing.T) {
	w := UsageWeights(map[string]float64{"a": 100, "b": 100, "c": 50}, map[string]float64{"a": 3, "b": 1, "d": 2})
	if math.Abs(w["a"]-0.5) > 1e-12 || math.Abs(w["b"]-1.5) > 1e-12 || w["c"] != 1 || w["d"] != 1 || len(w) != 4 {
		t.Errorf("weights %v, want a 0.5, b 1.5, c and d 1", w)
	}
	if ka, kb := 100/w["a"], 100/w["b"]; math.Abs(ka/kb-3) > 1e-12 {
		t.Errorf("usage / weight %g and %g, want the shares' ratio 3", ka, kb)
	}
	w = UsageWeights(map[string]float64{"x": 1e9, "y": 1e-9}, map[string]float64{"x": 1, "y": 1})
	// x's raw weight is twice the mean; y's, far under it, is bounded.
	if math.Abs(w["x"]-2) > 1e-9 || w["y"] != MinUsageWeight {
		t.Errorf("weights %v, want x 2 and y the bound %g", w, MinUsageWeight)
	}
	if WeightChanged(1, 1.05, DefaultHysteresis) || !WeightChanged(1, 1.2, DefaultHysteresis) || !WeightChanged(0, 1, DefaultHysteresis) {
		t.Error("hysteresis: want 5% kept, 20% written, an unset weight written")
	}
}
