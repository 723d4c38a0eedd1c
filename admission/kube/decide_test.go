package kube

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/admission"
)

// TestWeightsOrderByMoney: after the weights, Kueue's key consumed/weight
// orders the queues of a ClusterQueue as their teams' shares do, even
// where Kueue's own usage says the opposite; queues Kueue saw use nothing
// keep weight 1.
func TestWeightsOrderByMoney(t *testing.T) {
	qs := []LocalQueue{
		{Namespace: "a", Name: "q", ClusterQueue: "shared", Team: "a", Consumed: 10, Weight: 1},
		{Namespace: "b", Name: "q", ClusterQueue: "shared", Team: "b", Consumed: 40, Weight: 1},
		{Namespace: "c", Name: "q", ClusterQueue: "shared", Team: "c", Consumed: 0, Weight: 1},
		{Namespace: "d", Name: "q", ClusterQueue: "other", Team: "d", Consumed: 5, Weight: 3},
	}
	share := map[string]float64{"a": 900, "b": 100, "c": 50, "d": 7}
	w := Weights(qs, share)
	ka, kb := qs[0].Consumed/w["a/q"], qs[1].Consumed/w["b/q"]
	if !(kb < ka) {
		t.Fatalf("Kueue's keys a %g, b %g: b spent less money and should go first", ka, kb)
	}
	if r := (ka / kb) / (share["a"] / share["b"]); math.Abs(r-1) > 1e-9 {
		t.Errorf("keys in the ratio of the shares: off by %g", r)
	}
	if w["c/q"] != 1 || w["d/q"] != 1 {
		t.Errorf("c (no usage seen) %g, d (alone in its ClusterQueue) %g: want 1 and 1", w["c/q"], w["d/q"])
	}
	if mean := (w["a/q"] + w["b/q"]) / 2; math.Abs(mean-1) > 1e-9 {
		t.Errorf("weights of the steered queues average %g, want 1", mean)
	}
	// Bounded.
	w = Weights([]LocalQueue{{Namespace: "x", Name: "q", ClusterQueue: "s", Team: "x", Consumed: 1e9}, {Namespace: "y", Name: "q", ClusterQueue: "s", Team: "y", Consumed: 1e-9}},
		map[string]float64{"x": 1, "y": 1})
	if w["x/q"] > admission.MaxUsageWeight || w["y/q"] < admission.MinUsageWeight {
		t.Errorf("weights %v out of [%g, %g]", w, admission.MinUsageWeight, admission.MaxUsageWeight)
	}
}

func TestChangedAndFormat(t *testing.T) {
	if admission.WeightChanged(1, 1.05, 0.1) || !admission.WeightChanged(1, 1.2, 0.1) || !admission.WeightChanged(0, 1, 0.1) {
		t.Error("hysteresis")
	}
	if got := FormatWeight(1.2345); got != "1235m" {
		t.Errorf("FormatWeight = %s", got)
	}
}

func TestMIGShare(t *testing.T) {
	for res, want := range map[string]float64{"nvidia.com/mig-3g.40gb": 3.0 / 7, "nvidia.com/mig-1g.10gb": 1.0 / 7} {
		if got, ok := MIGShare(res); !ok || got != want {
			t.Errorf("MIGShare(%s) = %g %v", res, got, ok)
		}
	}
	for _, res := range []string{"nvidia.com/gpu", "nvidia.com/mig-x.10gb", "nvidia.com/mig-9g.10gb", "cpu"} {
		if _, ok := MIGShare(res); ok {
			t.Errorf("MIGShare(%s) accepted", res)
		}
	}
}

// TestBudget: month-to-date plus the workload's worst case against the
// limit; the message names the team, the figures and what to do.
func TestBudget(t *testing.T) {
	teams := &Teams{Currency: "USD", LimitMicros: map[string]int64{"nlp": 1_000_000_000}, PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	d := Demand{GPUsByFlavor: map[string]float64{"h100": 8}, MaxDuration: 10 * time.Hour} // 550.40
	v := Budget(teams, "nlp", d, 400_000_000, 24*time.Hour, 5*time.Minute)
	if !v.Ready || !strings.Contains(v.Message, "550.40") {
		t.Errorf("400 + 550.40 ≤ 1000: %+v", v)
	}
	v = Budget(teams, "nlp", d, 450_000_000, 24*time.Hour, 5*time.Minute)
	if v.Ready || v.RetryAfter != 5*time.Minute || !strings.Contains(v.Message, "team nlp has spent 450.00 USD") ||
		!strings.Contains(v.Message, "1000.00") || !strings.Contains(v.Message, "Raise the team's monthlyBudget") {
		t.Errorf("450 + 550.40 > 1000: %+v", v)
	}
	d.MaxDuration = 0 // the default, 24 h: 1320.96
	if v := Budget(teams, "nlp", d, 0, 24*time.Hour, time.Minute); v.Ready || !strings.Contains(v.Message, "default duration") {
		t.Errorf("the default duration: %+v", v)
	}
	if v := Budget(teams, "vision", d, 1e12, 24*time.Hour, time.Minute); !v.Ready {
		t.Errorf("a team without a limit is held: %+v", v)
	}
	if v := Budget(teams, "", d, 1e12, 24*time.Hour, time.Minute); !v.Ready {
		t.Errorf("no team: held: %+v", v)
	}
}
