// Package admission decides which pending workloads start, in Kueue's model:
// ClusterQueues in cohorts with per-flavor nominal quotas, borrowing limits and
// lending limits; flavors tried in a queue's order; a policy that orders the
// pending workloads (FIFO, Kueue's fair sharing, cost-weighted fair share);
// and gangs admitted all at once or not at all, optionally inside one
// topology domain; and preemption within a queue by priority, to reclaim
// nominal quota from borrowers, or by Kueue's fair-sharing strategies. The
// core is pure: a snapshot goes in, decisions with reasons come out (why a
// workload waits, which workloads it evicts and why). It does not run
// workloads or keep time; callers (sim, a Kueue adapter) do.
package admission

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// FlavorResource names one quota: a resource (nvidia.com/gpu) of a flavor.
type FlavorResource struct {
	Flavor, Resource string
}

// Quota has Kueue's meaning. A negative BorrowingLimit means no limit; a
// negative LendingLimit means all of the nominal quota may be lent.
type Quota struct {
	Nominal        int64
	BorrowingLimit int64
	LendingLimit   int64
}

// ClusterQueue is a queue with quotas.
type ClusterQueue struct {
	Name string
	// Cohort groups queues that borrow from each other; empty for none.
	Cohort string
	// Team pays for the queue; Weight scales its fair share (default 1).
	Team   string
	Weight float64
	// Flavors are tried in this order.
	Flavors []string
	Quotas  map[FlavorResource]Quota
	// StrictFIFO stops at the first pending workload that does not fit;
	// otherwise (BestEffortFIFO) later ones may go ahead.
	StrictFIFO bool
	// Preemption says which running workloads the queue's pending ones may
	// evict.
	Preemption Preemption
}

// Workload is a gang: all of its pods or none. Its pods are PodSets (a
// launcher and its workers, say) or, without PodSets, Pods pods of PerPod
// units of Resource each.
type Workload struct {
	ID       string
	Queue    string // ClusterQueue
	Resource string
	Pods     int
	PerPod   int64
	PodSets  []PodSet
	// Priority goes before submission time: higher first.
	Priority int32
	// SubmittedMs orders FIFO; ties break on ID.
	SubmittedMs int64
	// Flavors, when set, are the only flavors its pods may run on (their
	// node selector or required node affinity on the flavors' node
	// labels, which Kueue matches when it assigns a flavor); empty: any.
	Flavors []string
}

// allows says whether the workload's pods may run on flavor f.
func (w *Workload) allows(f string) bool {
	return len(w.Flavors) == 0 || slices.Contains(w.Flavors, f)
}

// PodSet is a group of identical pods of a workload (Kueue's PodSet).
type PodSet struct {
	Name   string
	Count  int
	PerPod int64
}

// Sets returns the workload's PodSets: PodSets, or one of Pods × PerPod.
func (w *Workload) Sets() []PodSet {
	if len(w.PodSets) > 0 {
		return w.PodSets
	}
	return []PodSet{{Name: "main", Count: w.Pods, PerPod: w.PerPod}}
}

// Units returns what the workload asks for in all.
func (w *Workload) Units() int64 {
	if len(w.PodSets) == 0 {
		return int64(w.Pods) * w.PerPod
	}
	var n int64
	for _, ps := range w.PodSets {
		n += int64(ps.Count) * ps.PerPod
	}
	return n
}

// podUnits lists what each pod asks for, PodSet by PodSet: the order of
// Decision.Nodes and Running.Nodes.
func (w *Workload) podUnits() []int64 {
	var out []int64
	for _, ps := range w.Sets() {
		for range ps.Count {
			out = append(out, ps.PerPod)
		}
	}
	return out
}

// describe says what the pods are: "2 pods of 4" or "1 pod of 1 + 2 pods of 4".
func (w *Workload) describe() string {
	var parts []string
	for _, ps := range w.Sets() {
		noun := "pods"
		if ps.Count == 1 {
			noun = "pod"
		}
		parts = append(parts, fmt.Sprintf("%d %s of %d", ps.Count, noun, ps.PerPod))
	}
	return strings.Join(parts, " + ")
}

