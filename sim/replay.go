package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// ReplayOptions configures Replay.
type ReplayOptions struct {
	// Policy is fifo, kueue (Kueue fair sharing), kueue-afs (Kueue
	// Admission Fair Sharing), costfair (gpuledger's cost-weighted fair
	// share) or costfair-drs (Kueue fair sharing, each queue's weight set
	// before every cycle from its decayed spend against its entitlement:
	// admission.MoneyWeights). kueue and kueue-afs weigh every queue 1, as
	// Kueue does by default; costfair weighs a queue by what its nominal
	// quota is worth (GPUs × price), its entitlement in money.
	Policy string
	// Gating admits gangs all at once, within quota (Kueue); without it
	// there is no admission: a job's pods are created at submission,
	// placed as GPUs free up, and the placed ones wait, held, for the rest
	// (the default scheduler).
	Gating bool
	// Preemption lets a queue take back its nominal quota from queues that
	// borrow it (reclaimWithinCohort: Any; withinClusterQueue:
	// LowerPriority). kueue preempts as Kueue's fair sharing does, by
	// dominant resource share (strategies LessThanOrEqualToFinalShare then
	// LessThanInitialShare), also between borrowers; the others only
	// reclaim nominal quota, as Kueue does without fair sharing, newest
	// first. Preempted jobs lose their progress
	// and queue again at their place. Only with Gating.
	Preemption bool
	// PreemptionRules picks the preemption rules independently of
	// the policy: "kueue" (Kueue's fair-sharing strategies,
	// LessThanOrEqualToFinalShare then LessThanInitialShare, also between
	// borrowers) or "reclaim" (take back nominal quota only, newest
	// first). Empty: kueue for the kueue policy, reclaim for the others.
	PreemptionRules string
	// Order is the order inside a queue: "fifo" (Kueue's: priority, then
	// creation) or "small-first" (fewer GPUs first: Tiresias' least
	// attained service for jobs that have not run, none of which has
	// attained any, with the GPU count as the tie-break it uses;
	// expressed through the spec.priority of pending workloads, restored
	// at admission so that it does not choose preemption victims).
	// Empty: fifo.
	Order string
	// AgingAfter: a job waiting this long is moved to the front of its
	// queue (a priority bump), and while the oldest such job does not fit,
	// the GPUs it needs are kept for it as they free up; other jobs may
	// use the rest (a reservation with backfill: the controller holds the
	// workloads that would take the kept GPUs with its AdmissionCheck).
	// Only with Gating; 0: never.
	AgingAfter time.Duration
	// SameDomain keeps a gang in one rack (NodesPerRack nodes).
	SameDomain   bool
	NodesPerRack int
	// HalfLife of the decayed usage kueue-afs and costfair weigh. Default 1 h.
	HalfLife time.Duration
	// PriceMicrosPerGPUHour prices GPU time for costfair and the per-team
	// cost. Default 6.88 (an on-demand H100).
	PriceMicrosPerGPUHour int64
	// Flavors, when set, make the cluster heterogeneous: each flavor has
	// its Share of every queue's quota and of the nodes, and its own price
	// (PriceMicrosPerGPUHour is then unused). Queues try the flavors in
	// this order. Only with Gating.
	Flavors []ReplayFlavor
	// AdmissionPenalty: kueue-afs and costfair charge a queue, when one of
	// its workloads is admitted, what holding its GPUs this long adds to
	// its share (Admission Fair Sharing's penalty at admission). Default
	// 5 min (Kueue's usage sampling interval); negative means none.
	AdmissionPenalty time.Duration
	// FlavorTargets keeps each queue to its share of every flavor in the
	// money-fair split of the flavors among the backlogged queues
	// (admission.MoneyTargets): costfair's order decides who goes first,
	// the targets which flavor a team that may run anywhere leaves to a
	// team that cannot. Only with Gating.
	FlavorTargets bool
	// IdlePenalty, an experiment: costfair counts a GPU-hour held idle
	// (a gang's pods waiting for the rest, a job's Idle share) as 1 +
	// IdlePenalty GPU-hours of spend, as the controller's -idlePenalty
	// counts the ledger's idle cost (admission.LedgerSpend). Default 0
	// (none). Without Ledger only.
	IdlePenalty float64
	// SettledSpend, when positive, has costfair read each queue's spend
	// as gpuledger's controller reads the ledger: whole trace hours only,
	// once they have ended, each decayed from its middle
	// (admission.LedgerSpend), re-read every SettledSpend of the trace
	// clock (the controller's weight interval). 0: the spend decayed up
	// to the moment, continuously. Without Ledger only.
	SettledSpend time.Duration
	// ControllerWeights, when positive, runs costfair as gpuledger's
	// controller makes a real Kueue run it: Admission Fair Sharing orders
	// the queues by their decayed GPU usage (its admission penalty
	// included) over a weight, and every ControllerWeights of the trace
	// clock the controller sets each weight to usage / money share,
	// scaled to average 1 over the queues with both, bounded to
	// [0.01, 100], written only when it moves by more than Hysteresis
	// (admission.UsageWeights and WeightChanged; 0 or less:
	// admission.DefaultHysteresis, as the controller). 0: costfair's own
	// order, the money share itself. Without Ledger only.
	ControllerWeights time.Duration
	Hysteresis        float64
	// Limit stops the replay this long after the start; 0 runs until every
	// job has finished.
	Limit time.Duration
	// MaxPending bounds each queue's backlog in the queue: a queue has at
	// most this many jobs submitted and never started, and its next job
	// enters the queue when one of them starts (a team whose pipeline
	// submits as a slot opens), at the later of that time and its own
	// submission, ordered by when it entered. Its wait is still counted
	// from its submission. 0: no bound.
	MaxPending int
	// NodeSize is the units a node has. Default 8 (GPUs).
	NodeSize int
	// ReadyTimeout, without gating, evicts a gang whose pods are not all
	// placed this long after its admission, freeing what it holds, and
	// requeues it after BackoffBase × 2^(evictions−1) (Kueue's
	// waitForPodsReady with requeuing by eviction time). 0: never.
	ReadyTimeout time.Duration
	// BackoffBase is the first requeue delay. Default 60 s.
	BackoffBase time.Duration
	// Ledger, when set, closes the loop: the cluster's GPUs emit
	// dcgm-exporter and kube-state-metrics exposition every ScrapeInterval
	// (default 60 s), ingest and attribution turn it into hourly rows in
	// this Store, and costfair reads its shares back from the Store: each
	// hour's cost and energy cost, decayed by its age. Hours start at Epoch (default 2026-01-01 UTC). Energy is priced
	// at EnergyPriceMicrosPerKWh (default 0.12) × PUEMicros (default 1.3).
	// Ingest makes the pipeline the telemetry goes through (in
	// production: ingest.NewPipeline onto Ledger).
	Ledger                  ledger.Store
	Ingest                  IngesterFactory
	Epoch                   time.Time
	ScrapeInterval          time.Duration
	EnergyPriceMicrosPerKWh int64
	PUEMicros               int64
	// CapacityScale shrinks every queue's quota, and so the cluster, to
	// this fraction (at least one node each): a short window of a trace
	// then sees the contention the whole trace has. 0 means 1.
	CapacityScale float64
	// SampleEvery is how often JainBacklogged and MoneyGap sample.
	// Default 1 h.
	SampleEvery time.Duration
	// Isolated holds each job's completion time with its queue alone on
	// its nominal quota (IsolatedJCT); with it the result has finish-time
	// fairness.
	Isolated map[string]float64

	// recordHolds records the pods' holds on the model's devices without
	// the closed loop (Model.Run: the telemetry is rendered afterwards).
	recordHolds bool
}

