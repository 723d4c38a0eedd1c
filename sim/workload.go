// Package sim models a GPU cluster and drives time for the admission core.
// A Model is the cluster, built once from the YAML config or from a trace's
// queues and flavors: the admission core's queues and nodes, the devices
// whose telemetry is rendered, and the attribution model that prices them.
// Jobs come from a generated mix (GenerateMix, the demo's month) or a trace
// (Philly, Gavel, Kueue's performance configurations), and go through one
// event loop (Replay, ReplayModel, Model.Run) whose every decision is
// package admission's. The telemetry the real exporters would publish for
// the pods' holds is rendered as Prometheus text exposition at a fixed
// scrape interval: dcgm-exporter series per GPU or MIG instance and
// kube-state-metrics' pod series.
//
// It owns no cost logic (package attribution) and no admission policy
// (package admission): it only keeps time, runs and ends what admission
// admits, and measures.
package sim

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/config"
)

// Kind is what a job does with its GPUs, which shapes its activity.
type Kind uint8

// Job kinds.
const (
	// KindTraining is a batch training job: busy most of the time after a
	// short loading phase; multi-node jobs idle while their peers start.
	KindTraining Kind = iota
	// KindNotebook is an interactive notebook: holds its GPU for hours and
	// rarely uses it.
	KindNotebook
	// KindInference is a long-running inference endpoint whose activity
	// follows daytime traffic and drops to almost nothing at night.
	KindInference
)

func (k Kind) String() string {
	return [...]string{"train", "notebook", "serve"}[k]
}

// Job is a workload submitted to a LocalQueue.
type Job struct {
	ID        int
	Name      string
	Kind      Kind
	Namespace string
	Queue     string // LocalQueue name
	// Resource is nvidia.com/gpu or nvidia.com/mig-<profile>; Count how many.
	Resource string
	Count    int
	Submit   time.Time
	Duration time.Duration
}

// Profile returns the MIG profile the job asks for, or "" for whole GPUs.
func (j *Job) Profile() string {
	p, _ := strings.CutPrefix(j.Resource, config.MIGResourcePrefix)
	if p == j.Resource {
		return ""
	}
	return p
}

// GenerateMix returns a synthetic month of jobs for every LocalQueue of cfg:
// for each resource the queue's ClusterQueue has quota for, training jobs
// sized 1/2/4/8 GPUs (Gavel's distribution, with durations 60·10^U(1.5,3) s
// with probability 0.8, else 60·10^U(3,4) s) and some notebooks on whole
// GPUs; long-running inference endpoints and notebooks on MIG slices. The
// arrival rate aims at about loadFactor of each queue's nominal quota. Jobs
// come sorted by submit time; the same seed gives the same jobs.
func GenerateMix(cfg *config.Config, start time.Time, span time.Duration, loadFactor float64, seed uint64) []Job {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cqs := make(map[string]*config.ClusterQueue)
	for i := range cfg.ClusterQueues {
		cqs[cfg.ClusterQueues[i].Name] = &cfg.ClusterQueues[i]
	}
	// LocalQueues sharing a ClusterQueue share its quota.
	lqsPerCQ := make(map[string]int)
	for _, lq := range cfg.LocalQueues {
		lqsPerCQ[lq.ClusterQueue]++
	}
	var jobs []Job
	end := start.Add(span)
	for _, lq := range cfg.LocalQueues {
		cq := cqs[lq.ClusterQueue]
		if cq == nil {
			continue
		}
		for _, fq := range cq.Flavors {
			for _, r := range fq.Resources {
				quota := float64(r.NominalQuota) / float64(lqsPerCQ[lq.ClusterQueue])
				if quota <= 0 {
					continue
				}
				add := func(j Job) {
					j.Namespace, j.Queue, j.Resource = lq.Namespace, lq.Name, r.Name
					jobs = append(jobs, j)
				}
				mode := mixOf(lq.Name)
				if r.Name == config.ResourceGPU && mode != mixEndpoints {
					genTraining(rng, start, end, quota, loadFactor, add)
				} else {
					genSlices(rng, start, end, quota, loadFactor, mode, add)
				}
			}
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Submit.Before(jobs[j].Submit) })
	counts := make(map[Kind]int)
	for i := range jobs {
		j := &jobs[i]
		j.ID = i
		counts[j.Kind]++
		j.Name = j.Kind.String() + "-" + itoa4(counts[j.Kind])
	}
	return jobs
}

