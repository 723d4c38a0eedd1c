package sim

import "github.com/gpuledger/gpuledger/config"

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
