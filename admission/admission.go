// Package admission decides which pending workloads start, in Kueue's model:
// ClusterQueues in cohorts with per-flavor nominal quotas, borrowing limits and
// lending limits; flavors tried in a queue's order; a policy that orders the
// pending workloads (FIFO, Kueue's fair sharing, cost-weighted fair share);
// and gangs admitted all at once or not at all, optionally inside one
// topology domain. The core is pure: a snapshot goes in, decisions with
// reasons come out. It does not run workloads or keep time; callers (sim, a
// Kueue adapter) do.
package admission

import (
	"fmt"
	"slices"
	"sort"
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
}

// Workload is a gang: Pods pods of PerPod units of Resource each, all or
// none.
type Workload struct {
	ID       string
	Queue    string // ClusterQueue
	Resource string
	Pods     int
	PerPod   int64
	// Priority goes before submission time: higher first.
	Priority int32
	// SubmittedMs orders FIFO; ties break on ID.
	SubmittedMs int64
}

// Units returns what the workload asks for in all.
func (w *Workload) Units() int64 { return int64(w.Pods) * w.PerPod }

// Node is free capacity on one node.
type Node struct {
	Name, Flavor string
	// Domain is the topology domain (rack, InfiniBand block).
	Domain string
	Free   int64
}

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

	freeByFlavor map[string]int64 // during Admit
}

// Decision says what happened to one pending workload.
type Decision struct {
	Workload *Workload
	Admitted bool
	Flavor   string
	// Nodes has one node name per pod, when admitted.
	Nodes []string
	// Reason says why a workload waits.
	Reason string
}

// Options tunes a cycle.
type Options struct {
	// SameDomain places all of a gang's pods in one topology domain.
	SameDomain bool
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
	i := 0
	out := AdmitInOrder(s, func() *Workload {
		if i == len(order) {
			return nil
		}
		i++
		return order[i-1]
	}, opts)
	// What AdmitInOrder did not reach waits for capacity.
	for _, w := range order[len(out):] {
		out = append(out, Decision{Workload: w, Reason: "no free capacity left in this cycle"})
	}
	return out
}

// AdmitInOrder is Admit with the order given as a stream: it takes workloads
// from next until next returns nil or no flavor has free capacity left, and
// returns a decision for each workload it took. Large backlogs need not be
// sorted whole: a caller that keeps pending workloads per queue in FIFO
// order can stream them in policy order.
func AdmitInOrder(s *Snapshot, next func() *Workload, opts Options) []Decision {
	// Free capacity per flavor, kept current as workloads are admitted: a
	// workload larger than it is refused without a placement search.
	s.freeByFlavor = make(map[string]int64)
	var free int64
	for _, n := range s.Nodes {
		s.freeByFlavor[n.Flavor] += n.Free
		free += n.Free
	}
	blocked := make(map[string]bool) // StrictFIFO queues whose head did not fit
	var out []Decision
	for free > 0 {
		w := next()
		if w == nil {
			break
		}
		d := Decision{Workload: w}
		q := s.Queues[w.Queue]
		switch {
		case q == nil:
			d.Reason = fmt.Sprintf("ClusterQueue %q does not exist", w.Queue)
		case blocked[w.Queue]:
			d.Reason = "behind an older workload of its StrictFIFO queue"
		default:
			d.Reason = s.tryAdmit(q, w, opts, &d)
			if !d.Admitted && q.StrictFIFO {
				blocked[w.Queue] = true
			}
			if d.Admitted {
				free -= w.Units()
			}
		}
		out = append(out, d)
	}
	return out
}

