package admission

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// PreemptionPolicy is a value of Kueue's withinClusterQueue or
// reclaimWithinCohort.
type PreemptionPolicy string

// Preemption policies of ClusterQueue.Preemption, with Kueue's meaning.
const (
	Never PreemptionPolicy = "Never"
	// LowerPriority (withinClusterQueue, reclaimWithinCohort): only
	// workloads of lower priority than the preemptor.
	LowerPriority PreemptionPolicy = "LowerPriority"
	// LowerOrNewerEqualPriority (withinClusterQueue): lower priority, or
	// equal priority and submitted after the preemptor.
	LowerOrNewerEqualPriority PreemptionPolicy = "LowerOrNewerEqualPriority"
	// Any (reclaimWithinCohort): any workload of a queue that borrows.
	Any PreemptionPolicy = "Any"
)

// FairSharingStrategy is one of Kueue's fairSharing.preemptionStrategies.
type FairSharingStrategy string

// Fair-sharing preemption strategies, with Kueue's meaning.
const (
	// LessThanOrEqualToFinalShare preempts a workload of queue X only if the
	// preemptor's queue, with the preemptor admitted, has a share no larger
	// than X's without the workload.
	LessThanOrEqualToFinalShare FairSharingStrategy = "LessThanOrEqualToFinalShare"
	// LessThanInitialShare preempts a workload of queue X only if the
	// preemptor's queue, with the preemptor admitted, has a share below X's
	// as it is.
	LessThanInitialShare FairSharingStrategy = "LessThanInitialShare"
)

// Preemption is a ClusterQueue's preemption policy (Kueue's
// spec.preemption). The zero value never preempts.
type Preemption struct {
	// WithinClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
	WithinClusterQueue PreemptionPolicy
	// ReclaimWithinCohort: Never, LowerPriority or Any. Without fair-sharing
	// strategies a queue reclaims only quota it is owed: the preemptor must
	// fit within its queue's nominal quota.
	ReclaimWithinCohort PreemptionPolicy
}

func (p Preemption) enabled() bool {
	return (p.WithinClusterQueue != "" && p.WithinClusterQueue != Never) ||
		(p.ReclaimWithinCohort != "" && p.ReclaimWithinCohort != Never)
}

// Running is an admitted workload: what it holds and since when, so that
// preemption can pick it.
type Running struct {
	Workload *Workload
	Flavor   string
	// Nodes has one node name per pod.
	Nodes   []string
	StartMs int64
}

// Preempted is a workload a decision evicted, and why.
type Preempted struct {
	Running *Running
	Reason  string
}

// PreemptionSharer is a policy whose queue value fair-sharing preemption
// compares: the preemptor's queue with delta more units of fr against a
// victim's queue with fewer.
type PreemptionSharer interface {
	PreemptionShare(s *Snapshot, queue string, fr FlavorResource, delta int64) float64
}