// Node is free capacity on one node.
type Node struct {
	Name, Flavor string
	// Resource is what its Free units are (nvidia.com/gpu, or one MIG
	// profile's nvidia.com/mig-<profile>: a MIG node is one Node per
	// profile, each with its own Name); empty: any resource.
	Resource string
	// Domain is the topology domain (rack, InfiniBand block).
	Domain string
	Free   int64
}

// takes says whether the node's units are of resource r.
func (n *Node) takes(r string) bool { return n.Resource == "" || n.Resource == r }

// Snapshot is the state a scheduling cycle decides on. Admit updates Usage
// and Nodes as it admits.
type Snapshot struct {
	Queues map[string]*ClusterQueue
	// Usage is what admitted workloads hold, per queue.
	Usage map[string]map[FlavorResource]int64
	Nodes []Node
	// Share is each queue's fair-sharing value for the policies that read
	// one (decayed usage in resource units or in money, over weight); lower
	// goes first.
	Share map[string]float64
	// Running holds the admitted workloads per queue, for preemption. A
	// nil map turns tracking off; otherwise Admit adds what it admits and
	// the caller calls Release when a workload ends.
	Running map[string][]*Running
	// NowMs is the time of the cycle (victim order by time run).
	NowMs int64

	freeBy  map[FlavorResource]int64 // during Admit, by node flavor and resource
	nodeIdx map[string]int
	// admitted in this cycle: never preempted in it (no churn)
	thisCycle map[*Running]bool
}

// Release ends a running workload: it gives back its quota and nodes.
func (s *Snapshot) Release(r *Running) {
	s.indexNodes()
	s.evict(r)
}

func (s *Snapshot) indexNodes() {
	if len(s.nodeIdx) == len(s.Nodes) {
		return
	}
	s.nodeIdx = make(map[string]int, len(s.Nodes))
	for i, n := range s.Nodes {
		s.nodeIdx[n.Name] = i
	}
}

// Decision says what happened to one pending workload.
type Decision struct {
	Workload *Workload
	Admitted bool
	Flavor   string
	// Nodes has one node name per pod, when admitted.
	Nodes []string
	// Reason says why a workload waits, for people; Code classifies it
	// for programs (the first flavor's, when several were tried).
	Reason string
	Code   WaitCode
	// Running is the admitted workload, when the snapshot tracks them.
	Running *Running
	// Preempted are the workloads evicted to admit this one; the caller
	// stops them and requeues them.
	Preempted []Preempted
}

// WaitCode classifies why a workload was not admitted.
type WaitCode string

// Why a workload waits.
const (
	WaitNoClusterQueue WaitCode = "NoClusterQueue"
	// The queue has no quota for the workload's resource on any flavor.
	WaitNoQuota WaitCode = "NoQuotaForResource"
	// Over nominal quota in a queue without a cohort.
	WaitNominalQuota   WaitCode = "OverNominalQuota"
	WaitBorrowingLimit WaitCode = "OverBorrowingLimit"
	// Within the queue's nominal quota, but the cohort has lent it out.
	WaitQuotaLent WaitCode = "NominalQuotaLentOut"
	// It would borrow more than the cohort has free.
	WaitCohortQuota WaitCode = "CohortQuotaExhausted"
	// Quota fits; the GPUs are not free (or not in one domain).
	WaitCapacity   WaitCode = "NotEnoughCapacity"
	WaitTopology   WaitCode = "NoTopologyDomain"
	WaitStrictFIFO WaitCode = "BehindStrictFIFO"
	// The cycle ran out of free capacity before reaching it.
	WaitCycleFull WaitCode = "CycleOutOfCapacity"
	// The queue holds its money-fair share of every flavor that would
	// fit while a queue under its share waits for it (Options.Targets).
	WaitTarget WaitCode = "AtMoneyFairShare"
)

