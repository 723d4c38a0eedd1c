package sim

import (
	"fmt"
	"hash/fnv"
	"time"
)

// gavelThroughputs are Gavel's measured training throughputs, in
// iterations per second on one GPU, of its 26 job types on the three GPU
// types it measured (Narayanan et al., "Heterogeneity-Aware Cluster
// Scheduling Policies for Deep Learning Workloads", OSDI 2020; the
// single-worker entries of scheduler/simulation_throughputs.json in
// github.com/stanford-futuredata/gavel at c2bc4b8f, rounded to four
// places). Only the ratios between GPU types matter here: how much faster
// a model trains on one than on another, which differs from model to model
// (a recommendation model trains faster on a P100 than on a V100).
var gavelThroughputs = []struct {
	Model           string
	K80, P100, V100 float64
}{
	{"ResNet-18 (batch size 16)", 4.7953, 35.8692, 32.3534},
	{"ResNet-18 (batch size 32)", 7.1758, 35.8254, 29.9472},
	{"ResNet-18 (batch size 64)", 7.0521, 22.3049, 24.0932},
	{"ResNet-18 (batch size 128)", 1.8065, 11.6755, 17.9949},
	{"ResNet-18 (batch size 256)", 0.8856, 7.7228, 10.3003},
	{"ResNet-50 (batch size 16)", 2.3005, 9.0530, 11.3961},
	{"ResNet-50 (batch size 32)", 1.2366, 4.8883, 7.7873},
	{"ResNet-50 (batch size 64)", 0.6190, 2.6195, 4.3948},
	{"ResNet-50 (batch size 128)", 0.3472, 1.5844, 2.4968},
	{"Transformer (batch size 16)", 5.4674, 9.5372, 11.0641},
	{"Transformer (batch size 32)", 3.5074, 7.8692, 10.6209},
	{"Transformer (batch size 64)", 1.7522, 5.0918, 8.6178},
	{"Transformer (batch size 128)", 0.9816, 3.0735, 5.4461},
	{"Transformer (batch size 256)", 0.4583, 1.6777, 1.5951},
	{"A3C", 3.4388, 5.6813, 7.1758},
	{"LM (batch size 5)", 25.4855, 90.7759, 109.1666},
	{"LM (batch size 10)", 23.7944, 77.0847, 81.6516},
	{"LM (batch size 20)", 17.1423, 58.1727, 64.7425},
	{"LM (batch size 40)", 11.4997, 35.7664, 45.2374},
	{"LM (batch size 80)", 6.0542, 21.1575, 28.2400},
	{"Recommendation (batch size 512)", 32.8593, 48.8824, 23.3176},
	{"Recommendation (batch size 1024)", 20.0500, 30.7444, 13.2826},
	{"Recommendation (batch size 2048)", 10.4412, 16.5966, 7.4696},
	{"Recommendation (batch size 4096)", 5.3002, 8.8967, 3.9061},
	{"Recommendation (batch size 8192)", 2.6988, 5.5484, 2.8415},
	{"CycleGAN", 0.5048, 2.4027, 4.4261},
}

// GavelGPUs are the GPU types of Gavel's table, as a flavor names them
// (ReplayFlavor.GavelGPU and TraceGPU).
var GavelGPUs = []string{"k80", "p100", "v100"}

// gavelThroughput is model's throughput on gpu, or false.
func gavelThroughput(model, gpu string) (float64, bool) {
	for _, t := range gavelThroughputs {
		if t.Model != model {
			continue
		}
		switch gpu {
		case "k80":
			return t.K80, true
		case "p100":
			return t.P100, true
		case "v100":
			return t.V100, true
		}
	}
	return 0, false
}

// gavelModel is the job type a job trains: its own, or one of Gavel's
// drawn by a hash of its ID (uniformly, as Gavel's generator draws them),
// so that the same job trains the same model in every replay and the
// trace's random draws are untouched.
func gavelModel(j TraceJob) string {
	if j.Model != "" {
		return j.Model
	}
	h := fnv.New32a()
	h.Write([]byte(j.ID))
	return gavelThroughputs[h.Sum32()%uint32(len(gavelThroughputs))].Model
}

// speeds is how fast each flavor runs a job, relative to the GPU the
// trace's durations were measured on.
type speeds struct {
	byFlavor map[string]ReplayFlavor
}

// newSpeeds checks the flavors' speeds: a flavor with a Gavel GPU needs the
// trace's (TraceGPU), and both must be in Gavel's table.
func newSpeeds(flavors []ReplayFlavor) (speeds, error) {
	s := speeds{byFlavor: map[string]ReplayFlavor{}}
	known := func(g string) bool {
		_, ok := gavelThroughput(gavelThroughputs[0].Model, g)
		return ok
	}
	for _, f := range flavors {
		switch {
		case f.TraceGPU != "" && !known(f.TraceGPU):
			return s, fmt.Errorf("flavor %s: trace GPU %q; want one of Gavel's GPU types %v", f.Name, f.TraceGPU, GavelGPUs)
		case f.Speed < 0:
			return s, fmt.Errorf("flavor %s: speed %g; want a throughput relative to the trace's GPU > 0 (0: 1)", f.Name, f.Speed)
		case f.GavelGPU != "" && !known(f.GavelGPU):
			return s, fmt.Errorf("flavor %s: Gavel GPU %q; want one of %v", f.Name, f.GavelGPU, GavelGPUs)
		case f.GavelGPU != "" && f.TraceGPU == "":
			return s, fmt.Errorf("flavor %s runs at Gavel's %s throughputs, but the trace's GPU is not given; say which of %v its durations were measured on", f.Name, f.GavelGPU, GavelGPUs)
		case f.GavelGPU != "" && f.Speed != 0:
			return s, fmt.Errorf("flavor %s: both a speed (%g) and a Gavel GPU (%s); want one", f.Name, f.Speed, f.GavelGPU)
		}
		s.byFlavor[f.Name] = f
	}
	return s, nil
}

// of is how fast flavor runs j relative to the trace's GPU: the flavor's
// Speed (default 1), or, on a Gavel GPU, its throughput of j's model over
// the trace GPU's.
func (s speeds) of(j TraceJob, flavor string) float64 {
	f, ok := s.byFlavor[flavor]
	switch {
	case !ok:
		return 1
	case f.GavelGPU != "":
		m := gavelModel(j)
		on, _ := gavelThroughput(m, f.GavelGPU)
		ref, _ := gavelThroughput(m, f.TraceGPU)
		return on / ref
	case f.Speed > 0:
		return f.Speed
	}
	return 1
}

// runTime is how long j runs on flavor: its trace duration over the
// flavor's speed; the idle share of a job that holds GPUs idle (waiting
// for a person or for requests) takes as long on any GPU.
func (s speeds) runTime(j TraceJob, flavor string) time.Duration {
	sp := s.of(j, flavor)
	if sp == 1 {
		return j.Duration
	}
	idle := min(max(j.Idle, 0), 1)
	return time.Duration(float64(j.Duration)*idle + float64(j.Duration)*(1-idle)/sp)
}

// RunTimes is how long j runs on each of the flavors: its duration over
// the flavor's speed (ReplayFlavor.Speed, or GavelGPU against TraceGPU),
// for a replay elsewhere (a real Kueue) that must run it as the
// simulator does.
func RunTimes(j TraceJob, flavors []ReplayFlavor) (map[string]time.Duration, error) {
	s, err := newSpeeds(flavors)
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Duration, len(flavors))
	for _, f := range flavors {
		out[f.Name] = s.runTime(j, f.Name)
	}
	return out, nil
}
