package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GPUsPerNode is the node size of the Philly-derived traces.
const GPUsPerNode = 8

// PhillyOptions selects what LoadPhilly reads.
type PhillyOptions struct {
	// From and To bound the submissions kept, on the replay's clock (after
	// the offsets); To 0 means no end. Submit times are counted from From.
	From, To time.Duration
	// MaxJobs keeps at most this many jobs per VC (0: all).
	MaxJobs int
	// VCs keeps only these VCs (their trace_<vc>.csv); empty: every trace
	// file in the folder.
	VCs []string
	// MissingNodes is the node count of a VC that philly_vc_nodes.csv does
	// not list (51b7ef is not in it); with 0, such a VC is an error, unless
	// SkipUnlisted leaves it out.
	MissingNodes int
	SkipUnlisted bool
	// Each VC's clock starts at its own first job. With OffsetSpread > 0,
	// VC k's jobs are shifted by an offset drawn uniformly from [0,
	// OffsetSpread) with OffsetSeed, so that who overlaps whom is not an
	// artefact of every trace starting at t=0; the same seed gives the same
	// offsets.
	OffsetSpread time.Duration
	OffsetSeed   uint64
}

// LoadPhilly reads the Philly-derived virtual-cluster traces in dir
// (trace_<vc>.csv: app_id, submit_time, service, num_jobs, sleep_time,
// model_name), philly_vc_nodes.csv (vc, node num) and model_speedups.csv
// (model_name, gpus, time_per_iteration_us, speedup). Each VC becomes a
// queue whose nominal quota is its nodes × 8 GPUs. A job's service is its
// work in single-GPU seconds: on n GPUs of model m it runs service /
// speedup(m, n) seconds (every row of the traces divides to whole seconds,
// the original durations).
func LoadPhilly(dir string, o PhillyOptions) ([]TraceQueue, []TraceJob, error) {
	nodes, err := readVCNodes(filepath.Join(dir, "philly_vc_nodes.csv"))
	if err != nil {
		return nil, nil, err
	}
	speedups, err := readSpeedups(filepath.Join(dir, "model_speedups.csv"))
	if err != nil {
		return nil, nil, err
	}
	vcs := o.VCs
	if len(vcs) == 0 {
		files, _ := filepath.Glob(filepath.Join(dir, "trace_*.csv"))
		if len(files) == 0 {
			return nil, nil, fmt.Errorf("no trace_*.csv in %s", dir)
		}
		for _, f := range files {
			vcs = append(vcs, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "trace_"), ".csv"))
		}
	}
	vcs = slices.Clone(vcs)
	slices.Sort(vcs)
	rng := rand.New(rand.NewPCG(o.OffsetSeed, o.OffsetSeed^0x9e3779b97f4a7c15))
	var queues []TraceQueue
	var jobs []TraceJob
	for _, vc := range vcs {
		n, ok := nodes[vc]
		if !ok && o.SkipUnlisted && o.MissingNodes <= 0 {
			continue
		}
		if !ok {
			if o.MissingNodes <= 0 {
				return nil, nil, fmt.Errorf("VC %s is not in philly_vc_nodes.csv: leave it out, or give its node count explicitly (-philly.missingNodes)", vc)
			}
			n = o.MissingNodes
		}
		var offset time.Duration
		if o.OffsetSpread > 0 {
			offset = time.Duration(rng.Int64N(int64(o.OffsetSpread/time.Second))) * time.Second
		}
		vcJobs, err := readVCTrace(filepath.Join(dir, "trace_"+vc+".csv"), vc, speedups, offset, o)
		if err != nil {
			return nil, nil, err
		}
		queues = append(queues, TraceQueue{Name: "vc-" + vc, NominalGPUs: n * GPUsPerNode, Cohort: "philly", BorrowingLimit: -1})
		jobs = append(jobs, vcJobs...)
	}
	sortJobs(jobs)
	return queues, jobs, nil
}

func readVCNodes(path string) (map[string]int, error) {
	recs, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	nodes := map[string]int{}
	for i, r := range recs[1:] {
		if len(r) != 2 {
			return nil, fmt.Errorf("%s line %d: %d fields; want vc,node num", filepath.Base(path), i+2, len(r))
		}
		n, err := strconv.Atoi(r[1])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s line %d: node num %q is not a positive count", filepath.Base(path), i+2, r[1])
		}
		nodes[r[0]] = n
	}
	return nodes, nil
}

type modelGPUs struct {
	model string
	gpus  int
}