// ReplayFlavor is one GPU type of a heterogeneous replay.
type ReplayFlavor struct {
	Name                  string
	Share                 float64
	PriceMicrosPerGPUHour int64
	// Model is the GPU model name its nodes report (closed loop).
	Model string
	// Speed is how fast a job runs on it relative to the GPU the trace's
	// durations were measured on: a job of duration d runs d / Speed.
	// 0 means 1.
	Speed float64
	// GavelGPU, instead of Speed, runs each job at Gavel's measured
	// throughput of its model on this GPU type (k80, p100 or v100) over
	// that on TraceGPU, the one the trace's durations were measured on.
	GavelGPU, TraceGPU string
	// Resource is what its nodes offer: nvidia.com/gpu (the default) or
	// a MIG profile's nvidia.com/mig-<profile>, each GPU then cut into as
	// many instances as the profile's compute slices allow.
	Resource string
	// GPUs, with TraceCluster.SharedGPUs, is its GPUs (instead of its
	// Share of them).
	GPUs int
}

type replayRun struct {
	end       time.Duration
	job       *replayJob
	nodes     []int
	cancelled bool // preempted
}

type runHeap []*replayRun

func (h runHeap) Len() int { return len(h) }

func (h runHeap) Less(i, j int) bool { return h[i].end < h[j].end }

