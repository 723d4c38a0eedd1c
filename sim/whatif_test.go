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

// TestCullAfter: a workload is ended at the end of its first run of
// idle hours as long as the policy's idle time (rounded up to hours),
// joined to its owner's rows by name or by Kueue's naming after the
// owner; busy and unmeasured hours break a run; hours before its
// admission or after its finish (another run of the same owner) do not
// count.
func TestCullAfter(t *testing.T) {
	admit := start.Add(30 * time.Minute)
	row := func(name string, h int, active, unmeasured float64) ledger.WorkloadRow {
		return ledger.WorkloadRow{Hour: start.Add(time.Duration(h) * time.Hour), Cluster: "c", Namespace: "ns", Kind: "StatefulSet", Name: name,
			GPUSeconds: 3600, ActiveGPUSeconds: active * 3600, UnmeasuredGPUSeconds: unmeasured * 3600}
	}
	hours := []ledger.WorkloadRow{
		// nb-a: idle in the part hour it was admitted in (not an hour
		// idle), idle, unmeasured, idle, idle, idle: culled after hours 3
		// and 4 (2h), at 5:00.
		row("nb-a", 0, 0, 0), row("nb-a", 1, 0, 0), row("nb-a", 2, 0, 1), row("nb-a", 3, 0.01, 0), row("nb-a", 4, 0, 0), row("nb-a", 5, 0, 0),
		// nb-b: idle before its admission, then busy.
		row("nb-b", -3, 0, 0), row("nb-b", -2, 0, 0), row("nb-b", 0, 0.5, 0), row("nb-b", 1, 0.5, 0),
		// nb-c: idle only after its finish.
		row("nb-c", 0, 0.9, 0), row("nb-c", 2, 0, 0), row("nb-c", 3, 0, 0),
	}
	w := func(name string, finish time.Duration) ledger.WorkloadTime {
		wt := ledger.WorkloadTime{Cluster: "c", Namespace: "ns", Name: name, Submit: start, Admit: admit}
		if finish > 0 {
			wt.Finish = start.Add(finish)
		}
		return wt
	}
	times := []ledger.WorkloadTime{w("statefulset-nb-a-7f3c2", 0), w("nb-b", 0), w("nb-c", 2*time.Hour), w("statefulset-other-1a2b3", 0),
		{Cluster: "c", Namespace: "ns", Name: "nb-a", Submit: start}}
	cull, joined := CullAfter(times, hours, 90*time.Minute, 0.05)
	if joined != 3 {
		t.Errorf("joined %d workloads, want 3 (nb-a by Kueue's name, nb-b and nb-c by theirs; not one never admitted)", joined)
	}
	want := map[int]time.Duration{0: 5*time.Hour - 30*time.Minute}
	if len(cull) != len(want) || cull[0] != want[0] {
		t.Errorf("cull %v, want %v", cull, want)
	}
	// One idle hour is enough for a policy of an hour or less.
	if cull, _ := CullAfter(times, hours, time.Minute, 0.05); cull[0] != 2*time.Hour-30*time.Minute {
		t.Errorf("1-minute policy: %v, want nb-a ended at 2:00", cull)
	}
}