// kueueVictimOrder is Kueue's order of preemption candidates: lower
// priority first, then the most recently started. It is also the order
// that wastes least: on one flavor every candidate frees its GPUs at the
// same price, and the newest has thrown away the least work per GPU.
// (Ordering by whole sunk cost, units × time run, was tried: it picks
// small jobs first, a preemptor then needs more of them, and on the
// Philly trace preemptions nearly doubled.)
func kueueVictimOrder(a, b *Running) int {
	if c := cmp.Compare(a.Workload.Priority, b.Workload.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(b.StartMs, a.StartMs); c != 0 {
		return c
	}
	return cmp.Compare(a.Workload.ID, b.Workload.ID)
}

// PreemptionShare is the dominant resource share with delta units more of
// fr in queue's usage.
func (KueueFairSharing) PreemptionShare(s *Snapshot, queue string, fr FlavorResource, delta int64) float64 {
	return s.dominantShare(queue, fr, delta)
}

// PreemptionShare is the queue's decayed value plus what it holds, with
// delta units more of fr, each held unit counted at the value it adds if
// held for good (Rate × half-life / ln 2), over the queue's weight. A queue
// that holds little and has spent little has the lowest share.
func (p ShareOrder) PreemptionShare(s *Snapshot, queue string, fr FlavorResource, delta int64) float64 {
	q := s.Queues[queue]
	if q == nil {
		return 0
	}
	steady := float64(p.HalfLifeMs) / 1000 / math.Ln2
	var held float64
	for f, n := range s.Usage[queue] {
		held += float64(n) * p.rate(f) * steady
	}
	held += float64(delta) * p.rate(fr) * steady
	return s.Share[queue] + held/weight(q)
}

func (p ShareOrder) rate(fr FlavorResource) float64 {
	if r, ok := p.Rate[fr]; ok {
		return r
	}
	return p.DefaultRate
}

func weight(q *ClusterQueue) float64 {
	if q.Weight <= 0 {
		return 1
	}
	return q.Weight
}

// preempt looks for running workloads whose eviction lets w into queue q
// on flavor f, evicts them from the snapshot and returns them; or returns
// why it found none, leaving the snapshot as it was.
func (s *Snapshot) preempt(q *ClusterQueue, w *Workload, f string, opts Options) ([]Preempted, string) {
	fr := FlavorResource{f, w.Resource}
	quota, ok := q.Quotas[fr]
	if !ok {
		return nil, "no quota"
	}
	pol := q.Preemption
	sharer, fair := opts.Policy.(PreemptionSharer)
	fair = fair && len(opts.FairSharing) > 0
	within := func(r *Running) bool {
		switch pol.WithinClusterQueue {
		case LowerPriority:
			return r.Workload.Priority < w.Priority
		case LowerOrNewerEqualPriority:
			return r.Workload.Priority < w.Priority || (r.Workload.Priority == w.Priority && compareFIFO(w, r.Workload) < 0)
		}
		return false
	}
	reclaim := pol.ReclaimWithinCohort == Any || pol.ReclaimWithinCohort == LowerPriority
	// Without fair sharing, a queue reclaims only what it is owed.
	if !fair && s.Usage[q.Name][fr]+w.Units() > quota.Nominal {
		reclaim = false
	}
	cands := map[string][]*Running{}
	for name, rs := range s.Running {
		o := s.Queues[name]
		if o == nil {
			continue
		}
		for _, r := range rs {
			if r.Flavor != f || r.Workload.Resource != w.Resource || s.thisCycle[r] {
				continue
			}
			switch {
			case o == q:
				if !within(r) {
					continue
				}
			case reclaim && q.Cohort != "" && o.Cohort == q.Cohort:
				if pol.ReclaimWithinCohort == LowerPriority && r.Workload.Priority >= w.Priority {
					continue
				}
				if s.Usage[name][fr] <= o.Quotas[fr].Nominal {
					continue // not borrowing: nothing to reclaim
				}
			default:
				continue
			}
			cands[name] = append(cands[name], r)
		}
	}
	if len(cands) == 0 {
		return nil, "no workload may be preempted for it"
	}
	for _, rs := range cands {
		slices.SortFunc(rs, kueueVictimOrder)
	}
	if !fair {
		return s.preemptClassic(q, w, fr, cands, opts)
	}
	var why string
	for _, strategy := range opts.FairSharing {
		victims, reason := s.preemptFair(q, w, fr, cands, strategy, sharer, opts)
		if victims != nil {
			return victims, ""
		}
		why = reason
	}
	return nil, why
}

// fitsAfter says whether w fits quota and capacity in the snapshot as it
// stands (with candidate victims already taken out).
func (s *Snapshot) fitsAfter(q *ClusterQueue, w *Workload, fr FlavorResource, opts Options) bool {
	if s.fitsQuota(q, fr, w.Units()).Code != "" || s.freeFor(fr) < w.Units() {
		return false
	}
	_, code, _ := s.pick(fr.Flavor, w, opts)
	return code == ""
}

// evict takes r out of the snapshot: its usage, its nodes, its entry.
func (s *Snapshot) evict(r *Running) {
	fr := FlavorResource{r.Flavor, r.Workload.Resource}
	s.Usage[r.Workload.Queue][fr] -= r.Workload.Units()
	units := r.Workload.podUnits()
	for k, n := range r.Nodes {
		s.takeFree(s.nodeIdx[n], -units[k])
	}
	rs := s.Running[r.Workload.Queue]
	if i := slices.Index(rs, r); i >= 0 {
		s.Running[r.Workload.Queue] = slices.Delete(rs, i, i+1)
	}
}

// restore puts an evicted r back.
func (s *Snapshot) restore(r *Running) {
	fr := FlavorResource{r.Flavor, r.Workload.Resource}
	s.Usage[r.Workload.Queue][fr] += r.Workload.Units()
	units := r.Workload.podUnits()
	for k, n := range r.Nodes {
		s.takeFree(s.nodeIdx[n], units[k])
	}
	s.Running[r.Workload.Queue] = append(s.Running[r.Workload.Queue], r)
}

// preemptClassic is Kueue's preemption without fair sharing: candidates of
// other queues (borrowing ones) before the queue's own, each in victim
// order; take them out until w fits, then put back every one w does not
// need, last taken first.
func (s *Snapshot) preemptClassic(q *ClusterQueue, w *Workload, fr FlavorResource, cands map[string][]*Running, opts Options) ([]Preempted, string) {
	var list []*Running
	names := make([]string, 0, len(cands))
	for name := range cands {
		if name != q.Name {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		list = append(list, cands[name]...)
	}
	own := len(list)
	list = append(list, cands[q.Name]...)
	// Other queues' candidates in one victim order across queues.
	slices.SortStableFunc(list[:own], kueueVictimOrder)
	var taken []*Running
	fits := false
	for _, r := range list {
		o := s.Queues[r.Workload.Queue]
		if o != q && s.Usage[o.Name][fr] <= o.Quotas[fr].Nominal {
			continue // no longer borrowing
		}
		s.evict(r)
		taken = append(taken, r)
		if s.fitsAfter(q, w, fr, opts) {
			fits = true
			break
		}
	}
	if !fits {
		for _, r := range slices.Backward(taken) {
			s.restore(r)
		}
		return nil, fmt.Sprintf("preempting every candidate (%d) would not make room", len(taken))
	}
	var kept []*Running
	for i := len(taken) - 2; i >= 0; i-- {
		s.restore(taken[i])
		if s.fitsAfter(q, w, fr, opts) {
			continue
		}
		s.evict(taken[i])
		kept = append(kept, taken[i])
	}
	kept = append(kept, taken[len(taken)-1])
	out := make([]Preempted, len(kept))
	for i, r := range kept {
		why := "reclaimed by ClusterQueue " + q.Name + " within its nominal quota"
		if r.Workload.Queue == q.Name {
			why = "preempted within ClusterQueue " + q.Name + " by higher-priority " + w.ID
		}
		out[i] = Preempted{Running: r, Reason: why + " (for " + w.ID + ")"}
	}
	return out, ""
}

// preemptFair is Kueue's fair-sharing preemption with one strategy: take
// candidates from the queue with the largest share first, while the
// strategy allows; the preemptor's own queue gives up lower-priority
// workloads as its withinClusterQueue policy says.
func (s *Snapshot) preemptFair(q *ClusterQueue, w *Workload, fr FlavorResource, cands map[string][]*Running, strategy FairSharingStrategy, sharer PreemptionSharer, opts Options) ([]Preempted, string) {
	next := map[string]int{}
	var taken []Preempted
	undo := func() {
		for _, p := range slices.Backward(taken) {
			s.restore(p.Running)
		}
	}
	mine := sharer.PreemptionShare(s, q.Name, fr, w.Units())
	for {
		if len(taken) > 0 && s.fitsAfter(q, w, fr, opts) {
			return taken, ""
		}
		// The candidate queue with the largest share.
		best, bestShare := "", math.Inf(-1)
		for name, rs := range cands {
			if next[name] >= len(rs) {
				continue
			}
			sh := sharer.PreemptionShare(s, name, fr, 0)
			if best == "" || sh > bestShare || (sh == bestShare && name < best) {
				best, bestShare = name, sh
			}
		}
		if best == "" {
			undo()
			return nil, fmt.Sprintf("%s: no queue with a larger share has a workload to give up", strategy)
		}
		r := cands[best][next[best]]
		next[best]++
		if best == q.Name {
			s.evict(r)
			taken = append(taken, Preempted{Running: r, Reason: fmt.Sprintf("preempted within ClusterQueue %s by higher-priority %s", q.Name, w.ID)})
			continue
		}
		o := s.Queues[best]
		if s.Usage[best][fr] <= o.Quotas[fr].Nominal {
			next[best] = len(cands[best]) // no longer borrowing
			continue
		}
		var ok bool
		var after float64
		switch strategy {
		case LessThanOrEqualToFinalShare:
			after = sharer.PreemptionShare(s, best, fr, -r.Workload.Units())
			ok = mine <= after
		case LessThanInitialShare:
			after = bestShare
			ok = mine < after
		default:
			undo()
			return nil, fmt.Sprintf("unknown fair-sharing preemption strategy %q", strategy)
		}
		if !ok {
			next[best] = len(cands[best])
			continue
		}
		s.evict(r)
		taken = append(taken, Preempted{Running: r, Reason: fmt.Sprintf("preempted by %s of ClusterQueue %s (%s: its share with the workload %.4g vs %.4g)",
			w.ID, q.Name, strategy, mine, after)})
	}
}
