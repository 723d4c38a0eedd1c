package config

import (
	"fmt"
	"os"
)

// Replay is the business data of a trace replay (gpuledger simulate): the
// GPU flavors a trace's queues run on, each with its share of every queue's
// quota and of the nodes, the GPU model its nodes report, and its price,
// given as in a cluster config (perGPUHour, a price-book catalog entry, or
// onPrem). Queues try the flavors in this order.
type Replay struct {
	Currency string `yaml:"currency"`
	// TraceGPU is the GPU type of Gavel's throughput table (k80, p100 or
	// v100) the trace's durations were measured on; needed when a flavor
	// has a gavelGPU.
	TraceGPU string         `yaml:"traceGPU"`
	Flavors  []ReplayFlavor `yaml:"flavors"`
	rates    []int64
}

// ReplayFlavor is one flavor of a replay.
type ReplayFlavor struct {
	Name string `yaml:"name"`
	// Share is the fraction of every quota and of the nodes, a decimal in
	// (0, 1]; the shares add up to 1.
	Share    Money  `yaml:"share"`
	GPUModel string `yaml:"gpuModel"`
	Price    Price  `yaml:"price"`
	// Speed is how fast a job runs on it relative to the GPU the trace's
	// durations were measured on (a decimal > 0; unset: 1): a job of
	// duration d runs d / speed.
	Speed Money `yaml:"speed"`
	// GavelGPU, instead of speed, runs each job at Gavel's measured
	// throughput of its model on this GPU type (k80, p100 or v100) over
	// that on traceGPU.
	GavelGPU string `yaml:"gavelGPU"`
}

// gavelGPUs are the GPU types of Gavel's throughput table.
var gavelGPUs = map[string]bool{"k80": true, "p100": true, "v100": true}

// SpeedOf is flavor i's speed, 0 when unset.
func (r *Replay) SpeedOf(i int) float64 {
	return float64(r.Flavors[i].Speed.Micros) / 1e6
}

// RateMicros is flavor i's price per GPU-hour, in micro-units of the
// currency.
func (r *Replay) RateMicros(i int) int64 { return r.rates[i] }

// LoadReplay reads and checks a replay file.
func LoadReplay(path string) (*Replay, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read replay config: %w; pass an existing file with -cluster (see examples/philly-replay.yaml)", err)
	}
	return ParseReplay(data, path)
}

// ParseReplay checks data, the contents of file; on any problem it returns
// an *Error listing all of them, sorted by position.
func ParseReplay(data []byte, file string) (*Replay, error) {
	var r Replay
	d, err := decodeFile(data, file, &r, "the file is empty; want a mapping with currency and flavors")
	if err != nil {
		return nil, err
	}
	if r.Currency == "" {
		d.add(nil, "currency", "missing; want an ISO 4217 code such as USD")
	}
	if len(r.Flavors) == 0 {
		d.add(nil, "flavors", "missing; want at least one flavor with a name, a share and a price")
	}
	seen := map[string]bool{}
	var total int64
	for i, f := range r.Flavors {
		p := fmt.Sprintf("flavors[%d]", i)
		if f.Name == "" {
			d.add(nil, p+".name", "missing; want the flavor's name, such as h100")
		} else {
			unique(d, seen, p+".name", "flavor %q is listed twice", f.Name)
		}
		if !f.Share.Set || f.Share.Micros <= 0 || f.Share.Micros > 1_000_000 {
			d.add(nil, p+".share", "%q; want a fraction of the quotas and nodes in (0, 1], such as 0.5", f.Share.String())
		}
		total += f.Share.Micros
		if f.GPUModel == "" {
			d.add(nil, p+".gpuModel", "missing; want the NVML model name its nodes report, such as NVIDIA H100 80GB HBM3")
		}
		rate, ok := resolvePrice(d, p+".price", f.Price, r.Currency)
		if !ok && !d.failed[p+".price"] && !d.failed[p+".price.perGPUHour"] && !d.failed[p+".price.catalog"] {
			d.add(nil, p+".price", "missing; want perGPUHour, catalog or onPrem")
		}
		r.rates = append(r.rates, rate)
		if f.Speed.Set && f.Speed.Micros <= 0 {
			d.add(nil, p+".speed", "%q; want a throughput relative to the trace's GPU > 0, such as 3.17", f.Speed.String())
		}
		switch {
		case f.GavelGPU == "":
		case !gavelGPUs[f.GavelGPU]:
			d.add(nil, p+".gavelGPU", "%q; want k80, p100 or v100 (the GPU types of Gavel's throughput table)", f.GavelGPU)
		case f.Speed.Set:
			d.add(nil, p+".gavelGPU", "%q with a speed; want one of speed and gavelGPU", f.GavelGPU)
		case r.TraceGPU == "":
			d.add(nil, "traceGPU", "missing, with flavors[%d].gavelGPU %q; want the GPU type (k80, p100 or v100) the trace's durations were measured on", i, f.GavelGPU)
		}
	}
	if r.TraceGPU != "" && !gavelGPUs[r.TraceGPU] {
		d.add(nil, "traceGPU", "%q; want k80, p100 or v100 (the GPU types of Gavel's throughput table)", r.TraceGPU)
	}
	if len(r.Flavors) > 0 && total != 1_000_000 && len(d.problems) == 0 {
		d.add(nil, "flavors", "the shares add up to %s; want 1", Money{Micros: total})
	}
	if err := d.err(file); err != nil {
		return nil, err
	}
	return &r, nil
}
