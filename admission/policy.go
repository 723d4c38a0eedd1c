package admission

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// FIFO admits the oldest workloads first, whatever their queue.
type FIFO struct{}

// Name is "fifo".
func (FIFO) Name() string { return "fifo" }

// Order sorts by submission time.
func (FIFO) Order(_ *Snapshot, pending []*Workload) { sortFIFO(pending) }

// sortFIFO orders by priority (higher first), then submission time, then ID:
// Kueue's order within a queue.
func sortFIFO(ws []*Workload) {
	slices.SortStableFunc(ws, compareFIFO)
}

// compareFIFO is sortFIFO's order.
func compareFIFO(a, b *Workload) int {
	if a.Priority != b.Priority {
		return cmp.Compare(b.Priority, a.Priority)
	}
	switch {
	case a.SubmittedMs != b.SubmittedMs:
		return cmp.Compare(a.SubmittedMs, b.SubmittedMs)
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// InsertFIFO inserts w into a list kept in sortFIFO's order.
func InsertFIFO(list []*Workload, w *Workload) []*Workload {
	i, _ := slices.BinarySearchFunc(list, w, compareFIFO)
	return slices.Insert(list, i, w)
}

// KueueFairSharing orders queues by Kueue's dominant resource share: for
// each resource a queue uses beyond its nominal quota, what it borrows over
// what the cohort can lend of it; the largest of those, over the queue's
// weight. Queues borrowing least go first; within a queue, FIFO.
//
// With PolicyName "costfair-drs" it is gpuledger's cost-weighted share as
// a real Kueue can run it unmodified: the same order, with each
// ClusterQueue's fairSharing.weight set from the money it has spent
// against what its quota is worth (MoneyWeights).
type KueueFairSharing struct{ PolicyName string }

// Name is "kueue", or PolicyName when set.
func (k KueueFairSharing) Name() string {
	if k.PolicyName != "" {
		return k.PolicyName
	}
	return "kueue"
}

// Order sorts by dominant resource share, then FIFO.
func (KueueFairSharing) Order(s *Snapshot, pending []*Workload) {
	drs := make(map[string]float64)
	for name := range s.Queues {
		drs[name] = s.DominantResourceShare(name)
	}
	sortByShare(pending, drs)
}

// DominantResourceShare is Kueue's fair-sharing value of a queue (×1000,
// as Kueue reports it).
func (s *Snapshot) DominantResourceShare(name string) float64 {
	return s.dominantShare(name, FlavorResource{}, 0)
}

// dominantShare is DominantResourceShare with delta more units of fr in
// the queue's usage.
func (s *Snapshot) dominantShare(name string, dfr FlavorResource, delta int64) float64 {
	q := s.Queues[name]
	if q == nil {
		return 0
	}
	var dominant float64
	for fr, quota := range q.Quotas {
		borrowed := s.Usage[name][fr] - quota.Nominal
		if fr == dfr {
			borrowed += delta
		}
		if borrowed <= 0 {
			continue
		}
		var lendable int64
		for _, o := range s.Queues {
			if o.Cohort != q.Cohort || q.Cohort == "" {
				continue
			}
			if oq, ok := o.Quotas[fr]; ok {
				l := oq.Nominal
				if oq.LendingLimit >= 0 {
					l = min(l, oq.LendingLimit)
				}
				lendable += l
			}
		}
		if lendable > 0 {
			dominant = max(dominant, float64(borrowed)/float64(lendable))
		}
	}
	return dominant * 1000 / weight(q)
}

// ShareOrder orders queues by Snapshot.Share, lowest first, then FIFO: the
// caller keeps the shares. With shares of decayed usage in resource units
// over weight it is Kueue's Admission Fair Sharing; with decayed spend in
// money over weight, gpuledger's cost-weighted fair share.
type ShareOrder struct {
	PolicyName string
	// For fair-sharing preemption: the value one unit of a flavor's
	// resource adds per second held (Rate, else DefaultRate: 1 for
	// resource-seconds, the price per second for money) and the half-life
	// the shares decay with.
	Rate        map[FlavorResource]float64
	DefaultRate float64
	HalfLifeMs  int64
	// PenaltyMs is the admission penalty (Admission Fair Sharing's): an
	// admitted workload charges its queue at once what holding its units
	// for this long adds, so that one cycle does not hand a queue every
	// free GPU before its usage catches up. 0: none.
	PenaltyMs int64
}

// Penalty is what admitting w on flavor adds to its queue's value (its
// share before the division by the queue's weight).
func (p ShareOrder) Penalty(_ *Snapshot, w *Workload, flavor string) float64 {
	if p.PenaltyMs <= 0 {
		return 0
	}
	return float64(w.Units()) * p.rate(FlavorResource{flavor, w.Resource}) * float64(p.PenaltyMs) / 1000
}

// AdmissionPenalizer is a policy that charges a queue's value when one of
// its workloads is admitted; AdmitInOrder adds the charge, over the
// queue's weight, to Snapshot.Share as it admits, so later picks in the
// same cycle see it.
type AdmissionPenalizer interface {
	Penalty(s *Snapshot, w *Workload, flavor string) float64
}

// Name is the policy's name.
func (p ShareOrder) Name() string { return p.PolicyName }

// Order sorts by share, then FIFO.
func (p ShareOrder) Order(s *Snapshot, pending []*Workload) { sortByShare(pending, s.Share) }

func sortByShare(ws []*Workload, share map[string]float64) {
	sortFIFO(ws)
	sort.SliceStable(ws, func(i, j int) bool { return share[ws[i].Queue] < share[ws[j].Queue] })
}

// Sharer is a policy that orders queues by a per-queue value, lowest first,
// FIFO within a queue and across queues of equal value. All policies here
// are: FIFO gives every queue the same value.
type Sharer interface {
	Policy
	QueueShares(s *Snapshot) map[string]float64
}

// QueueShares gives every queue the same value: global FIFO.
func (FIFO) QueueShares(*Snapshot) map[string]float64 { return nil }

// QueueShares returns each queue's dominant resource share.
func (KueueFairSharing) QueueShares(s *Snapshot) map[string]float64 {
	out := make(map[string]float64, len(s.Queues))
	for name := range s.Queues {
		out[name] = s.DominantResourceShare(name)
	}
	return out
}

// LiveSharer is a Sharer whose value of a queue changes as a cycle admits
// its workloads (Kueue's dominant resource share grows as the queue
// borrows): a live stream asks it again after each admission, as Kueue
// orders a cycle's entries on the shares the cycle's admissions leave.
type LiveSharer interface {
	Sharer
	QueueShare(s *Snapshot, queue string) float64
}

// QueueShare returns the queue's dominant resource share now.
func (KueueFairSharing) QueueShare(s *Snapshot, queue string) float64 {
	return s.DominantResourceShare(queue)
}

// QueueShares returns Snapshot.Share.
func (ShareOrder) QueueShares(s *Snapshot) map[string]float64 { return s.Share }

// Stream yields the workloads of per-queue lists, each in FIFO order
// (priority, then submission time), in the order Sharer policies give: the
// queue with the lowest share first, ties broken by priority, submission
// time, then ID. Entries for which skip is true are passed over. It is the
// Pending AdmitInOrder takes, without sorting a whole backlog.
func Stream(shares map[string]float64, lists map[string][]*Workload, skip func(*Workload) bool) Pending {
	st := &streamer{shares: shares, lists: lists, skip: skip}
	for q := range lists {
		st.names = append(st.names, q)
	}
	sort.Strings(st.names)
	st.cursor = make([]int, len(st.names))
	return st
}

type streamer struct {
	shares map[string]float64
	lists  map[string][]*Workload
	skip   func(*Workload) bool
	names  []string
	cursor []int // -1: dropped
	// refresh, when set, gives a queue's share again after it admitted.
	refresh func(queue string) float64
}

// LiveStream is Stream whose order follows the shares as the cycle
// admits: after each admission AdmitInOrder has refresh give the
// admitting queue's share again.
func LiveStream(shares map[string]float64, lists map[string][]*Workload, skip func(*Workload) bool, refresh func(queue string) float64) Pending {
	st := Stream(shares, lists, skip).(*streamer)
	if st.shares == nil {
		st.shares = map[string]float64{}
	}
	st.refresh = refresh
	return st
}

// admitted takes the admitting queue's share again.
func (st *streamer) admitted(queue string) {
	if st.refresh != nil {
		st.shares[queue] = st.refresh(queue)
	}
}

func (st *streamer) head(i int) *Workload {
	if st.cursor[i] < 0 {
		return nil
	}
	l := st.lists[st.names[i]]
	for st.cursor[i] < len(l) && st.skip != nil && st.skip(l[st.cursor[i]]) {
		st.cursor[i]++
	}
	if st.cursor[i] < len(l) {
		return l[st.cursor[i]]
	}
	return nil
}

func (st *streamer) Next() *Workload {
	best := -1
	var bw *Workload
	for i := range st.names {
		w := st.head(i)
		if w == nil {
			continue
		}
		if best < 0 || less(st.shares[st.names[i]], w, st.shares[st.names[best]], bw) {
			best, bw = i, w
		}
	}
	if best < 0 {
		return nil
	}
	st.cursor[best]++
	return bw
}

func (st *streamer) Drop(queue string) {
	if i, ok := slices.BinarySearch(st.names, queue); ok {
		st.cursor[i] = -1
	}
}

func less(sa float64, a *Workload, sb float64, b *Workload) bool {
	if sa != sb {
		return sa < sb
	}
	return compareFIFO(a, b) < 0
}

// ErrPolicy is returned for a policy name NewPolicy does not know.
var ErrPolicy = errors.New("unknown policy")

// PolicyNames are the policies NewPolicy makes.
var PolicyNames = []string{"fifo", "kueue", "kueue-afs", "costfair", "costfair-drs"}

// PolicyParams are what the share-based policies need: the half-life of
// decayed usage, the admission penalty, and for costfair the price per
// second of each flavor's resource (micros).
type PolicyParams struct {
	HalfLifeMs, PenaltyMs int64
	Rates                 map[FlavorResource]float64
}

// NewPolicy makes a policy by name: fifo, kueue (cohort fair sharing by
// dominant resource share), kueue-afs (Admission Fair Sharing: decayed
// resource-seconds, every unit worth 1), costfair (decayed spend at the
// flavors' prices) or costfair-drs (kueue's order, the caller setting the
// queues' weights with MoneyWeights). The simulator and a controller pick policies through
// it, so both run the same code.
func NewPolicy(name string, p PolicyParams) (Sharer, error) {
	switch name {
	case "fifo":
		return FIFO{}, nil
	case "kueue":
		return KueueFairSharing{}, nil
	case "kueue-afs":
		return ShareOrder{PolicyName: name, DefaultRate: 1, HalfLifeMs: p.HalfLifeMs, PenaltyMs: p.PenaltyMs}, nil
	case "costfair":
		return ShareOrder{PolicyName: name, Rate: p.Rates, HalfLifeMs: p.HalfLifeMs, PenaltyMs: p.PenaltyMs}, nil
	case "costfair-drs":
		// The caller sets the queues' weights (MoneyWeights).
		return KueueFairSharing{PolicyName: name}, nil
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrPolicy, name, strings.Join(PolicyNames, ", "))
}