func itoa4(n int) string {
	s := []byte("0000")
	for i := 3; i >= 0 && n > 0; i-- {
		s[i] = byte('0' + n%10)
		n /= 10
	}
	if n > 0 {
		return itoa4(n/10000) + string(s)
	}
	return string(s)
}

func gavelDuration(rng *rand.Rand) time.Duration {
	lo, hi := 1.5, 3.0
	if rng.Float64() >= 0.8 {
		lo, hi = 3, 4
	}
	sec := 60 * math.Pow(10, lo+rng.Float64()*(hi-lo))
	return time.Duration(sec) * time.Second
}

func gavelSize(rng *rand.Rand, maxGPUs float64) int {
	p := rng.Float64()
	size := 1
	switch {
	case p < 0.70:
		size = 1
	case p < 0.80:
		size = 2
	case p < 0.95:
		size = 4
	default:
		size = 8
	}
	for float64(size) > maxGPUs && size > 1 {
		size /= 2
	}
	return size
}

// genTraining emits training jobs and a few notebooks whose expected GPU-time
// is loadFactor of quota over [start, end).
func genTraining(rng *rand.Rand, start, end time.Time, quota, load float64, add func(Job)) {
	// Mean GPU-seconds of a job under the mixes above: sizes average
	// 0.7·1 + 0.1·2 + 0.15·4 + 0.05·8 = 1.9 GPUs; durations average
	// 0.8·60·(10³−10^1.5)/(1.5·ln 10) + 0.2·60·(10⁴−10³)/ln 10 ≈ 60,360 s.
	const meanGPUSeconds = 1.9 * 60_360
	rate := quota * load / meanGPUSeconds // jobs per second
	t := start
	for {
		t = t.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !t.Before(end) {
			return
		}
		if rng.Float64() < 0.1 {
			add(Job{Kind: KindNotebook, Count: 1, Submit: t,
				Duration: time.Duration(2+rng.IntN(10)) * time.Hour})
			continue
		}
		add(Job{Kind: KindTraining, Count: gavelSize(rng, quota), Submit: t, Duration: gavelDuration(rng)})
	}
}

type mix uint8

const (
	mixAny mix = iota
	mixEndpoints
	mixNotebooks
)

// mixOf guesses from a LocalQueue's name what its team runs: a queue named
// for notebooks gets notebooks only, one named for endpoints, serving or
// inference gets endpoints; any other gets training on whole GPUs and a mix
// on MIG slices.
func mixOf(queue string) mix {
	switch q := strings.ToLower(queue); {
	case strings.Contains(q, "notebook"):
		return mixNotebooks
	case strings.Contains(q, "endpoint"), strings.Contains(q, "serv"), strings.Contains(q, "infer"):
		return mixEndpoints
	}
	return mixAny
}

// genSlices emits long-running inference endpoints for the whole span and
// notebooks that come and go: half the quota each for mixAny, all
// endpoints for mixEndpoints, all notebooks for mixNotebooks.
func genSlices(rng *rand.Rand, start, end time.Time, quota, load float64, m mix, add func(Job)) {
	endpoints := int(quota / 2)
	switch m {
	case mixEndpoints:
		endpoints = int(quota * load)
	case mixNotebooks:
		endpoints = 0
	}
	for i := 0; i < endpoints; i++ {
		add(Job{Kind: KindInference, Count: 1, Submit: start.Add(time.Duration(i) * time.Minute), Duration: end.Sub(start)})
	}
	rest := quota - float64(endpoints)
	if rest <= 0 || m == mixEndpoints {
		return
	}
	const meanNotebook = 8 * 3600.0
	rate := rest * load / meanNotebook
	t := start
	for {
		t = t.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !t.Before(end) {
			return
		}
		add(Job{Kind: KindNotebook, Count: 1, Submit: t, Duration: time.Duration(2+rng.IntN(12)) * time.Hour})
	}
}
