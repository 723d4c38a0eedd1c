package sim

import (
	"math"
	"testing"
	"time"
)

// TestFigures: the comparison figures from hand-made outcomes, a job
// still waiting at the end counting with its wait so far.
func TestFigures(t *testing.T) {
	h := time.Hour
	jobs := []TraceJob{
		{ID: "a1", Queue: "a", Submit: 0, GPUs: 2},
		{ID: "b1", Queue: "b", Submit: 0, GPUs: 2},
		{ID: "b2", Queue: "b", Submit: h, GPUs: 4},
		{ID: "a2", Queue: "a", Submit: 0, GPUs: 8},
	}
	outs := []JobOutcome{
		{ID: "a1", Queue: "a", Flavor: "h100", GPUs: 2, Submit: 0, Start: 0, Finish: 2 * h},
		{ID: "b1", Queue: "b", Flavor: "t4", GPUs: 2, Submit: 0, Start: h, Finish: 0},
	}
	f := Figures(jobs, outs, map[string]int64{"h100": 4, "t4": 1}, 3*h)
	if f.Jobs != 4 || f.Started != 2 || f.Finished != 1 {
		t.Errorf("jobs %d started %d finished %d", f.Jobs, f.Started, f.Finished)
	}
	if f.AvgJCT != 2*h {
		t.Errorf("avg JCT %s, want 2h", f.AvgJCT)
	}
	// Waits 0, 1 h, and b2's 2 h and a2's 3 h so far.
	if f.MeanWait != 90*time.Minute || f.MaxWait != 3*h || f.P90Wait != 3*h {
		t.Errorf("waits mean %s p90 %s max %s, want 1h30m, 3h, 3h", f.MeanWait, f.P90Wait, f.MaxWait)
	}
	if f.GPUHoursByFlavor["h100"] != 4 || f.GPUHoursByFlavor["t4"] != 4 {
		t.Errorf("GPU-hours %v, want h100 4 and t4 4 (b1 runs to the end)", f.GPUHoursByFlavor)
	}
	// a and b both wait every hour. Hour 0: a holds 2 h100 (8), b
	// nothing: 0.5. Hour 1: a 8, b 2 t4 (2): 100/136. Hour 2: a1 has
	// finished, b 2: 0.5.
	if want := (0.5 + 100.0/136 + 0.5) / 3; math.Abs(f.JainBacklogged-want) > 1e-12 {
		t.Errorf("backlogged Jain %g, want %g", f.JainBacklogged, want)
	}
	d := Diverge(outs, []JobOutcome{{ID: "a1", Flavor: "h100", Submit: 0, Start: 30 * time.Minute}, {ID: "b1", Flavor: "h100", Submit: 0, Start: h}})
	if d.Common != 2 || d.MeanAbsWait != 15*time.Minute || d.MedianAbsWait != 30*time.Minute || math.Abs(d.SameFlavor-0.5) > 1e-12 {
		t.Errorf("divergence %+v", d)
	}
}

// TestSharedModel: with SharedGPUs every queue may use every GPU of its
// flavor and the cluster is those GPUs, one node per flavor.
func TestSharedModel(t *testing.T) {
	m, err := TraceModel([]TraceQueue{{Name: "a", NominalGPUs: 40, BorrowingLimit: -1}, {Name: "b", NominalGPUs: 40, BorrowingLimit: -1}},
		TraceCluster{SharedGPUs: 40, Flavors: []ReplayFlavor{{Name: "h100", Share: 0.25, PriceMicrosPerGPUHour: 2}, {Name: "t4", Share: 0.75, PriceMicrosPerGPUHour: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.FlavorCapacity(); got["h100"] != 10 || got["t4"] != 30 || len(m.Nodes) != 2 {
		t.Fatalf("capacity %v on %d nodes, want h100 10 and t4 30 on 2", got, len(m.Nodes))
	}
	for _, q := range m.Queues {
		for fr, quota := range q.Quotas {
			if want := int64(m.FlavorCapacity()[fr.Flavor]); quota.Nominal != want {
				t.Errorf("queue %s flavor %s: nominal %d, want %d", q.Name, fr.Flavor, quota.Nominal, want)
			}
		}
	}
	if _, err := TraceModel([]TraceQueue{{Name: "a"}}, TraceCluster{SharedGPUs: 1, Flavors: []ReplayFlavor{{Name: "h100", Share: 0.5, PriceMicrosPerGPUHour: 2}, {Name: "t4", Share: 0.5, PriceMicrosPerGPUHour: 1}}}); err == nil {
		t.Error("1 GPU split between two flavors: no error")
	}
}
