package sim

import (
	"container/heap"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// TraceJob is one job of a trace: a gang of Pods pods of PerPod units each
// (GPUs, GPUs in all) that must all run at once for Duration, submitted at
// Submit (from the trace's start).
type TraceJob struct {
	ID       string
	Queue    string
	Submit   time.Duration
	Duration time.Duration
	GPUs     int
	Pods     int
	PerPod   int
	Priority int32
	// Class names the job's kind in the results; empty: by size.
	Class string
}

// TraceQueue is a queue of a trace with its nominal quota in GPUs.
type TraceQueue struct {
	Name        string
	NominalGPUs int
	// Cohort is the queue's cohort; BorrowingLimit < 0 means none.
	Cohort         string
	BorrowingLimit int
}

// GPUsPerNode is the node size of the Philly-derived traces.
const GPUsPerNode = 8

// LoadPhilly reads the Philly-derived virtual-cluster traces in dir
// (trace_<vc>.csv: app_id, submit_time, service, num_jobs, sleep_time,
// model_name) and philly_vc_nodes.csv (vc, node num): each VC becomes a queue
// whose nominal quota is its nodes × 8 GPUs (a VC missing from the node list
// gets one node). Only jobs submitted in [from, to) are kept, at most maxJobs
// per VC (0: all), with submit times counted from from.
func LoadPhilly(dir string, from, to time.Duration, maxJobs int) ([]TraceQueue, []TraceJob, error) {
	nodes := map[string]int{}
	recs, err := readCSV(filepath.Join(dir, "philly_vc_nodes.csv"))
	if err != nil {
		return nil, nil, err
	}
	for i, r := range recs[1:] {
		if len(r) != 2 {
			return nil, nil, fmt.Errorf("philly_vc_nodes.csv line %d: %d fields; want vc,node num", i+2, len(r))
		}
		n, err := strconv.Atoi(r[1])
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("philly_vc_nodes.csv line %d: node num %q is not a positive count", i+2, r[1])
		}
		nodes[r[0]] = n
	}
	files, _ := filepath.Glob(filepath.Join(dir, "trace_*.csv"))
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no trace_*.csv in %s", dir)
	}
	var queues []TraceQueue
	var jobs []TraceJob
	for _, f := range files {
		vc := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "trace_"), ".csv")
		recs, err := readCSV(f)
		if err != nil {
			return nil, nil, err
		}
		n := nodes[vc]
		if n == 0 {
			n = 1
		}
		queues = append(queues, TraceQueue{Name: "vc-" + vc, NominalGPUs: n * GPUsPerNode, Cohort: "philly", BorrowingLimit: -1})
		var vcJobs []TraceJob
		for i, r := range recs[1:] {
			if len(r) < 4 {
				return nil, nil, fmt.Errorf("%s line %d: %d fields; want app_id,submit_time,service,num_jobs,...", filepath.Base(f), i+2, len(r))
			}
			submit, err1 := strconv.ParseFloat(r[1], 64)
			service, err2 := strconv.ParseFloat(r[2], 64)
			gpus, err3 := strconv.Atoi(r[3])
			if err1 != nil || err2 != nil || err3 != nil || submit < 0 || service < 0 || gpus <= 0 {
				return nil, nil, fmt.Errorf("%s line %d: submit_time %q, service %q, num_jobs %q; want seconds, seconds and a GPU count", filepath.Base(f), i+2, r[1], r[2], r[3])
			}
			at := time.Duration(submit * float64(time.Second))
			if at < from || at >= to {
				continue
			}
			at -= from
			// A job of n GPUs is n one-GPU workers (Philly's num_jobs), all
			// needed at once: a gang.
			vcJobs = append(vcJobs, TraceJob{ID: vc + "-" + r[0], Queue: "vc-" + vc, Submit: at,
				Duration: max(time.Duration(service*float64(time.Second)), time.Second), GPUs: gpus, Pods: gpus, PerPod: 1})
		}
		// The files are not sorted by submit time.
		slices.SortStableFunc(vcJobs, func(a, b TraceJob) int { return int(a.Submit - b.Submit) })
		if maxJobs > 0 && len(vcJobs) > maxJobs {
			vcJobs = vcJobs[:maxJobs]
		}
		jobs = append(jobs, vcJobs...)
	}
	sortJobs(jobs)
	return queues, jobs, nil
}

