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