func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *runHeap) Push(x any) { *h = append(*h, x.(*replayRun)) }

func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type replayJob struct {
	TraceJob
	w       admission.Workload
	start   time.Duration
	started bool  // it has started once
	placed  []int // nodes holding one of its pods (partial without gating)
	// Without gating: when the gang was admitted, how often it was evicted
	// for not getting all its pods in time (admission.Queues holds it out
	// for its backoff).
	admittedAt time.Duration
	requeues   int
	held       int // GPUs placed
	// With preemption: its entry in the snapshot and its run.
	running *admission.Running
	run     *replayRun
	// The flavor and resource it runs on, and their price per unit-second.
	fr   admission.FlavorResource
	rate float64
	// queuePriority orders it while it waits; once admitted it has the
	// trace's priority again, so that the order's priorities do not pick
	// preemption victims (the controller sets spec.priority of pending
	// workloads only, and restores it at admission).
	queuePriority int32
	// When holds are recorded: its telemetry identity, its pods' holds
	// and how many pods it has had.
	simJob *Job
	holds  []podHold
	pods   int
}

// replay is the state of one Replay.
type replay struct {
	// ReplayOptions.FlavorTargets: each queue's flavors, the targets and
	// the backlogged queues they are for.
	queueFlavors map[string][]string
	targets      *admission.MoneyTargets
	targetsFor   []bool
	opts         ReplayOptions
	model        *Model
	policy       admission.Sharer
	snap         *admission.Snapshot
	nodeIdx      map[string]int
	jobs         []*replayJob // by submission
	byID         map[string]*replayJob
	// ungated is the one flavor and resource of a replay without gating.
	ungated admission.FlavorResource
	// speeds says how long a job runs on each flavor.
	speeds  speeds
	decayed *admission.Decayed
	// penalties holds the admission penalties apart when the shares come
	// from the ledger (which knows what was spent, not what was charged).
	penalties *admission.Decayed
	loop      *loop
	// settled is costfair's spend by queue and trace hour, and
	// settledShare what was last read from it, with SettledSpend;
	// nextSettled is when it is read again.
	settled      map[string]map[int]float64
	settledShare map[string]float64
	nextSettled  time.Duration
	// consumed is Admission Fair Sharing's decayed usage and
	// nextWeights when the controller sets the weights again, with
	// ControllerWeights.
	consumed    *admission.Decayed
	nextWeights time.Duration
	rec         *recorder // the pods' holds on the devices
	names       []string  // the queues, sorted: sums in one order
	// The workloads waiting, per queue (admission's queue manager).
	queues *admission.Queues

	now      time.Duration
	run      runHeap
	partial  []*replayJob // without gating: admitted, some pods placed
	busyGPUs int
	heldGPUs int // by partial gangs
	usedSec  map[string]float64
	usedCost map[string]float64 // micros
	busySec  float64
	// window is the submission window (to the last submission);
	// busyWindowSec the GPU time busy in it, the drain apart.
	window        time.Duration
	busyWindowSec float64
	heldSec       float64
	idlePaidSec   float64 // GPU time held idle while other queues waited
	lostSec       float64
	nextJain      time.Duration
	jainSum       float64
	jainN         int
	gaps          moneyGaps
	waits         map[string][]float64
	maxWait       map[string]float64
	jcts          map[string]float64
	evictions     int
	preempted     int
	// With MaxPending: each queue's jobs submitted and not yet let into
	// the queue (in submission order), and its jobs in the queue that
	// never started.
	offered   map[string][]*replayJob
	unstarted map[string]int
}

