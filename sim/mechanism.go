package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// The mechanism scenario's flavors. Speeds are relative to an A100 (the
// GPU its durations are given on), from NVIDIA's data sheets' dense
// FP16/BF16 Tensor Core peaks: H100 SXM 989 TFLOPS, A100 312, T4 65, and a
// 1g.10gb MIG instance of an H100 one of its seven compute slices. A peak
// is an upper bound on what a model gets; a cluster with measured
// throughputs gives them as each flavor's speed. Prices per GPU-hour are
// the price book's on-demand AWS rates (p5.48xlarge, p4d.24xlarge,
// g4dn.xlarge); a MIG instance costs its compute share of its GPU.
var mechanismFlavors = []ReplayFlavor{
	{Name: "h100", GPUs: 16, PriceMicrosPerGPUHour: 6_880_000, Model: "NVIDIA H100 80GB HBM3", Speed: 989.0 / 312},
	{Name: "a100", GPUs: 16, PriceMicrosPerGPUHour: 2_744_700, Model: "NVIDIA A100-SXM4-40GB", Speed: 1},
	{Name: "t4", GPUs: 48, PriceMicrosPerGPUHour: 526_000, Model: "Tesla T4", Speed: 65.0 / 312},
	{Name: "h100-mig", GPUs: 9, PriceMicrosPerGPUHour: 6_880_000, Model: "NVIDIA H100 80GB HBM3", Resource: "nvidia.com/mig-1g.10gb",
		Speed: 989.0 / 7 / 312},
}

// mechanismTeam is a team of the mechanism scenario: the flavors its
// models can run on and the sizes of its jobs (units of its resource).
type mechanismTeam struct {
	name     string
	flavors  []string
	resource string
	sizes    []int
}

var mechanismTeams = []mechanismTeam{
	// Large models: only an H100 holds them.
	{name: "llm", flavors: []string{"h100"}, sizes: []int{1, 2, 4}},
	// Vision models fit an A100 or a T4.
	{name: "vision", flavors: []string{"a100", "t4"}, sizes: []int{1, 2}},
	// Research runs on any whole GPU.
	{name: "research", flavors: []string{"h100", "a100", "t4"}, sizes: []int{1, 2, 4}},
	// Notebooks take one MIG slice each.
	{name: "notebooks", flavors: []string{"h100-mig"}, resource: "nvidia.com/mig-1g.10gb", sizes: []int{1}},
}

// MechanismOptions configures Mechanism.
type MechanismOptions struct {
	// Days of submissions. Default 14.
	Days float64
	// Backlog is each team's offered work over the capacity it may use
	// (its flavors' units × their speeds); above 1 every team stays
	// backlogged. Default 1.2.
	Backlog float64
	// Interactive is the share of research's jobs that are notebooks on
	// one whole GPU, holding it 80% idle (TraceJob.Idle 0.8) for their
	// duration: the workloads the idle penalty is for. Default 0.
	Interactive float64
	Seed        uint64
}

// Mechanism is the scenario in which money, not GPU counts, decides what
// a team gets: four teams with equal entitlements (LocalQueues of one
// ClusterQueue, so that every team may use every GPU its models run on)
// pinned to flavors by what their models need: llm only on H100s, vision
// on A100s or T4s, research on any whole GPU, notebooks on H100 MIG
// slices. Every team offers more work than it can run, from the start (a
// tenth of its work is submitted at once) and then as Poisson arrivals
// for Days, so that all are backlogged throughout. Durations are on an
// A100, 2 to 24 h (log-uniform); a job runs its duration over its flavor's
// speed. The same seed gives the same jobs.
//
// Counting GPUs, a team on H100s and one on T4s that hold as many GPUs
// are even; counting money, the first spends 13 times as much. The
// flavors' GPUs are chosen so that an allocation even in money exists:
// notebooks, alone on the MIG slices, spend their whole 42 slices' worth,
// 26% of the cluster's money against an entitlement of 25%; the other
// three share the rest.
func Mechanism(o MechanismOptions) (queues []TraceQueue, flavors []ReplayFlavor, jobs []TraceJob) {
	if o.Days <= 0 {
		o.Days = 14
	}
	if o.Backlog <= 0 {
		o.Backlog = 1.2
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x2545f4914f6cdd1d))
	span := time.Duration(o.Days * 24 * float64(time.Hour))
	units := map[string]float64{} // a flavor's units × speed
	for _, f := range mechanismFlavors {
		per := 1
		if f.Resource != "" {
			per = 7 // 1g.10gb: seven instances of an H100
		}
		units[f.Name] = float64(f.GPUs*per) * f.Speed
	}
	const lo, hi = 1.0, 12.0 // hours, log-uniform
	meanHours := (hi - lo) / math.Log(hi/lo)
	for _, t := range mechanismTeams {
		queues = append(queues, TraceQueue{Name: t.name, BorrowingLimit: -1})
		var capacity float64
		for _, f := range t.flavors {
			capacity += units[f]
		}
		var meanSize float64
		for _, s := range t.sizes {
			meanSize += float64(s)
		}
		meanSize /= float64(len(t.sizes))
		// Jobs per hour so that the offered work is Backlog × capacity.
		rate := o.Backlog * capacity / (meanSize * meanHours)
		at := time.Duration(0)
		burst := int(math.Ceil(rate * o.Days * 24 / 10))
		for n := 0; ; n++ {
			if n >= burst {
				at += time.Duration(rng.ExpFloat64() / rate * float64(time.Hour))
			}
			if at >= span {
				break
			}
			size := t.sizes[rng.IntN(len(t.sizes))]
			dur := time.Duration(lo * math.Exp(rng.Float64()*math.Log(hi/lo)) * float64(time.Hour)).Round(time.Second)
			j := TraceJob{ID: fmt.Sprintf("%s-%05d", t.name, n), Queue: t.name, Submit: at, Duration: dur,
				GPUs: size, Pods: 1, PerPod: size, Resource: t.resource, Flavors: t.flavors}
			if o.Interactive > 0 && t.name == "research" && rng.Float64() < o.Interactive {
				j.GPUs, j.PerPod, j.Idle, j.Class = 1, 1, 0.8, "interactive"
			}
			jobs = append(jobs, j)
		}
	}
	sortJobs(jobs)
	return queues, append([]ReplayFlavor(nil), mechanismFlavors...), jobs
}

// MechanismGPUs is the mechanism scenario's GPUs, MIG-partitioned ones
// included.
func MechanismGPUs() int {
	n := 0
	for _, f := range mechanismFlavors {
		n += f.GPUs
	}
	return n
}