// Options tunes a cycle.
type Options struct {
	// SameDomain places all of a gang's pods in one topology domain.
	SameDomain bool
	// Policy is consulted by preemption: fair-sharing strategies compare
	// its shares (PreemptionSharer).
	Policy Policy
	// FairSharing lists fair-sharing preemption strategies, tried in
	// order (Kueue's default: LessThanOrEqualToFinalShare, then
	// LessThanInitialShare). Empty: classic preemption.
	FairSharing []FairSharingStrategy
	// Terse leaves Decision.Reason of a waiting workload empty (its Code
	// is set): for a simulator that runs millions of cycles and reads
	// only the codes; a controller wants the reasons people read.
	Terse bool
	// Targets, when set, keeps each queue to its share of every flavor
	// in a money-fair split (MoneyTargets.Allows): a workload whose first
	// fitting flavor (the one Kueue would assign) its queue holds its
	// target of waits while a backlogged queue under its target could use
	// that flavor. It does not go on to the next flavor: Kueue chooses the
	// flavor, and gpuledger's AdmissionCheck can only hold the workload.
	Targets *MoneyTargets
}

// Policy orders the pending workloads of a cycle; the first that fits is
// admitted first.
type Policy interface {
	Name() string
	Order(s *Snapshot, pending []*Workload)
}

// Admit runs one scheduling cycle: it orders pending by the policy, then
// admits each workload that fits its queue's quota (borrowing within the
// cohort's rules) and the free capacity, all of its pods at once. A workload
// that does not fit gets a reason and stays pending.
func Admit(s *Snapshot, p Policy, pending []*Workload, opts Options) []Decision {
	order := slices.Clone(pending)
	p.Order(s, order)
	if opts.Policy == nil {
		opts.Policy = p
	}
	list := &sliceQueue{order: order, dropped: map[string]bool{}}
	out := AdmitInOrder(s, list, opts)
	// What AdmitInOrder did not reach waits for capacity.
	seen := make(map[*Workload]bool, len(out))
	for _, d := range out {
		seen[d.Workload] = true
	}
	for _, w := range order {
		if !seen[w] {
			out = append(out, Decision{Workload: w, Reason: "no free capacity left in this cycle", Code: WaitCycleFull})
		}
	}
	return out
}

// Pending yields pending workloads in the order a policy admits them.
type Pending interface {
	// Next returns the next workload, or nil at the end.
	Next() *Workload
	// Drop passes over the rest of a queue's workloads in this cycle.
	Drop(queue string)
}

type sliceQueue struct {
	order   []*Workload
	i       int
	dropped map[string]bool
}

func (l *sliceQueue) Next() *Workload {
	for l.i < len(l.order) {
		w := l.order[l.i]
		l.i++
		if !l.dropped[w.Queue] {
			return w
		}
	}
	return nil
}

func (l *sliceQueue) Drop(queue string) { l.dropped[queue] = true }

