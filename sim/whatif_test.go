package sim

import (
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// TestReplayWhatIf: the workload times a run records, replayed on the same
// cluster, give the run back (the same admissions and waits); with 16 more
// H100s as the research queue's quota its workloads wait less, and the
// flavor's utilisation is over the larger capacity.
func TestReplayWhatIf(t *testing.T) {
	cfg := exampleConfig(t)
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(3 * 24 * time.Hour)
	st, err := m.Run(GenerateMix(cfg, start, end.Sub(start), 1.3, 5), start, end)
	if err != nil {
		t.Fatal(err)
	}
	var times []ledger.WorkloadTime
	for _, w := range m.Cluster.Workloads {
		times = append(times, w.WorkloadTime)
	}
	w, err := ReplayWhatIf(cfg, "", times, WhatIfQuery{Flavor: "h100", GPUs: 16, Queues: []string{"research"}, From: start, To: end, Since: start})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run: %+v; what-if: %+v", st, w)
	if w.Before.Admitted != st.Admitted || w.Before.Pending != st.Pending || w.Replayed != st.Submitted {
		t.Errorf("the replay as the cluster is admitted %d and left %d pending of %d; the run %d and %d of %d",
			w.Before.Admitted, w.Before.Pending, w.Replayed, st.Admitted, st.Pending, st.Submitted)
	}
	if w.Nodes != 2 || len(w.Queues) != 1 || w.Queues[0] != "research" {
		t.Errorf("block as %d nodes for queues %v; want 2 nodes of 8 for research", w.Nodes, w.Queues)
	}
	if !(w.Before.WaitP90 > 1800) {
		t.Fatalf("p90 wait %g s before: the load does not test the what-if", w.Before.WaitP90)
	}
	if !(w.After.WaitP90 < w.Before.WaitP90) || w.After.Admitted < w.Before.Admitted {
		t.Errorf("with 16 more GPUs: p90 wait %g s → %g s, admitted %d → %d; want less wait, as many admitted",
			w.Before.WaitP90, w.After.WaitP90, w.Before.Admitted, w.After.Admitted)
	}
	if b, a := w.Before.QueueWaitP90["research"], w.After.QueueWaitP90["research"]; !(a < b) {
		t.Errorf("research's p90 wait %g s → %g s with the block as its quota; want less", b, a)
	}
	// On the MIG flavor (each GPU 3g.40gb, 2g.20gb and two 1g.10gb) 8
	// GPUs are a node like its first, and 8 of each slice (16 1g.10gb)
	// as quota of the queues with quota of them.
	bigger, nodes, grown, err := withBlock(cfg, "", "h100-mig", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nodes != 1 || len(grown) == 0 {
		t.Fatalf("MIG block: %d nodes for %v", nodes, grown)
	}
	quota := func(c *config.Config, resource string) int {
		var n int
		for _, q := range c.ClusterQueues {
			for _, f := range q.Flavors {
				for _, r := range f.Resources {
					if f.Name == "h100-mig" && r.Name == resource {
						n += r.NominalQuota
					}
				}
			}
		}
		return n
	}
	for res, more := range map[string]int{"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16, config.ResourceGPU: 0} {
		if got := quota(bigger, res) - quota(cfg, res); got != more {
			t.Errorf("MIG block: %s quota grew by %d; want %d", res, got, more)
		}
	}
	wm, err := ReplayWhatIf(cfg, "", times, WhatIfQuery{Flavor: "h100-mig", GPUs: 8, From: start, To: end, Since: start})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MIG what-if: %+v", wm)
	if b, a := wm.Before.QueueWaitP90["notebooks"], wm.After.QueueWaitP90["notebooks"]; !(a < b) {
		t.Errorf("notebooks' p90 wait %g s → %g s with 8 more MIG GPUs' slices as quota; want less", b, a)
	}
	if wm.After.Admitted < wm.Before.Admitted || wm.After.Allocated > wm.Before.Allocated+1e-9 {
		t.Errorf("with 8 more MIG GPUs: admitted %d → %d, allocated %.3f → %.3f; want as many admitted over more capacity",
			wm.Before.Admitted, wm.After.Admitted, wm.Before.Allocated, wm.After.Allocated)
	}
}

// TestRanFor: what the ledger knows at the what-if's end is all the replay
// uses: an admission after it is none, a finish after it is a workload
// still running.
func TestRanFor(t *testing.T) {
	to := start.Add(10 * time.Hour)
	w := ledger.WorkloadTime{Submit: start, Admit: start.Add(time.Hour), Finish: start.Add(3 * time.Hour)}
	if d, ok := ranFor(w, to); !ok || d != 2*time.Hour {
		t.Errorf("finished: %s %v", d, ok)
	}
	w.Finish = to.Add(time.Hour)
	if d, ok := ranFor(w, to); !ok || d != 9*time.Hour {
		t.Errorf("finished after the end: %s %v, want 9h (running at the end)", d, ok)
	}
	w.Admit, w.Finish = to.Add(time.Minute), time.Time{}
	if _, ok := ranFor(w, to); ok {
		t.Error("admitted after the end counted as run")
	}
}
