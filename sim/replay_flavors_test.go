package sim

import (
	"testing"
)

// examples/philly-replay.yaml, as simulate, policy-eval and sim-to-real
// read it: two flavors, half each, priced from the catalog.
func TestLoadReplayFlavors(t *testing.T) {
	fl, err := LoadReplayFlavors("../examples/philly-replay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 2 || fl[0].Name != "h100" || fl[1].Name != "t4" || fl[0].Share != 0.5 || fl[1].Share != 0.5 {
		t.Fatalf("flavors: %+v", fl)
	}
	if fl[0].PriceMicrosPerGPUHour <= fl[1].PriceMicrosPerGPUHour || fl[1].PriceMicrosPerGPUHour <= 0 {
		t.Errorf("prices: h100 %d, t4 %d micro-units a GPU-hour; want both set, the H100 dearer", fl[0].PriceMicrosPerGPUHour, fl[1].PriceMicrosPerGPUHour)
	}
	if none, err := LoadReplayFlavors(""); none != nil || err != nil {
		t.Errorf("no file: %v, %v; want the default (none)", none, err)
	}
	if _, err := LoadReplayFlavors("no-such-file.yaml"); err == nil {
		t.Error("a missing file gave no error")
	}
	if n := QuotaGPUs([]TraceQueue{{NominalGPUs: 8}, {NominalGPUs: 16}}); n != 24 {
		t.Errorf("QuotaGPUs: %d, want 24", n)
	}
}

// TestCohortModel: every queue a ClusterQueue of the one cohort; each
// flavor's units split as nominal quota in proportion to the queues'
// nominal GPUs (alike when none has any), adding up to the flavor's
// units; the entitlement is the quota's worth; the nodes are
// SharedModel's.
func TestCohortModel(t *testing.T) {
	queues, flavors, _ := Mechanism(MechanismOptions{Days: 1, Seed: 1})
	m, err := CohortModel(queues, flavors, MechanismGPUs())
	if err != nil {
		t.Fatal(err)
	}
	shared, err := SharedModel(queues, flavors, MechanismGPUs())
	if err != nil {
		t.Fatal(err)
	}
	caps := m.FlavorCapacity()
	if len(m.Nodes) != len(shared.Nodes) || len(caps) != len(flavors) {
		t.Fatalf("nodes %d (shared %d), flavors %v", len(m.Nodes), len(shared.Nodes), caps)
	}
	quotas := m.Quotas()
	for _, f := range flavors {
		var sum, lo, hi int
		lo = caps[f.Name]
		for _, q := range queues {
			n := quotas[q.Name][f.Name]
			sum += n
			lo, hi = min(lo, n), max(hi, n)
		}
		if sum != caps[f.Name] || hi-lo > 1 {
			t.Errorf("flavor %s: quotas add up to %d of %d units, from %d to %d: want all of them, split alike", f.Name, sum, caps[f.Name], lo, hi)
		}
	}
	for _, q := range queues {
		cq := m.Queues[q.Name]
		var worth float64
		for fr, quota := range cq.Quotas {
			if quota.BorrowingLimit != -1 || quota.LendingLimit != -1 {
				t.Errorf("%s %v: %+v, want no borrowing or lending limit", q.Name, fr, quota)
			}
			worth += float64(quota.Nominal) * m.Rates[fr]
		}
		if cq.Cohort != CohortCluster || m.value[q.Name] != worth {
			t.Errorf("%s: cohort %q, entitlement %g; want %q and %g", q.Name, cq.Cohort, m.value[q.Name], CohortCluster, worth)
		}
	}
	// In proportion to the queues' nominal GPUs.
	pq := []TraceQueue{{Name: "a", NominalGPUs: 8, BorrowingLimit: -1}, {Name: "b", NominalGPUs: 24, BorrowingLimit: -1}}
	m, err = CohortModel(pq, []ReplayFlavor{{Name: "h100", Share: 0.5, PriceMicrosPerGPUHour: 6_880_000}, {Name: "t4", Share: 0.5, PriceMicrosPerGPUHour: 526_000}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if q := m.Quotas(); q["a"]["h100"] != 8 || q["b"]["h100"] != 24 || q["a"]["t4"] != 8 || q["b"]["t4"] != 24 {
		t.Errorf("quotas %v: want a 8 and b 24 of each flavor's 32", q)
	}
}