// AdmitInOrder is Admit with the order given as a stream: it takes workloads
// from pending until it ends or no flavor has free capacity left (and no
// queue may preempt), and returns a decision for each workload it took.
// Large backlogs need not be sorted whole: a caller that keeps pending
// workloads per queue in FIFO order can stream them in policy order.
//
// A workload that does not fit may preempt, as its queue's Preemption
// allows, one per queue and cycle (Kueue preempts for a queue's head); once
// no capacity is free, the queues that have tried are passed over for the
// rest of the cycle.
func AdmitInOrder(s *Snapshot, pending Pending, opts Options) []Decision {
	s.indexNodes()
	// Free capacity per flavor and resource, kept current as workloads
	// are admitted: a workload larger than it is refused without a
	// placement search.
	s.freeBy = make(map[FlavorResource]int64)
	var free int64
	for _, n := range s.Nodes {
		s.freeBy[FlavorResource{n.Flavor, n.Resource}] += n.Free
		free += n.Free
	}
	preempting := false
	if s.Running != nil {
		for _, q := range s.Queues {
			if q.Preemption.enabled() {
				preempting = true
				break
			}
		}
	}
	s.thisCycle = make(map[*Running]bool)
	blocked := make(map[string]bool) // StrictFIFO queues whose head did not fit
	failed := make(map[string]bool)  // queues that have tried to preempt
	var out []Decision
	for free > 0 || preempting {
		w := pending.Next()
		if w == nil {
			break
		}
		d := Decision{Workload: w}
		q := s.Queues[w.Queue]
		switch {
		case q == nil:
			d.Reason, d.Code = fmt.Sprintf("ClusterQueue %q does not exist", w.Queue), WaitNoClusterQueue
		case blocked[w.Queue]:
			d.Reason, d.Code = "behind an older workload of its StrictFIFO queue", WaitStrictFIFO
		case free <= 0 && (failed[w.Queue] || !q.Preemption.enabled()):
			pending.Drop(w.Queue)
			d.Reason, d.Code = "no free capacity left in this cycle", WaitCycleFull
		default:
			d.Reason, d.Code = s.tryAdmit(q, w, opts, &d)
			if !d.Admitted && s.Running != nil && q.Preemption.enabled() && !failed[w.Queue] {
				// As in Kueue, a queue preempts for one workload (its head)
				// per cycle: the next waits for the next cycle.
				failed[w.Queue] = true
				if why := s.tryPreempt(q, w, opts, &d); why != "" {
					d.Reason += "; " + why
				} else {
					for _, p := range d.Preempted {
						free += p.Running.Workload.Units()
					}
				}
			}
			if !d.Admitted && q.StrictFIFO {
				blocked[w.Queue] = true
			}
			if d.Admitted {
				free -= w.Units()
				if pen, ok := opts.Policy.(AdmissionPenalizer); ok && s.Share != nil {
					s.Share[w.Queue] += pen.Penalty(s, w, d.Flavor) / weight(q)
				}
				if st, ok := pending.(*streamer); ok {
					st.admitted(w.Queue)
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// tryPreempt admits w by preempting, on the first of its queue's flavors
// where that works; or says why it could not.
func (s *Snapshot) tryPreempt(q *ClusterQueue, w *Workload, opts Options, d *Decision) string {
	var reasons []string
	for _, f := range q.Flavors {
		if _, ok := q.Quotas[FlavorResource{f, w.Resource}]; !ok || !w.allows(f) {
			continue
		}
		victims, why := s.preempt(q, w, f, opts)
		if victims == nil {
			reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, why))
			continue
		}
		nodes, code, why := s.pick(f, w, opts)
		if code != "" { // preempt checked placement: cannot happen
			for _, p := range slices.Backward(victims) {
				s.restore(p.Running)
			}
			reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, why))
			continue
		}
		s.admit(q, w, f, nodes, d)
		d.Preempted = victims
		d.Reason, d.Code = "", ""
		return ""
	}
	return "preemption: " + strings.Join(reasons, "; ")
}

func (s *Snapshot) tryAdmit(q *ClusterQueue, w *Workload, opts Options, d *Decision) (string, WaitCode) {
	var reasons []string
	var code WaitCode
	tried, excluded := false, false
	note := func(c WaitCode) {
		if code == "" {
			code = c
		}
	}
	for _, f := range q.Flavors {
		fr := FlavorResource{f, w.Resource}
		if _, ok := q.Quotas[fr]; !ok {
			continue
		}
		if !w.allows(f) {
			excluded = true
			if !opts.Terse {
				reasons = append(reasons, fmt.Sprintf("flavor %s: the pods' node selector excludes it", f))
			}
			continue
		}
		tried = true
		if qw := s.fitsQuota(q, fr, w.Units()); qw.Code != "" {
			note(qw.Code)
			if !opts.Terse {
				reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, qw))
			}
			continue
		}
		if free := s.freeFor(fr); free < w.Units() {
			note(WaitCapacity)
			if !opts.Terse {
				reasons = append(reasons, fmt.Sprintf("flavor %s: not enough free capacity for %s (%d free)", f, w.describe(), free))
			}
			continue
		}
		nodes, c, why := s.pick(f, w, opts)
		if c != "" {
			note(c)
			if !opts.Terse {
				reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, why))
			}
			continue
		}
		if opts.Targets != nil && !opts.Targets.Allows(s, w.Queue, f, float64(w.Units())*opts.Targets.Rate[fr]) {
			// Kueue assigns this flavor; the controller's check holds
			// the workload rather than choose another.
			if opts.Terse {
				return "", WaitTarget
			}
			return fmt.Sprintf("flavor %s: queue %s holds its money-fair share of it while a queue under its share waits for it", f, q.Name), WaitTarget
		}
		s.admit(q, w, f, nodes, d)
		return "", ""
	}
	if !tried && excluded {
		return fmt.Sprintf("the pods' node selector allows flavors %v, none of which ClusterQueue %s has quota of %s in", w.Flavors, q.Name, w.Resource), WaitNoQuota
	}
	if !tried {
		return fmt.Sprintf("ClusterQueue %s has no quota for %s", q.Name, w.Resource), WaitNoQuota
	}
	if opts.Terse {
		return "", code
	}
	return fmt.Sprint(reasons), code
}