// sortJobs orders jobs by submission time, then ID.
func sortJobs(jobs []TraceJob) {
	slices.SortStableFunc(jobs, func(a, b TraceJob) int {
		if a.Submit != b.Submit {
			return int(a.Submit - b.Submit)
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(recs) < 1 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return recs, nil
}

// ReplayOptions configures Replay.
type ReplayOptions struct {
	// Policy is fifo, kueue (Kueue fair sharing), kueue-afs (Kueue
	// Admission Fair Sharing) or costfair (gpuledger's cost-weighted fair
	// share).
	Policy string
	// Gating admits gangs all at once; without it, a job's pods are placed
	// as GPUs free up and the placed ones wait, held, for the rest.
	Gating bool
	// SameDomain keeps a gang in one rack (NodesPerRack nodes).
	SameDomain   bool
	NodesPerRack int
	// HalfLife of the decayed usage kueue-afs and costfair weigh. Default 1 h.
	HalfLife time.Duration
	// PriceMicrosPerGPUHour prices GPU time for costfair and the per-team
	// cost. Default 6.88 (an on-demand H100).
	PriceMicrosPerGPUHour int64
	// Limit stops the replay this long after the start; 0 runs until every
	// job has finished.
	Limit time.Duration
	// NodeSize is the units a node has. Default 8 (GPUs).
	NodeSize int
	// ReadyTimeout, without gating, evicts a gang whose pods are not all
	// placed this long after its admission, freeing what it holds, and
	// requeues it after BackoffBase × 2^(evictions−1) (Kueue's
	// waitForPodsReady with requeuing by eviction time). 0: never.
	ReadyTimeout time.Duration
	// BackoffBase is the first requeue delay. Default 60 s.
	BackoffBase time.Duration
	// Ledger, when set, closes the loop: every hour the replay writes each
	// queue's GPU time and cost (and the unallocated rest, so that every
	// hour reconciles) to it, and the costfair policy reads its shares back
	// from it, the hours' costs decayed by their age. Hours start at Epoch
	// (default 2026-01-01 UTC).
	Ledger ledger.Store
	Epoch  time.Time
	// CapacityScale shrinks every queue's quota, and so the cluster, to
	// this fraction (at least one node each): a short window of a trace
	// then sees the contention the whole trace has. 0 means 1.
	CapacityScale float64
}

// ErrPolicy is returned for a policy name Replay does not know.
var ErrPolicy = errors.New("unknown policy")

// ReplayResult is what a policy achieved.
type ReplayResult struct {
	Policy   string `json:"policy"`
	Gating   bool   `json:"gating"`
	Jobs     int    `json:"jobs"`
	Finished int    `json:"finished"`
	// AvgJCTSeconds and P95JCTSeconds are over finished jobs: finish − submit.
	AvgJCTSeconds float64 `json:"avgJctSeconds"`
	P95JCTSeconds float64 `json:"p95JctSeconds"`
	// WaitBySize is the mean wait (start − submit) per size class.
	WaitBySize map[string]float64 `json:"meanWaitSecondsBySize"`
	// Utilization is GPU time of running jobs over GPUs × makespan.
	Utilization float64 `json:"utilization"`
	// Jain is Jain's fairness index over each queue's GPU time divided by
	// its nominal quota.
	Jain float64 `json:"jainFairness"`
	// PartialGangGPUHours is GPU time held by jobs whose pods were not all
	// placed yet.
	PartialGangGPUHours float64 `json:"partialGangGpuHours"`
	// Evictions counts gangs evicted by ReadyTimeout.
	Evictions int `json:"evictions"`
	// CostMicrosByQueue is each queue's GPU time at the price.
	CostMicrosByQueue map[string]int64 `json:"costMicrosByQueue"`
	Makespan          time.Duration    `json:"-"`
}

func sizeClass(gpus int) string {
	switch {
	case gpus == 1:
		return "1"
	case gpus <= 4:
		return "2-4"
	case gpus <= 8:
		return "5-8"
	}
	return ">8"
}

type replayRun struct {
	end   time.Duration
	job   *replayJob
	nodes []int
}

type runHeap []*replayRun

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*replayRun)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type replayJob struct {
	TraceJob
	w      admission.Workload
	start  time.Duration
	placed []int // nodes holding one of its pods (partial without gating)
	// Without gating: when the gang was admitted, how often it was evicted
	// for not getting all its pods in time, and when it comes back.
	admittedAt time.Duration
	requeues   int
	requeueAt  time.Duration
	held       int // GPUs placed
}

// Replay runs the jobs through the admission core on a cluster with as many
// 8-GPU nodes as the queues' quotas add up to, all queues in one cohort that
// lends without limit, and measures the result. The same inputs give the
// same result.
func Replay(queues []TraceQueue, jobs []TraceJob, opts ReplayOptions) (ReplayResult, error) {
	if opts.HalfLife <= 0 {
		opts.HalfLife = time.Hour
	}
	if opts.PriceMicrosPerGPUHour <= 0 {
		opts.PriceMicrosPerGPUHour = 6_880_000
	}
	if opts.NodesPerRack <= 0 {
		opts.NodesPerRack = 8
	}
	if opts.NodeSize <= 0 {
		opts.NodeSize = GPUsPerNode
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = time.Minute
	}
	nodeSize := opts.NodeSize
	var policy admission.Sharer
	switch opts.Policy {
	case "fifo":
		policy = admission.FIFO{}
	case "kueue":
		policy = admission.KueueFairSharing{}
	case "kueue-afs", "costfair":
		policy = admission.ShareOrder{PolicyName: opts.Policy}
	default:
		return ReplayResult{}, fmt.Errorf("%w %q: want fifo, kueue, kueue-afs or costfair", ErrPolicy, opts.Policy)
	}
	const res = "nvidia.com/gpu"
	fr := admission.FlavorResource{Flavor: "gpu", Resource: res}
	snap := &admission.Snapshot{Queues: map[string]*admission.ClusterQueue{}, Usage: map[string]map[admission.FlavorResource]int64{}}
	totalNodes := 0
	nominal := map[string]int{}
	scale := opts.CapacityScale
	if scale <= 0 {
		scale = 1
	}
	for _, q := range queues {
		nodes := max(int(math.Round(float64(q.NominalGPUs)/float64(nodeSize)*scale)), 1)
		gpus := nodes * nodeSize
		borrow := int64(q.BorrowingLimit)
		if q.BorrowingLimit >= 0 {
			borrow = int64(math.Round(float64(q.BorrowingLimit) * scale))
		}
		snap.Queues[q.Name] = &admission.ClusterQueue{Name: q.Name, Cohort: q.Cohort, Team: q.Name, Weight: 1, Flavors: []string{"gpu"},
			Quotas: map[admission.FlavorResource]admission.Quota{fr: {Nominal: int64(gpus), BorrowingLimit: borrow, LendingLimit: -1}}}
		totalNodes += nodes
		nominal[q.Name] = gpus
	}
	for i := range totalNodes {
		snap.Nodes = append(snap.Nodes, admission.Node{Name: "node-" + strconv.Itoa(i), Flavor: "gpu",
			Domain: "rack-" + strconv.Itoa(i/opts.NodesPerRack), Free: int64(nodeSize)})
	}
	nodeIndex := make(map[string]int, len(snap.Nodes))
	for i, n := range snap.Nodes {
		nodeIndex[n.Name] = i
	}
	rjobs := make([]*replayJob, len(jobs))
	for i, j := range jobs {
		if j.Pods <= 0 || j.PerPod <= 0 {
			j.Pods, j.PerPod = j.GPUs, 1
		}
		j.GPUs = j.Pods * j.PerPod
		rjobs[i] = &replayJob{TraceJob: j, w: admission.Workload{ID: j.ID, Queue: j.Queue, Resource: res, Pods: j.Pods, PerPod: int64(j.PerPod),
			Priority: j.Priority, SubmittedMs: j.Submit.Milliseconds()}}
	}
	decayed := admission.NewDecayed(opts.HalfLife.Milliseconds())
	// Pending workloads per queue in FIFO order; admitted ones are marked
	// dead and dropped lazily, so a cycle costs what it admits, not the
	// backlog.
	lists := map[string][]*admission.Workload{}
	dead := map[*admission.Workload]bool{}
	deadIn := map[string]int{}
	bySize := map[int]int{} // pending jobs per GPU count
	pendingCount := 0
	take := func(w *admission.Workload) {
		dead[w] = true
		deadIn[w.Queue]++
		bySize[int(w.Units())]--
		pendingCount--
		if l := lists[w.Queue]; deadIn[w.Queue] > len(l)/2 {
			lists[w.Queue] = slices.DeleteFunc(l, func(x *admission.Workload) bool { return dead[x] })
			deadIn[w.Queue] = 0
		}
	}
	var (
		now               time.Duration
		next              int
		partial           []*replayJob // without gating: admitted, some pods placed
		delayed           []*replayJob // evicted, waiting for their requeue time
		evictions         int
		run               runHeap
		usedSec           = map[string]float64{}
		busyGPUs          int
		heldGPUs          int // by partial gangs
		busyGPUSeconds    float64
		partialGPUSeconds float64
		waits             = map[string][]float64{}
		jcts              []float64
		finished          int
	)
	snap.Share = map[string]float64{}
	// The closed loop: GPU-seconds per queue of each hour not yet written.
	epoch := opts.Epoch
	if epoch.IsZero() {
		epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	hourUse := map[int64]map[string]float64{}
	written := int64(0) // hours before this one are in the ledger
	capacityCost := int64(totalNodes*nodeSize) * opts.PriceMicrosPerGPUHour
	book := func(q string, from, to time.Duration, gpus float64) {
		if opts.Ledger == nil {
			return
		}
		for from < to {
			h := int64(from / time.Hour)
			end := min(to, time.Duration(h+1)*time.Hour)
			if hourUse[h] == nil {
				hourUse[h] = map[string]float64{}
			}
			hourUse[h][q] += gpus * (end - from).Seconds()
			from = end
		}
	}
	var ledgerErr error
	flushLedger := func() {
		cur := int64(now / time.Hour)
		if opts.Ledger == nil || cur <= written || ledgerErr != nil {
			return
		}
		var rows []ledger.Row
		for h := written; h < cur; h++ {
			hour := epoch.Add(time.Duration(h) * time.Hour)
			var sum int64
			names := make([]string, 0, len(hourUse[h]))
			for q := range hourUse[h] {
				names = append(names, q)
			}
			sort.Strings(names)
			var held float64
			for _, q := range names {
				sec := hourUse[h][q]
				cost := int64(sec / 3600 * float64(opts.PriceMicrosPerGPUHour))
				sum += cost
				held += sec
				rows = append(rows, ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "replay", Team: q, Namespace: q, ClusterQueue: q, Flavor: "gpu"},
					GPUSeconds: sec, ActiveGPUSeconds: sec, CostMicros: cost})
			}
			rows = append(rows, ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "replay", Team: ledger.TeamUnallocated, Flavor: "gpu"},
				GPUSeconds: float64(totalNodes*nodeSize)*3600 - held, CostMicros: capacityCost - sum, UnallocatedCostMicros: capacityCost - sum})
			delete(hourUse, h)
		}
		if ledgerErr = opts.Ledger.WriteHours(context.Background(), rows, nil); ledgerErr != nil {
			return
		}
		written = cur
		if opts.Policy != "costfair" {
			return
		}
		// Shares from the ledger: each hour's cost halves every half-life
		// of its age.
		from := epoch.Add(time.Duration(cur)*time.Hour - 20*opts.HalfLife)
		got, err := opts.Ledger.Query(context.Background(), ledger.Query{From: from, To: epoch.Add(time.Duration(cur) * time.Hour),
			Step: ledger.StepHour, GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "replay"})
		if err != nil {
			ledgerErr = err
			return
		}
		ledgerShare := map[string]float64{}
		nowT := epoch.Add(now)
		for _, r := range got {
			age := nowT.Sub(r.Hour.Add(30 * time.Minute))
			ledgerShare[r.Team] += float64(r.CostMicros) * math.Exp2(-age.Seconds()/opts.HalfLife.Seconds())
		}
		snap.Share = ledgerShare
	}
	byID := make(map[string]*replayJob, len(rjobs))
	for _, j := range rjobs {
		byID[j.ID] = j
	}
	advance := func(t time.Duration) {
		dt := (t - now).Seconds()
		if dt > 0 {
			busyGPUSeconds += float64(busyGPUs) * dt
			partialGPUSeconds += float64(heldGPUs) * dt
			for _, r := range run {
				g := float64(r.job.GPUs) * dt
				usedSec[r.job.Queue] += g
				book(r.job.Queue, now, t, float64(r.job.GPUs))
				switch opts.Policy {
				case "kueue-afs":
					decayed.Add(r.job.Queue, g)
				case "costfair":
					decayed.Add(r.job.Queue, g/3600*float64(opts.PriceMicrosPerGPUHour))
				}
			}
			for _, p := range partial {
				book(p.Queue, now, t, float64(p.held))
				// Held GPUs of a partial gang cost the queue too.
				if opts.Policy == "costfair" {
					decayed.Add(p.Queue, float64(p.held)*dt/3600*float64(opts.PriceMicrosPerGPUHour))
				}
			}
		}
		now = t
		decayed.Advance(t.Milliseconds() + 1)
	}
	startJob := func(j *replayJob, nodes []int) {
		j.start = now
		heap.Push(&run, &replayRun{end: now + j.Duration, job: j, nodes: nodes})
		busyGPUs += j.GPUs
		c := j.Class
		if c == "" {
			c = sizeClass(j.GPUs)
		}
		waits[c] = append(waits[c], (j.start - j.Submit).Seconds())
	}
	for {
		// Next event: a submission or a completion.
		t := time.Duration(math.MaxInt64)
		if next < len(rjobs) {
			t = rjobs[next].Submit
		}
		if len(run) > 0 && run[0].end < t {
			t = run[0].end
		}
		if opts.ReadyTimeout > 0 {
			for _, p := range partial {
				t = min(t, p.admittedAt+opts.ReadyTimeout)
			}
		}
		for _, d := range delayed {
			t = min(t, d.requeueAt)
		}
		if t == time.Duration(math.MaxInt64) || (opts.Limit > 0 && t > opts.Limit) {
			break
		}
		advance(t)
		for len(run) > 0 && run[0].end <= now {
			r := heap.Pop(&run).(*replayRun)
			for _, i := range r.nodes {
				snap.Nodes[i].Free += r.job.w.PerPod
			}
			snap.Usage[r.job.Queue][fr] -= int64(r.job.GPUs)
			busyGPUs -= r.job.GPUs
			finished++
			jcts = append(jcts, (now - r.job.Submit).Seconds())
		}
		for next < len(rjobs) && rjobs[next].Submit <= now {
			j := rjobs[next]
			lists[j.Queue] = admission.InsertFIFO(lists[j.Queue], &j.w)
			bySize[j.GPUs]++
			pendingCount++
			next++
		}
		// Evicted gangs whose backoff is over queue again, ordered by their
		// eviction time.
		back := delayed[:0]
		for _, d := range delayed {
			if d.requeueAt > now {
				back = append(back, d)
				continue
			}
			// Its old entry is dead in the list: drop the dead ones first so
			// that it is not there twice.
			lists[d.Queue] = slices.DeleteFunc(lists[d.Queue], func(x *admission.Workload) bool { return dead[x] })
			deadIn[d.Queue] = 0
			delete(dead, &d.w)
			d.w.SubmittedMs = now.Milliseconds()
			lists[d.Queue] = admission.InsertFIFO(lists[d.Queue], &d.w)
			bySize[d.GPUs]++
			pendingCount++
		}
		delayed = back
		// Gangs waiting for pods first (without gating), in admission order.
		kept := partial[:0]
		for _, p := range partial {
			if opts.ReadyTimeout > 0 && now-p.admittedAt >= opts.ReadyTimeout {
				// Not ready in time: free its pods and quota, requeue later.
				for _, i := range p.placed {
					snap.Nodes[i].Free += p.w.PerPod
				}
				heldGPUs -= p.held
				snap.Usage[p.Queue][fr] -= int64(p.GPUs)
				p.placed, p.held = p.placed[:0], 0
				p.requeues++
				evictions++
				p.requeueAt = now + opts.BackoffBase<<min(p.requeues-1, 20)
				delayed = append(delayed, p)
				continue
			}
			for p.held < p.GPUs {
				i := freestNode(snap.Nodes, p.w.PerPod)
				if i < 0 {
					break
				}
				snap.Nodes[i].Free -= p.w.PerPod
				p.placed = append(p.placed, i)
				p.held += int(p.w.PerPod)
				heldGPUs += int(p.w.PerPod)
			}
			if p.held >= p.GPUs {
				heldGPUs -= p.held
				startJob(p, p.placed)
				continue
			}
			kept = append(kept, p)
		}
		partial = kept
		if pendingCount == 0 {
			continue
		}
		// Nothing can start when the free GPUs are fewer than the smallest
		// pending job needs: skip the cycle.
		var free int64
		for i := range snap.Nodes {
			free += snap.Nodes[i].Free
		}
		smallest := int64(math.MaxInt64)
		for size, n := range bySize {
			if n > 0 {
				smallest = min(smallest, int64(size))
			}
		}
		if opts.Gating && free < smallest {
			continue
		}
		flushLedger()
		if ledgerErr != nil {
			return ReplayResult{}, fmt.Errorf("ledger: %w", ledgerErr)
		}
		if opts.Policy == "kueue-afs" || (opts.Policy == "costfair" && opts.Ledger == nil) {
			snap.Share = decayed.Shares(snap.Queues)
		}
		stream := admission.Stream(policy.QueueShares(snap), lists, func(w *admission.Workload) bool { return dead[w] })
		if opts.Gating {
			for _, d := range admission.AdmitInOrder(snap, stream, admission.Options{SameDomain: opts.SameDomain}) {
				if !d.Admitted {
					continue
				}
				j := byID[d.Workload.ID]
				nodes := make([]int, len(d.Nodes))
				for k, n := range d.Nodes {
					nodes[k] = nodeIndex[n]
				}
				take(d.Workload)
				startJob(j, nodes)
			}
			continue
		}
		// Without gating: admit by quota alone, then place what fits now.
		// In one cohort lending without limit, nothing more fits once the
		// cohort's free quota is below the smallest pending job.
		var headroom int64
		for name, q := range snap.Queues {
			headroom += q.Quotas[fr].Nominal - snap.Usage[name][fr]
		}
		for headroom >= smallest {
			w := stream()
			if w == nil {
				break
			}
			if snap.FitsQuota(w.Queue, fr, w.Units()) != "" {
				continue
			}
			if snap.Usage[w.Queue] == nil {
				snap.Usage[w.Queue] = map[admission.FlavorResource]int64{}
			}
			snap.Usage[w.Queue][fr] += w.Units()
			headroom -= w.Units()
			j := byID[w.ID]
			take(w)
			j.admittedAt = now
			partial = append(partial, j)
			for j.held < j.GPUs {
				i := freestNode(snap.Nodes, w.PerPod)
				if i < 0 {
					break
				}
				snap.Nodes[i].Free -= w.PerPod
				j.placed = append(j.placed, i)
				j.held += int(w.PerPod)
				heldGPUs += int(w.PerPod)
			}
			if j.held >= j.GPUs {
				heldGPUs -= j.held
				partial = partial[:len(partial)-1]
				startJob(j, j.placed)
			}
		}
	}
	// The hours after the last admission cycle go to the ledger too.
	flushLedger()
	if ledgerErr != nil {
		return ReplayResult{}, fmt.Errorf("ledger: %w", ledgerErr)
	}
	r := ReplayResult{Policy: opts.Policy, Gating: opts.Gating, Jobs: len(jobs), Finished: finished, Makespan: now, Evictions: evictions,
		WaitBySize: map[string]float64{}, CostMicrosByQueue: map[string]int64{}, PartialGangGPUHours: partialGPUSeconds / 3600}
	if len(jcts) > 0 {
		sort.Float64s(jcts)
		var sum float64
		for _, v := range jcts {
			sum += v
		}
		r.AvgJCTSeconds = sum / float64(len(jcts))
		r.P95JCTSeconds = jcts[int(math.Ceil(0.95*float64(len(jcts))))-1]
	}
	for c, ws := range waits {
		var sum float64
		for _, v := range ws {
			sum += v
		}
		r.WaitBySize[c] = sum / float64(len(ws))
	}
	if now > 0 {
		r.Utilization = busyGPUSeconds / (float64(totalNodes*nodeSize) * now.Seconds())
	}
	var s1, s2 float64
	names := make([]string, 0, len(nominal))
	for q := range nominal {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		x := usedSec[q] / float64(nominal[q])
		s1 += x
		s2 += x * x
		r.CostMicrosByQueue[q] = int64(math.Round(usedSec[q] / 3600 * float64(opts.PriceMicrosPerGPUHour)))
	}
	if s2 > 0 {
		r.Jain = s1 * s1 / (float64(len(names)) * s2)
	}
	return r, nil
}

// freestNode returns the node with the most free units that takes n, or -1.
func freestNode(nodes []admission.Node, n int64) int {
	best := -1
	for i := range nodes {
		if nodes[i].Free >= n && (best < 0 || nodes[i].Free > nodes[best].Free) {
			best = i
		}
	}
	return best
}