// withDefaults fills in the options' defaults.
func (opts ReplayOptions) withDefaults() ReplayOptions {
	if opts.HalfLife <= 0 {
		opts.HalfLife = time.Hour
	}
	if opts.PriceMicrosPerGPUHour <= 0 {
		opts.PriceMicrosPerGPUHour = 6_880_000
	}
	if opts.AdmissionPenalty == 0 {
		opts.AdmissionPenalty = 5 * time.Minute
	}
	opts.AdmissionPenalty = max(opts.AdmissionPenalty, 0)
	opts.IdlePenalty = max(opts.IdlePenalty, 0)
	if opts.Hysteresis <= 0 {
		opts.Hysteresis = admission.DefaultHysteresis // the controller's default
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
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Minute
	}
	if opts.EnergyPriceMicrosPerKWh <= 0 {
		opts.EnergyPriceMicrosPerKWh = 120_000
	}
	if opts.PUEMicros <= 0 {
		opts.PUEMicros = 1_300_000
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = time.Hour
	}
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !opts.Gating {
		opts.Preemption = false
	}
	return opts
}

// Replay runs the jobs through the admission core on the cluster
// TraceModel builds from the queues (as many nodes as their quotas add up
// to, all queues in one cohort that lends without limit) and measures the
// result. The same inputs give the same result.
func Replay(queues []TraceQueue, jobs []TraceJob, opts ReplayOptions) (ReplayResult, error) {
	opts = opts.withDefaults()
	if len(opts.Flavors) > 0 && !opts.Gating {
		return ReplayResult{}, fmt.Errorf("a heterogeneous replay (%d flavors) needs gating", len(opts.Flavors))
	}
	m, err := TraceModel(queues, TraceCluster{NodeSize: opts.NodeSize, CapacityScale: opts.CapacityScale, Flavors: opts.Flavors,
		PriceMicrosPerGPUHour: opts.PriceMicrosPerGPUHour, NodesPerRack: opts.NodesPerRack,
		EnergyPriceMicrosPerKWh: opts.EnergyPriceMicrosPerKWh, PUEMicros: opts.PUEMicros})
	if err != nil {
		return ReplayResult{}, err
	}
	return ReplayModel(m, jobs, opts)
}

// ReplayModel runs the jobs through the admission core on the model's
// cluster and measures the result; the options that shape a trace's
// cluster (NodeSize, CapacityScale, Flavors, PriceMicrosPerGPUHour,
// NodesPerRack) are the model's business and unused here. The model's
// devices record the pods' holds when the loop is closed.
func ReplayModel(m *Model, jobs []TraceJob, opts ReplayOptions) (ReplayResult, error) {
	r, err := newReplay(m, jobs, opts)
	if err != nil {
		return ReplayResult{}, err
	}
	if err := r.play(context.Background()); err != nil {
		return ReplayResult{}, err
	}
	return r.result(len(jobs)), nil
}