// fitsQuota applies Kueue's quota rules (its resource tree with one cohort
// level): the part of a queue's nominal quota it may not lend (nominal −
// lending limit) is its own; the rest of every queue's nominal quota forms
// the cohort's pool, which serves any queue of the cohort, its owner
// included, up to the borrowing limit. A queue under its nominal quota may
// therefore still not admit while others borrow what it lent: it has to
// wait for them, or reclaim by preemption, as in Kueue.
func (s *Snapshot) fitsQuota(q *ClusterQueue, fr FlavorResource, n int64) quotaWait {
	quota := q.Quotas[fr]
	used := s.Usage[q.Name][fr]
	want := used + n
	if q.Cohort == "" {
		if want <= quota.Nominal {
			return quotaWait{}
		}
		return quotaWait{WaitNominalQuota, want - quota.Nominal, quota.Nominal, 0}
	}
	if quota.BorrowingLimit >= 0 && want > quota.Nominal+quota.BorrowingLimit {
		return quotaWait{WaitBorrowingLimit, want - quota.Nominal, quota.BorrowingLimit, 0}
	}
	own := guaranteed(quota)
	if want <= own {
		return quotaWait{}
	}
	var pool, pooled int64
	for _, o := range s.Queues {
		if o.Cohort != q.Cohort {
			continue
		}
		oq, ok := o.Quotas[fr]
		if !ok {
			continue
		}
		g := guaranteed(oq)
		pool += oq.Nominal - g
		pooled += max(s.Usage[o.Name][fr]-g, 0)
	}
	need := want - max(own, used) // what must come from the pool
	if free := pool - pooled; need > free {
		if want <= quota.Nominal {
			return quotaWait{WaitQuotaLent, n, quota.Nominal, max(free, 0)}
		}
		return quotaWait{WaitCohortQuota, want - quota.Nominal, max(free, 0), 0}
	}
	return quotaWait{}
}

// quotaWait is why a quota check failed (Code empty: it did not), with the
// figures its reason quotes, formatted only when someone reads it.
type quotaWait struct {
	Code    WaitCode
	a, b, c int64
}

func (w quotaWait) String() string {
	switch w.Code {
	case WaitNominalQuota:
		return fmt.Sprintf("needs %d over nominal quota %d and the queue has no cohort", w.a, w.b)
	case WaitBorrowingLimit:
		return fmt.Sprintf("would borrow %d, over the borrowing limit %d", w.a, w.b)
	case WaitQuotaLent:
		return fmt.Sprintf("needs %d within its nominal quota %d, but the cohort has lent it out (%d free in the cohort)", w.a, w.b, w.c)
	case WaitCohortQuota:
		return fmt.Sprintf("would borrow %d; the cohort has %d free", w.a, w.b)
	}
	return ""
}

