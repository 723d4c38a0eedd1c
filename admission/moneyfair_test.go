package admission

import (
	"math"
	"testing"
)

// TestMoneyFairTargets: the mechanism scenario's cluster (16 H100, 16
// A100, 48 T4, 9 H100 as MIG slices) among four teams of equal weight
// pinned to flavors. Whoever has only the MIG slices gets all of them
// (61.92 an hour, above the others' level); the other three are raised
// together to (16×6.88 + 16×2.7447 + 48×0.526)/3 = 59.7477 each, and the
// A100s and T4s the team that may also run on H100s leaves to the team
// that may not are what makes that possible. Weights scale the levels,
// and no flavor is split beyond its capacity.
func TestMoneyFairTargets(t *testing.T) {
	capacity := map[string]float64{"h100": 16 * 6.88, "a100": 16 * 2.7447, "t4": 48 * 0.526, "mig": 9 * 6.88}
	demands := []MoneyDemand{
		{Queue: "llm", Weight: 1, Flavors: []string{"h100"}},
		{Queue: "vision", Weight: 1, Flavors: []string{"a100", "t4"}},
		{Queue: "research", Weight: 1, Flavors: []string{"h100", "a100", "t4"}},
		{Queue: "notebooks", Weight: 1, Flavors: []string{"mig"}},
	}
	got := MoneyFairTargets(demands, capacity)
	level := (16*6.88 + 16*2.7447 + 48*0.526) / 3
	want := map[string]float64{"llm": level, "vision": level, "research": level, "notebooks": 9 * 6.88}
	checkTargets(t, got, demands, capacity, want)

	// Weights 2:1 on one flavor split it 2:1; a third queue on a flavor
	// of its own keeps it whole however small its weight.
	capacity = map[string]float64{"a": 90, "b": 10}
	demands = []MoneyDemand{
		{Queue: "x", Weight: 2, Flavors: []string{"a"}},
		{Queue: "y", Weight: 1, Flavors: []string{"a"}},
		{Queue: "z", Weight: 0.1, Flavors: []string{"b"}},
	}
	checkTargets(t, MoneyFairTargets(demands, capacity), demands, capacity, map[string]float64{"x": 60, "y": 30, "z": 10})

	// A queue that may run anywhere yields the small flavor to the one
	// that may run only there, and tops up on the large one.
	capacity = map[string]float64{"big": 100, "small": 20}
	demands = []MoneyDemand{
		{Queue: "any", Weight: 1, Flavors: []string{"big", "small"}},
		{Queue: "pinned", Weight: 1, Flavors: []string{"small"}},
		{Queue: "big-only", Weight: 1, Flavors: []string{"big"}},
	}
	got = MoneyFairTargets(demands, capacity)
	checkTargets(t, got, demands, capacity, map[string]float64{"any": 50, "pinned": 20, "big-only": 50})
	if got["any"]["small"] > 1e-6 {
		t.Errorf("targets %v: the queue with a choice takes %.3f of the flavor the pinned one has alone", got, got["any"]["small"])
	}

	if got := MoneyFairTargets(nil, capacity); got != nil {
		t.Errorf("no demands: %v, want nil", got)
	}
}

func checkTargets(t *testing.T, got map[string]map[string]float64, demands []MoneyDemand, capacity map[string]float64, want map[string]float64) {
	t.Helper()
	used := map[string]float64{}
	for _, d := range demands {
		var sum float64
		for f, v := range got[d.Queue] {
			allowed := false
			for _, g := range d.Flavors {
				allowed = allowed || g == f
			}
			if !allowed {
				t.Errorf("%s gets %.3f of %s, a flavor it cannot use", d.Queue, v, f)
			}
			sum += v
			used[f] += v
		}
		if math.Abs(sum-want[d.Queue]) > 1e-6*want[d.Queue] {
			t.Errorf("%s: target %.6f (%v); want %.6f", d.Queue, sum, got[d.Queue], want[d.Queue])
		}
	}
	for f, u := range used {
		if u > capacity[f]*(1+1e-9) {
			t.Errorf("flavor %s: %.6f given out of %.6f", f, u, capacity[f])
		}
	}
}

// TestMoneyTargetsAllows: a queue at its target of a flavor may not take
// more of it while a backlogged queue under its own target could use it;
// a queue under its target takes a workload that leaves it nearer its
// target than it was, not one that overshoots by more; once no queue
// under its target remains (it is not backlogged, or holds its target),
// the flavor is open to anyone, so no GPU idles for a target.
func TestMoneyTargetsAllows(t *testing.T) {
	a100 := FlavorResource{Flavor: "a100", Resource: "nvidia.com/gpu"}
	h100 := FlavorResource{Flavor: "h100", Resource: "nvidia.com/gpu"}
	rate := map[FlavorResource]float64{a100: 2, h100: 6}
	units := map[FlavorResource]int64{a100: 4, h100: 2}
	both := []MoneyDemand{
		{Queue: "research", Weight: 1, Flavors: []string{"h100", "a100"}},
		{Queue: "vision", Weight: 1, Flavors: []string{"a100"}},
	}
	tg := NewMoneyTargets(both, units, rate)
	// research: all of the H100s (12); vision: all of the A100s (8).
	if tg.Target["research"]["a100"] != 0 || math.Abs(tg.Target["vision"]["a100"]-8) > 1e-6 {
		t.Fatalf("targets %v", tg.Target)
	}
	s := &Snapshot{Usage: map[string]map[FlavorResource]int64{"research": {h100: 2}, "vision": {a100: 1}}}
	if tg.Allows(s, "research", "a100", 2) {
		t.Error("research at its A100 target took an A100 that vision, under its own, waits for")
	}
	if !tg.Allows(s, "vision", "a100", 2) || !tg.Allows(s, "research", "h100", 6) {
		t.Error("a queue under its target was refused")
	}
	// Both on the A100s only: a target of 4 (two A100s) each. Holding
	// none, three A100s leave vision 2 over instead of 4 under; holding
	// one, three more would leave it 4 over instead of 2 under, while
	// research, under its target, waits.
	shared := NewMoneyTargets([]MoneyDemand{
		{Queue: "research", Weight: 1, Flavors: []string{"a100"}},
		{Queue: "vision", Weight: 1, Flavors: []string{"a100"}},
	}, units, rate)
	s2 := &Snapshot{Usage: map[string]map[FlavorResource]int64{"vision": {}}}
	if !shared.Allows(s2, "vision", "a100", 6) {
		t.Error("vision holding 0 of its 4 was refused a workload of 6 that ends nearer its target")
	}
	s2.Usage["vision"][a100] = 1
	if shared.Allows(s2, "vision", "a100", 6) {
		t.Error("vision holding 2 of its 4 took a workload of 6 that overshoots by more than it was under")
	}
	s.Usage["vision"][a100] = 4
	if !tg.Allows(s, "research", "a100", 2) {
		t.Error("vision holds its target: the A100 should be open to research")
	}
	alone := NewMoneyTargets(both[:1], units, rate) // vision not backlogged
	s.Usage["vision"][a100] = 0
	if !alone.Allows(s, "research", "a100", 2) {
		t.Error("no backlogged queue wants the A100: research was refused it")
	}
}