// newReplay sets up a replay of jobs on m.
func newReplay(m *Model, jobs []TraceJob, opts ReplayOptions) (*replay, error) {
	opts = opts.withDefaults()
	switch opts.PreemptionRules {
	case "":
		opts.PreemptionRules = "reclaim"
		if opts.Policy == "kueue" || opts.Policy == "costfair-drs" {
			opts.PreemptionRules = "kueue"
		}
	case "kueue", "reclaim":
	default:
		return nil, fmt.Errorf("preemption rules %q: want kueue or reclaim", opts.PreemptionRules)
	}
	switch opts.Order {
	case "":
		opts.Order = "fifo"
	case "fifo", "small-first":
	default:
		return nil, fmt.Errorf("order %q: want fifo or small-first", opts.Order)
	}
	r := &replay{opts: opts, model: m, queues: admission.NewQueues(opts.AgingAfter.Milliseconds()), usedSec: map[string]float64{}, usedCost: map[string]float64{},
		waits: map[string][]float64{}, maxWait: map[string]float64{}, jcts: map[string]float64{}, nextJain: opts.SampleEvery,
		names: m.queueNames()}
	if !opts.Gating {
		// Without gating the scheduler places pods on whatever node has
		// room: one resource of one flavor.
		if len(m.Rates) != 1 {
			return nil, fmt.Errorf("a heterogeneous replay (%d flavors and resources) needs gating", len(m.Rates))
		}
		for fr := range m.Rates {
			r.ungated = fr
		}
	}
	var err error
	if r.speeds, err = newSpeeds(m.flavors); err != nil {
		return nil, err
	}
	order := opts.Policy
	if r.viaWeights() {
		// Kueue orders; the controller's weights carry the money.
		order = "kueue-afs"
	}
	if r.policy, err = admission.NewPolicy(order, admission.PolicyParams{HalfLifeMs: opts.HalfLife.Milliseconds(),
		PenaltyMs: opts.AdmissionPenalty.Milliseconds(), Rates: m.Rates}); err != nil {
		return nil, err
	}
	r.snap = &admission.Snapshot{Queues: map[string]*admission.ClusterQueue{}, Usage: map[string]map[admission.FlavorResource]int64{},
		Share: map[string]float64{}, Nodes: slices.Clone(m.Nodes)}
	if opts.Preemption {
		r.snap.Running = map[string][]*admission.Running{}
	}
	for name, q := range m.Queues {
		cq := *q // the replay sets weights and preemption on its copy
		if opts.Preemption {
			cq.Preemption = admission.Preemption{WithinClusterQueue: admission.LowerPriority, ReclaimWithinCohort: admission.Any}
			if opts.Order == "small-first" {
				// The priorities order the queue; they must not make a
				// small job preempt a large one of its own queue.
				cq.Preemption.WithinClusterQueue = admission.Never
			}
		}
		if opts.Policy == "costfair" && !r.viaWeights() {
			// A team's weight is what its quota is worth: one entitled
			// to more may spend more before it waits behind others.
			cq.Weight = m.value[name] * 3600 / 1e6 // dollars per hour
		}
		r.snap.Queues[name] = &cq
		r.snap.Usage[name] = map[admission.FlavorResource]int64{}
	}
	r.nodeIdx = make(map[string]int, len(m.Nodes))
	for i, n := range m.Nodes {
		r.nodeIdx[n.Name] = i
	}
	if opts.Ledger != nil || opts.recordHolds {
		r.rec = &recorder{m: m, epoch: opts.Epoch}
	}
	if opts.Ledger != nil {
		if r.loop, err = newLoop(opts.Ledger, opts.Epoch, m, opts); err != nil {
			return nil, err
		}
	}
	r.jobs = make([]*replayJob, len(jobs))
	r.byID = make(map[string]*replayJob, len(jobs))
	for i, j := range jobs {
		if j.Resource == "" {
			j.Resource = config.ResourceGPU
		}
		if j.Pods <= 0 || j.PerPod <= 0 {
			j.Pods, j.PerPod = j.GPUs, 1
		}
		j.GPUs = j.Pods * j.PerPod
		prio := j.Priority
		if opts.Order == "small-first" {
			// The trace's priority first, then fewer GPUs.
			prio = j.Priority<<12 - int32(min(j.GPUs, 1<<12-1))
		}
		r.jobs[i] = &replayJob{TraceJob: j, queuePriority: prio, w: admission.Workload{ID: j.ID, Queue: j.Queue, Resource: j.Resource, Pods: j.Pods,
			PerPod: int64(j.PerPod), Priority: prio, SubmittedMs: j.Submit.Milliseconds(), Flavors: j.Flavors}}
		r.byID[j.ID] = r.jobs[i]
		r.window = max(r.window, j.Submit)
	}
	if opts.MaxPending > 0 {
		r.offered, r.unstarted = map[string][]*replayJob{}, map[string]int{}
	}
	r.decayed = admission.NewDecayed(opts.HalfLife.Milliseconds())
	r.penalties = admission.NewDecayed(opts.HalfLife.Milliseconds())
	if r.viaWeights() {
		r.consumed = admission.NewDecayed(opts.HalfLife.Milliseconds())
	}
	return r, nil
}