// guaranteed is the part of a quota its queue does not lend.
func guaranteed(q Quota) int64 {
	if q.LendingLimit < 0 {
		return 0
	}
	return max(q.Nominal-q.LendingLimit, 0)
}

// freeFor is what is free for fr during Admit: on its flavor's nodes of
// that resource and of any resource.
func (s *Snapshot) freeFor(fr FlavorResource) int64 {
	return s.freeBy[fr] + s.freeBy[FlavorResource{fr.Flavor, ""}]
}

// takeFree takes n units of node i (gives them back when n < 0).
func (s *Snapshot) takeFree(i int, n int64) {
	s.Nodes[i].Free -= n
	if s.freeBy != nil {
		s.freeBy[FlavorResource{s.Nodes[i].Flavor, s.Nodes[i].Resource}] -= n
	}
}

// admit books w on flavor f and the picked nodes.
func (s *Snapshot) admit(q *ClusterQueue, w *Workload, f string, picked []int, d *Decision) {
	fr := FlavorResource{f, w.Resource}
	if s.Usage[q.Name] == nil {
		s.Usage[q.Name] = make(map[FlavorResource]int64)
	}
	s.Usage[q.Name][fr] += w.Units()
	nodes := make([]string, len(picked))
	units := w.podUnits()
	for k, i := range picked {
		s.takeFree(i, units[k])
		nodes[k] = s.Nodes[i].Name
	}
	d.Admitted, d.Flavor, d.Nodes = true, f, nodes
	if s.Running != nil {
		d.Running = &Running{Workload: w, Flavor: f, Nodes: nodes, StartMs: s.NowMs}
		s.Running[q.Name] = append(s.Running[q.Name], d.Running)
		if s.thisCycle != nil {
			s.thisCycle[d.Running] = true
		}
	}
}

// pick finds nodes for every pod of w on flavor f, largest pods first,
// each on the best fit (the fullest node that takes it), within one domain
// when asked. It returns a node per pod in podUnits order and takes
// nothing.
func (s *Snapshot) pick(f string, w *Workload, opts Options) ([]int, WaitCode, string) {
	units := w.podUnits()
	order := make([]int, len(units))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(units[b], units[a]) })
	var idx []int
	domains := make(map[string][]int)
	for i := range s.Nodes {
		if s.Nodes[i].Flavor == f && s.Nodes[i].takes(w.Resource) {
			idx = append(idx, i)
			domains[s.Nodes[i].Domain] = append(domains[s.Nodes[i].Domain], i)
		}
	}
	try := func(cands []int) []int {
		var total int64
		for _, i := range cands {
			total += s.Nodes[i].Free
		}
		if total < w.Units() {
			return nil
		}
		free := make(map[int]int64, len(cands))
		for _, i := range cands {
			free[i] = s.Nodes[i].Free
		}
		picked := make([]int, len(units))
		for _, k := range order {
			best := -1
			for _, i := range cands {
				if free[i] >= units[k] && (best < 0 || free[i] < free[best] || (free[i] == free[best] && i < best)) {
					best = i
				}
			}
			if best < 0 {
				return nil
			}
			free[best] -= units[k]
			picked[k] = best
		}
		return picked
	}
	var picked []int
	if opts.SameDomain {
		names := make([]string, 0, len(domains))
		for d := range domains {
			names = append(names, d)
		}
		sort.Strings(names)
		for _, d := range names {
			if picked = try(domains[d]); picked != nil {
				break
			}
		}
	} else {
		picked = try(idx)
	}
	if picked == nil {
		code := WaitCapacity
		if opts.SameDomain {
			code = WaitTopology
		}
		if opts.Terse {
			return nil, code, ""
		}
		if opts.SameDomain {
			return nil, code, fmt.Sprintf("no topology domain has room for %s", w.describe())
		}
		return nil, code, fmt.Sprintf("not enough free capacity for %s", w.describe())
	}
	return picked, "", ""
}
