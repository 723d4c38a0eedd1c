package sim

import (
	"fmt"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// LoadReplayFlavors reads the replay's flavors from path; none (the replay's
// default, one H100 flavor) without a file.
func LoadReplayFlavors(path string) ([]ReplayFlavor, error) {
	if path == "" {
		return nil, nil
	}
	r, err := config.LoadReplay(path)
	if err != nil {
		return nil, err
	}
	out := make([]ReplayFlavor, len(r.Flavors))
	for i, f := range r.Flavors {
		out[i] = ReplayFlavor{Name: f.Name, Share: float64(f.Share.Micros) / 1e6, PriceMicrosPerGPUHour: r.RateMicros(i), Model: f.GPUModel,
			Speed: r.SpeedOf(i), GavelGPU: f.GavelGPU}
		if f.GavelGPU != "" {
			out[i].TraceGPU = r.TraceGPU
		}
	}
	return out, nil
}

// QuotaGPUs is the queues' nominal GPUs, summed.
func QuotaGPUs(queues []TraceQueue) int {
	var n int
	for _, q := range queues {
		n += q.NominalGPUs
	}
	return n
}

// SharedModel is the simulator's model of the real replay: every VC a
// LocalQueue of one ClusterQueue of gpus GPUs.
func SharedModel(queues []TraceQueue, flavors []ReplayFlavor, gpus int) (*Model, error) {
	qs := make([]TraceQueue, len(queues))
	for i, q := range queues {
		qs[i] = TraceQueue{Name: q.Name, NominalGPUs: gpus, BorrowingLimit: -1}
	}
	return TraceModel(qs, TraceCluster{Flavors: flavors, SharedGPUs: gpus})
}

// CohortCluster is the cohort in which CohortModel puts every queue.
const CohortCluster = "replay"

// CohortModel is the simulator's model of the real replay in which every
// VC or team is a ClusterQueue of its own in one cohort, as Kueue's
// cohort fair sharing needs: the same nodes as SharedModel's, each
// flavor's units split between the queues as nominal quota in proportion
// to their nominal GPUs (all alike when none has any; largest remainder,
// so a flavor's quotas add up to its units), with no borrowing or lending
// limit. Quotas returns the split for the real ClusterQueues.
func CohortModel(queues []TraceQueue, flavors []ReplayFlavor, gpus int) (*Model, error) {
	m, err := SharedModel(queues, flavors, gpus)
	if err != nil {
		return nil, err
	}
	weights := make([]int64, len(queues))
	var sum int64
	for i, q := range queues {
		weights[i] = int64(max(q.NominalGPUs, 0))
		sum += weights[i]
	}
	if sum == 0 {
		for i := range weights {
			weights[i] = 1
		}
	}
	caps := m.FlavorCapacity()
	split := map[string][]int64{}
	for _, f := range m.flavors {
		split[f.Name] = ledger.SplitLargestRemainder(int64(caps[f.Name]), weights, nil)
	}
	for i, q := range queues {
		cq := m.Queues[q.Name]
		if cq == nil {
			return nil, fmt.Errorf("cohort model: queue %s has no ClusterQueue", q.Name)
		}
		cq.Cohort = CohortCluster
		m.value[q.Name], m.nominal[q.Name] = 0, 0
		for _, f := range m.flavors {
			fr := admission.FlavorResource{Flavor: f.Name, Resource: f.Resource}
			n := split[f.Name][i]
			cq.Quotas[fr] = admission.Quota{Nominal: n, BorrowingLimit: -1, LendingLimit: -1}
			m.value[q.Name] += float64(n) * m.Rates[fr]
			m.nominal[q.Name] += int(n)
			m.Attribution.Quotas[attribution.QuotaRef{ClusterQueue: q.Name, Flavor: f.Name}] = n * attribution.QuotaUnitsPerGPU
		}
	}
	return m, nil
}

// Quotas are each queue's nominal quota per flavor, in units of the
// flavor's resource.
func (m *Model) Quotas() map[string]map[string]int {
	out := map[string]map[string]int{}
	for name, q := range m.Queues {
		out[name] = map[string]int{}
		for fr, quota := range q.Quotas {
			out[name][fr.Flavor] += int(quota.Nominal)
		}
	}
	return out
}