// play replays until every job has finished, or until the limit.
func (r *replay) play(ctx context.Context) error {
	opts := r.opts
	next := 0
	for {
		// Next event: a submission, a completion, a ready timeout or a
		// requeue.
		t := time.Duration(math.MaxInt64)
		if next < len(r.jobs) {
			t = r.jobs[next].Submit
		}
		for len(r.run) > 0 && r.run[0].cancelled {
			heap.Pop(&r.run)
		}
		if len(r.run) > 0 && r.run[0].end < t {
			t = r.run[0].end
		}
		if opts.ReadyTimeout > 0 {
			for _, p := range r.partial {
				t = min(t, p.admittedAt+opts.ReadyTimeout)
			}
		}
		if at, ok := r.queues.NextWake(); ok {
			t = min(t, time.Duration(at)*time.Millisecond)
		}
		if r.canRelease() {
			t = r.now
		}
		if t == time.Duration(math.MaxInt64) || (opts.Limit > 0 && t > opts.Limit) {
			break
		}
		r.advance(t)
		if r.loop != nil {
			wrote, err := r.loop.advance(ctx, r.now)
			if err != nil {
				return fmt.Errorf("closed loop: %w", err)
			}
			if wrote && opts.Policy == "costfair" {
				spent, err := r.loop.shares(ctx, r.now, opts.HalfLife)
				if err != nil {
					return err
				}
				r.snap.Share = r.penalties.Shares(r.snap.Queues)
				for q, v := range spent {
					if cq := r.snap.Queues[q]; cq != nil {
						r.snap.Share[q] += v / cq.Weight
					}
				}
			}
		}
		r.finish()
		for next < len(r.jobs) && r.jobs[next].Submit <= r.now {
			r.submit(r.jobs[next])
			next++
		}
		r.releaseOffered()
		r.queues.Wake(r.now.Milliseconds())
		r.progressPartial()
		if r.queues.Len() == 0 {
			continue
		}
		r.cycle()
	}
	if r.loop != nil {
		// The hours up to the end go to the ledger too.
		end := r.now.Truncate(time.Hour) + time.Hour
		if _, err := r.loop.advance(ctx, end); err != nil {
			return fmt.Errorf("closed loop: %w", err)
		}
	}
	return nil
}

