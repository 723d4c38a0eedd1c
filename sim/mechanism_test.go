package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/admission"
)

// mechanismModel is the mechanism scenario's cluster: its teams
// LocalQueues of one ClusterQueue.
func mechanismModel(t *testing.T, queues []TraceQueue, flavors []ReplayFlavor) *Model {
	t.Helper()
	gpus := MechanismGPUs()
	qs := make([]TraceQueue, len(queues))
	for i, q := range queues {
		qs[i] = TraceQueue{Name: q.Name, NominalGPUs: gpus, BorrowingLimit: -1}
	}
	m, err := TraceModel(qs, TraceCluster{Flavors: flavors, SharedGPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMechanism: the scenario's jobs keep to their teams' flavors, its MIG
// flavor is 7 slices a GPU at a seventh of the GPU's price, every team is
// entitled to the same money, and on it the cost-weighted order spends
// the money closer to the entitlements than Kueue's (by GPU count), and
// closer still when it keeps teams to their money-fair share of each
// flavor.
func TestMechanism(t *testing.T) {
	queues, flavors, jobs := Mechanism(MechanismOptions{Days: 3, Seed: 1})
	if len(queues) != 4 || len(jobs) < 400 {
		t.Fatalf("%d queues, %d jobs", len(queues), len(jobs))
	}
	m := mechanismModel(t, queues, flavors)
	caps := m.FlavorCapacity()
	if caps["h100-mig"] != 63 || caps["h100"] != 16 {
		t.Errorf("capacity %v; want 63 MIG slices of 9 GPUs and 16 H100s", caps)
	}
	if r := m.Rates[admission.FlavorResource{Flavor: "h100-mig", Resource: "nvidia.com/mig-1g.10gb"}]; r*3600 < 982_857 || r*3600 > 982_858 {
		t.Errorf("a 1g.10gb slice costs %.0f micros an hour; want 6.88/7", r*3600)
	}
	for _, q := range queues[1:] {
		if m.value[q.Name] != m.value[queues[0].Name] {
			t.Errorf("entitlements %v: want equal", m.value)
		}
	}
	gaps := map[string]float64{}
	for _, pol := range []string{"kueue", "kueue-afs", "costfair", "costfair+targets"} {
		opts := ReplayOptions{Policy: pol, Gating: true, Limit: 72 * time.Hour}
		if pol == "costfair+targets" {
			opts.Policy, opts.FlavorTargets = "costfair", true
		}
		res, err := ReplayModel(mechanismModel(t, queues, flavors), jobs, opts)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[string][]string{}
		for _, j := range jobs {
			allowed[j.ID] = j.Flavors
		}
		for _, o := range res.Outcomes {
			ok := false
			for _, f := range allowed[o.ID] {
				ok = ok || f == o.Flavor
			}
			if !ok {
				t.Fatalf("%s: job %s ran on %s; its team may use %v", pol, o.ID, o.Flavor, allowed[o.ID])
			}
		}
		if res.MoneyGapSamples < 60 {
			t.Errorf("%s: %d money-gap samples in 72 h; want every team backlogged throughout", pol, res.MoneyGapSamples)
		}
		gaps[pol] = res.MoneyGap
		stalls := Figures(jobs, res.Outcomes, nil, opts.Limit).LongestStall
		t.Logf("%s: money gap %.3f, utilisation %.3f, longest stall %v", pol, res.MoneyGap, res.Utilization, stalls)
		// No starvation: with the cost-weighted order a backlogged team
		// is tried first once its share is the lowest, and with the
		// targets no team at its target takes the flavors it waits for,
		// so it starts a job as soon as one on its flavors ends that
		// frees enough (docs/policy-eval/mechanism.txt: the longest
		// stall per policy over 14 days and ten seeds).
		for q, d := range stalls {
			if strings.HasPrefix(pol, "costfair") && d > 4*time.Hour {
				t.Errorf("%s: team %s was backlogged %v without starting a job; want at most 4h", pol, q, d)
			}
		}
	}
	if gaps["costfair"] >= gaps["kueue-afs"]/2 || gaps["costfair"] >= gaps["kueue"]/2 {
		t.Errorf("money gaps %v: want costfair's under half of Kueue's", gaps)
	}
	if gaps["costfair+targets"] >= gaps["costfair"] || gaps["costfair+targets"] > 0.03 {
		t.Errorf("money gaps %v: want the flavor targets to narrow costfair's, to 0.03 or less", gaps)
	}
}

// TestMaxPending: with a bound on each team's jobs waiting in the queue,
// a team's k-th job (in submission order) enters the queue only once k-N+1
// of its jobs have started, so it never starts before them; its wait still
// counts from its submission. Without the bound the same jobs break that
// order (the bound is what the test sees), and with it the cluster is as
// busy (the bound keeps every team backlogged).
func TestMaxPending(t *testing.T) {
	queues, flavors, jobs := Mechanism(MechanismOptions{Days: 2, Seed: 1})
	submit := map[string]time.Duration{}
	index := map[string]int{} // within its team, by submission
	count := map[string]int{}
	for _, j := range jobs {
		submit[j.ID] = j.Submit
		index[j.ID] = count[j.Queue]
		count[j.Queue]++
	}
	const bound = 4
	// early counts the jobs that started before bound-1 fewer of their
	// team's earlier jobs had (ties at one instant count as before).
	early := func(outs []JobOutcome) int {
		starts := map[string][]time.Duration{}
		for _, o := range outs {
			starts[o.Queue] = append(starts[o.Queue], o.Start)
		}
		n := 0
		for _, o := range outs {
			before := 0
			for _, s := range starts[o.Queue] {
				if s <= o.Start {
					before++
				}
			}
			if before-1 < index[o.ID]-(bound-1) {
				n++
			}
		}
		return n
	}
	busy := func(outs []JobOutcome, end time.Duration) float64 {
		var h float64
		for _, o := range outs {
			stop := end
			if o.Finish > 0 {
				stop = min(o.Finish, end)
			}
			h += float64(o.GPUs) * (stop - o.Start).Hours()
		}
		return h
	}
	const end = 48 * time.Hour
	for _, pol := range []string{"kueue", "costfair+targets"} {
		var got [2]ReplayResult
		for i, mp := range []int{0, bound} {
			opts := ReplayOptions{Policy: pol, Gating: true, Limit: end, MaxPending: mp}
			if pol == "costfair+targets" {
				opts.Policy, opts.FlavorTargets = "costfair", true
			}
			res, err := ReplayModel(mechanismModel(t, queues, flavors), jobs, opts)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = res
		}
		if n := early(got[0].Outcomes); n == 0 {
			t.Errorf("%s without a bound: no job started ahead of the bound's order; the test cannot see the bound", pol)
		}
		if n := early(got[1].Outcomes); n > 0 {
			t.Errorf("%s with MaxPending %d: %d jobs started before %d fewer of their team's earlier jobs had", pol, bound, n, bound-1)
		}
		for _, o := range got[1].Outcomes {
			if o.Submit != submit[o.ID] {
				t.Fatalf("%s: %s's outcome has submission %s, want the trace's %s", pol, o.ID, o.Submit, submit[o.ID])
			}
		}
		if a, b := busy(got[0].Outcomes, end), busy(got[1].Outcomes, end); b < 0.97*a {
			t.Errorf("%s: %.0f GPU-hours used with the bound, %.0f without: a bounded backlog left GPUs idle", pol, b, a)
		}
	}
}
