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