// advance moves the clock to t, accounting for the time in between.
func (r *replay) advance(t time.Duration) {
	// Hourly fairness samples between the events: the state is constant.
	for ; r.nextJain <= t; r.nextJain += r.opts.SampleEvery {
		r.sampleJain()
	}
	dt := (t - r.now).Seconds()
	if dt > 0 {
		r.busySec += float64(r.busyGPUs) * dt
		if in := min(t, r.window) - r.now; in > 0 {
			r.busyWindowSec += float64(r.busyGPUs) * in.Seconds()
		}
		r.heldSec += float64(r.heldGPUs) * dt
		// Idle GPU time is paid for while other queues wait.
		backlogged := 0
		for _, q := range r.names {
			if r.queues.In(q) > 0 {
				backlogged++
			}
		}
		othersWait := func(q string) bool {
			if r.queues.In(q) > 0 {
				return backlogged > 1
			}
			return backlogged > 0
		}
		for _, run := range r.run {
			if run.cancelled {
				continue
			}
			j := run.job
			g := float64(j.GPUs) * dt
			cost := g * j.rate
			r.usedSec[j.Queue] += g
			r.usedCost[j.Queue] += cost
			if j.Idle > 0 && othersWait(j.Queue) {
				r.idlePaidSec += g * j.Idle
			}
			switch r.opts.Policy {
			case "kueue-afs":
				r.decayed.Add(j.Queue, g)
			case "costfair":
				spent := cost * (1 + r.opts.IdlePenalty*j.Idle)
				r.decayed.Add(j.Queue, spent)
				r.settle(j.Queue, t, spent)
				if r.consumed != nil {
					r.consumed.Add(j.Queue, g)
				}
			case "costfair-drs":
				r.decayed.Add(j.Queue, cost)
			}
		}
		for _, p := range r.partial {
			g := float64(p.held) * dt
			if othersWait(p.Queue) {
				r.idlePaidSec += g
			}
			switch r.opts.Policy {
			case "kueue-afs":
				r.decayed.Add(p.Queue, g)
			case "costfair":
				// Held, idle GPUs of a partial gang cost the queue and
				// are penalised.
				spent := g * r.model.Rates[r.ungated] * (1 + r.opts.IdlePenalty)
				r.decayed.Add(p.Queue, spent)
				r.settle(p.Queue, t, spent)
				if r.consumed != nil {
					r.consumed.Add(p.Queue, g)
				}
			case "costfair-drs":
				r.decayed.Add(p.Queue, g*r.model.Rates[r.ungated])
			}
		}
	}
	r.now = t
	r.decayed.Advance(t.Milliseconds() + 1)
	if r.consumed != nil {
		r.consumed.Advance(t.Milliseconds() + 1)
	}
	r.penalties.Advance(t.Milliseconds() + 1)
}

// finish ends the runs that are done.
func (r *replay) finish() {
	for len(r.run) > 0 && r.run[0].end <= r.now {
		run := heap.Pop(&r.run).(*replayRun)
		if run.cancelled {
			continue
		}
		j := run.job
		if j.running != nil {
			r.snap.Release(j.running)
			j.running = nil
		} else {
			for _, i := range run.nodes {
				r.snap.Nodes[i].Free += j.w.PerPod
			}
			r.snap.Usage[j.Queue][j.fr] -= int64(j.GPUs)
		}
		r.busyGPUs -= j.GPUs
		r.release(j)
		r.jcts[j.ID] = (r.now - j.Submit).Seconds()
		c := j.Class
		if c == "" {
			c = sizeClass(j.GPUs)
		}
		wait := (j.start - j.Submit).Seconds()
		r.waits[c] = append(r.waits[c], wait)
		r.maxWait[j.Queue] = max(r.maxWait[j.Queue], wait)
	}
}

// release ends the telemetry holds of j's pods.
func (r *replay) release(j *replayJob) {
	if r.rec != nil {
		r.rec.release(j.holds, r.now)
		j.holds, j.pods = j.holds[:0], 0
	}
}

// hold starts telemetry holds for j's pods on nodes (one entry per pod).
func (r *replay) hold(j *replayJob, nodes []int, waiting bool) {
	if r.rec != nil {
		for _, n := range nodes {
			j.holds = append(j.holds, r.rec.hold(j, n, int(j.w.PerPod), r.now, waiting)...)
		}
	}
}

func (r *replay) start(j *replayJob, nodes []int) {
	if r.unstarted != nil && !j.started {
		r.unstarted[j.Queue]--
	}
	j.started = true
	j.start = r.now
	j.w.Priority = j.TraceJob.Priority
	j.run = &replayRun{end: r.now + r.speeds.runTime(j.TraceJob, j.fr.Flavor), job: j, nodes: nodes}
	heap.Push(&r.run, j.run)
	r.busyGPUs += j.GPUs
	r.hold(j, nodes, false)
}