func (s *Snapshot) tryAdmit(q *ClusterQueue, w *Workload, opts Options, d *Decision) string {
	var reasons []string
	for _, f := range q.Flavors {
		fr := FlavorResource{f, w.Resource}
		if _, ok := q.Quotas[fr]; !ok {
			continue
		}
		if why := s.fitsQuota(q, fr, w.Units()); why != "" {
			reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, why))
			continue
		}
		if free := s.freeByFlavor[f]; free < w.Units() {
			reasons = append(reasons, fmt.Sprintf("flavor %s: not enough free capacity for %d pods of %d (%d free)", f, w.Pods, w.PerPod, free))
			continue
		}
		nodes, why := s.place(f, w, opts)
		if why != "" {
			reasons = append(reasons, fmt.Sprintf("flavor %s: %s", f, why))
			continue
		}
		if s.Usage[q.Name] == nil {
			s.Usage[q.Name] = make(map[FlavorResource]int64)
		}
		s.Usage[q.Name][fr] += w.Units()
		s.freeByFlavor[f] -= w.Units()
		d.Admitted, d.Flavor, d.Nodes = true, f, nodes
		return ""
	}
	if len(reasons) == 0 {
		return fmt.Sprintf("ClusterQueue %s has no quota for %s", q.Name, w.Resource)
	}
	return fmt.Sprint(reasons)
}

// FitsQuota says why n more units of fr would break queue's quota, or ""
// when they fit.
func (s *Snapshot) FitsQuota(queue string, fr FlavorResource, n int64) string {
	q := s.Queues[queue]
	if q == nil {
		return fmt.Sprintf("ClusterQueue %q does not exist", queue)
	}
	if _, ok := q.Quotas[fr]; !ok {
		return fmt.Sprintf("ClusterQueue %s has no quota for %s", queue, fr.Resource)
	}
	return s.fitsQuota(q, fr, n)
}

// fitsQuota applies Kueue's quota rules: usage up to nominal is the queue's
// own; beyond it the queue borrows, up to its borrowing limit, from what the
// other queues of its cohort leave unused and may lend.
func (s *Snapshot) fitsQuota(q *ClusterQueue, fr FlavorResource, n int64) string {
	quota := q.Quotas[fr]
	want := s.Usage[q.Name][fr] + n
	if want <= quota.Nominal {
		return ""
	}
	if q.Cohort == "" {
		return fmt.Sprintf("needs %d over nominal quota %d and the queue has no cohort", want-quota.Nominal, quota.Nominal)
	}
	if quota.BorrowingLimit >= 0 && want > quota.Nominal+quota.BorrowingLimit {
		return fmt.Sprintf("would borrow %d, over the borrowing limit %d", want-quota.Nominal, quota.BorrowingLimit)
	}
	var lendable, borrowed int64
	for _, o := range s.Queues {
		if o == q || o.Cohort != q.Cohort {
			continue
		}
		oq, ok := o.Quotas[fr]
		if !ok {
			continue
		}
		used := s.Usage[o.Name][fr]
		unused := max(oq.Nominal-used, 0)
		if oq.LendingLimit >= 0 {
			unused = min(unused, oq.LendingLimit)
		}
		lendable += unused
		borrowed += max(used-oq.Nominal, 0)
	}
	if free := lendable - borrowed; want-quota.Nominal > free {
		return fmt.Sprintf("would borrow %d; the cohort has %d to lend", want-quota.Nominal, max(free, 0))
	}
	return ""
}

// place finds nodes for every pod of w on flavor f: best fit (the fullest
// node that takes a pod), within one domain when asked. Nothing is taken
// unless every pod fits.
func (s *Snapshot) place(f string, w *Workload, opts Options) ([]string, string) {
	var idx []int
	domains := make(map[string][]int)
	for i := range s.Nodes {
		if s.Nodes[i].Flavor == f {
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
		picked := make([]int, 0, w.Pods)
		for range w.Pods {
			best := -1
			for _, i := range cands {
				if free[i] >= w.PerPod && (best < 0 || free[i] < free[best] || (free[i] == free[best] && i < best)) {
					best = i
				}
			}
			if best < 0 {
				return nil
			}
			free[best] -= w.PerPod
			picked = append(picked, best)
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
		if opts.SameDomain {
			return nil, fmt.Sprintf("no topology domain has room for %d pods of %d", w.Pods, w.PerPod)
		}
		return nil, fmt.Sprintf("not enough free capacity for %d pods of %d", w.Pods, w.PerPod)
	}
	nodes := make([]string, len(picked))
	for k, i := range picked {
		s.Nodes[i].Free -= w.PerPod
		nodes[k] = s.Nodes[i].Name
	}
	return nodes, ""
}