func readSpeedups(path string) (map[modelGPUs]float64, error) {
	recs, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	out := map[modelGPUs]float64{}
	for i, r := range recs[1:] {
		if len(r) != 4 {
			return nil, fmt.Errorf("%s line %d: %d fields; want model_name,gpus,time_per_iteration_us,speedup", filepath.Base(path), i+2, len(r))
		}
		n, err1 := strconv.Atoi(r[1])
		s, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil || n <= 0 || !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("%s line %d: gpus %q, speedup %q; want a positive count and a positive factor", filepath.Base(path), i+2, r[1], r[3])
		}
		out[modelGPUs{r[0], n}] = s
	}
	return out, nil
}

// readVCTrace reads one VC's jobs, shifted by offset, within o's window.
func readVCTrace(path, vc string, speedups map[modelGPUs]float64, offset time.Duration, o PhillyOptions) ([]TraceJob, error) {
	recs, err := readCSV(path)
	if err != nil {
		return nil, fmt.Errorf("%w (is %s in the traces folder?)", err, vc)
	}
	name := filepath.Base(path)
	var out []TraceJob
	for i, r := range recs[1:] {
		if len(r) < 6 {
			return nil, fmt.Errorf("%s line %d: %d fields; want app_id,submit_time,service,num_jobs,sleep_time,model_name", name, i+2, len(r))
		}
		submit, err1 := strconv.ParseFloat(r[1], 64)
		service, err2 := strconv.ParseFloat(r[2], 64)
		gpus, err3 := strconv.Atoi(r[3])
		if err1 != nil || err2 != nil || err3 != nil || !(submit >= 0) || !(service >= 0) || gpus <= 0 || math.IsInf(submit+service, 0) {
			return nil, fmt.Errorf("%s line %d: submit_time %q, service %q, num_jobs %q; want seconds, single-GPU seconds and a GPU count", name, i+2, r[1], r[2], r[3])
		}
		speedup, ok := speedups[modelGPUs{r[5], gpus}]
		if !ok {
			return nil, fmt.Errorf("%s line %d: model_name %q on %d GPUs has no row in model_speedups.csv; want a model and GPU count listed there", name, i+2, r[5], gpus)
		}
		at := time.Duration(submit*float64(time.Second)) + offset
		if at < o.From || (o.To > 0 && at >= o.To) {
			continue
		}
		run := time.Duration(math.Round(service/speedup)) * time.Second
		// A job of n GPUs is n one-GPU workers (Philly's num_jobs), all
		// needed at once: a gang.
		out = append(out, TraceJob{ID: vc + "-" + r[0], Queue: "vc-" + vc, Submit: at - o.From,
			Duration: max(run, time.Second), GPUs: gpus, Pods: gpus, PerPod: 1})
	}
	// The files are not sorted by submit time.
	slices.SortStableFunc(out, func(a, b TraceJob) int { return int(a.Submit - b.Submit) })
	if o.MaxJobs > 0 && len(out) > o.MaxJobs {
		out = out[:o.MaxJobs]
	}
	return out, nil
}

// OfferedGPUs is the GPUs the jobs would keep busy, on average over
// [0, span), if each ran the moment it was submitted: the part of each
// job's GPU-time that falls in the window, over its length. A job
// submitted near the end of a window counts only for what it would run in
// it, so a window's offered load is what its capacity has to serve in it.
// span 0 means up to the last submission.
func OfferedGPUs(jobs []TraceJob, span time.Duration) float64 {
	if span <= 0 {
		for _, j := range jobs {
			span = max(span, j.Submit)
		}
	}
	if span <= 0 {
		return 0
	}
	var gpuSec float64
	for _, j := range jobs {
		from, to := max(j.Submit, 0), min(j.Submit+j.Duration, span)
		if to > from {
			gpuSec += float64(j.GPUs) * (to - from).Seconds()
		}
	}
	return gpuSec / span.Seconds()
}

// ScaleForLoad is the CapacityScale at which the queues' quotas (and so the
// cluster) make the GPUs the jobs offer over [0, span) (OfferedGPUs) this
// fraction of the capacity.
func ScaleForLoad(queues []TraceQueue, jobs []TraceJob, span time.Duration, load float64) (float64, error) {
	var quota int
	for _, q := range queues {
		quota += q.NominalGPUs
	}
	offered := OfferedGPUs(jobs, span)
	if load <= 0 || quota == 0 || offered == 0 {
		return 0, fmt.Errorf("offered load %g on %d GPUs of quota with %.1f GPUs offered: want a load > 0 and jobs over some time", load, quota, offered)
	}
	return offered / load / float64(quota), nil
}