// TestReplayWhatIfReclaim: notebooks (MIG slices) busy for their first
// hour and idle after, culled after an idle hour, free their slices: the
// notebooks queue waits less than as the cluster is, on the same replay
// that buys 8 more MIG GPUs, and the freed GPU time is what the culled
// notebooks would have held past their cull.
func TestReplayWhatIfReclaim(t *testing.T) {
	cfg, m, end := threeDays(t)
	var times []ledger.WorkloadTime
	var hours []ledger.WorkloadRow
	for _, w := range m.Cluster.Workloads {
		wt := w.WorkloadTime
		if w.ClusterQueue == "notebooks" && !wt.Admit.IsZero() {
			stop := end
			if !wt.Finish.IsZero() {
				stop = wt.Finish
			}
			for h := wt.Admit.Truncate(time.Hour); h.Before(stop); h = h.Add(time.Hour) {
				active := 0.0
				if h == wt.Admit.Truncate(time.Hour) {
					active = 0.9
				}
				hours = append(hours, ledger.WorkloadRow{Hour: h, Cluster: wt.Cluster, Namespace: wt.Namespace, Kind: "StatefulSet", Name: wt.Name,
					GPUSeconds: 3600 * w.GPUs, ActiveGPUSeconds: active * 3600 * w.GPUs})
			}
			wt.Name = "statefulset-" + wt.Name + "-0a1b2"
		}
		times = append(times, wt)
	}
	cull, joined := CullAfter(times, hours, time.Hour, 0.05)
	if joined == 0 || len(cull) == 0 {
		t.Fatalf("joined %d, culled %d: the test has no notebooks", joined, len(cull))
	}
	w, err := ReplayWhatIf(cfg, "", times, WhatIfQuery{Flavor: "h100-mig", GPUs: 8, From: start, To: end, Since: start, Cull: cull})
	if err != nil {
		t.Fatal(err)
	}
	rc := w.Reclaimed
	if rc == nil {
		t.Fatal("no reclaim replay")
	}
	t.Logf("notebooks' p90 wait: as is %s, bought %s, reclaimed %s; culled %d, freed %.0f GPU-h a month",
		time.Duration(w.Before.QueueWaitP90["notebooks"])*time.Second, time.Duration(w.After.QueueWaitP90["notebooks"])*time.Second,
		time.Duration(rc.QueueWaitP90["notebooks"])*time.Second, rc.Culled, rc.FreedGPUHoursMonth)
	if b, r := w.Before.QueueWaitP90["notebooks"], rc.QueueWaitP90["notebooks"]; !(r < b) {
		t.Errorf("notebooks' p90 wait %g s → %g s with idle notebooks culled; want less", b, r)
	}
	if rc.Culled == 0 || rc.FreedGPUHoursMonth <= 0 || rc.Admitted < w.Before.Admitted {
		t.Errorf("reclaim: %+v; want notebooks culled, GPU time freed, as many admitted", rc)
	}
	if rc.Allocated >= w.Before.Allocated {
		t.Errorf("allocated %.3f → %.3f with idle notebooks culled; want less held", w.Before.Allocated, rc.Allocated)
	}
}

// TestReplayWhatIfCarriesIn: a window that starts in the middle of a run
// replays the workloads still waiting or running at its start (an
// endpoint that runs all month among them) as submitted then, so that the
// cluster is as loaded as it was; those finished before it are left out.
func TestReplayWhatIfCarriesIn(t *testing.T) {
	cfg, m, end := threeDays(t)
	var times []ledger.WorkloadTime
	for _, w := range m.Cluster.Workloads {
		times = append(times, w.WorkloadTime)
	}
	from := start.Add(24 * time.Hour)
	var carried, after int
	for _, wt := range times {
		switch {
		case !wt.Submit.Before(from):
			after++
		case wt.Admit.IsZero() || !wt.Admit.Before(from) || wt.Finish.IsZero() || wt.Finish.After(from):
			carried++
		}
	}
	w, err := ReplayWhatIf(cfg, "", times, WhatIfQuery{Flavor: "h100-mig", GPUs: 8, From: from, To: end, Since: from})
	if err != nil {
		t.Fatal(err)
	}
	if carried == 0 || w.CarriedIn != carried || w.Replayed != carried+after || !w.From.Equal(from) {
		t.Errorf("replayed %d from %s, %d carried in; want %d carried in and %d submitted after %s", w.Replayed, w.From, w.CarriedIn, carried, after, from)
	}
	if w.Before.Allocated < 0.5 {
		t.Errorf("h100-mig %.1f%% allocated in the replay from the second day: the workloads running then were not carried in", 100*w.Before.Allocated)
	}
}

// threeDays runs three days of the example cluster's mix at 1.3 times its
// load (seed 5) and returns the configuration, the model after the run
// and the run's end.
func threeDays(t *testing.T) (*config.Config, *Model, time.Time) {
	t.Helper()
	cfg := exampleConfig(t)
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(3 * 24 * time.Hour)
	if _, err := m.Run(GenerateMix(cfg, start, end.Sub(start), 1.3, 5), start, end); err != nil {
		t.Fatal(err)
	}
	return cfg, m, end
}
