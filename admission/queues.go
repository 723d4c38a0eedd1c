package admission

import (
	"cmp"
	"math"
	"slices"
)

// Queues holds the workloads waiting in every ClusterQueue, each queue in
// Kueue's order (priority, then creation time), for the scheduling cycles
// of a simulator and of a controller alike. A workload is pushed when it
// is submitted (or evicted and requeued) and removed when it is admitted.
//
// With aging, a workload waiting AgingAfterMs or more moves to its queue's
// aged tier, which is offered to admission before the rest.
type Queues struct {
	agingAfterMs int64
	lists        map[string][]*Workload
	// Admitted workloads are marked dead in their list and dropped
	// lazily, so that admitting costs what it admits, not the backlog.
	dead   map[*Workload]bool
	deadIn map[string]int
	aged   map[string][]*Workload
	nAged  int
	aging  []*Workload // pending, not aged, by submission time
	state  map[*Workload]queued
	bySize map[int64]int
	inQ    map[string]int
	n      int
	// deferred wait out a backoff, in the order they were deferred.
	deferred []deferredWorkload
}

type deferredWorkload struct {
	w    *Workload
	atMs int64
}

type queued uint8

const (
	waiting queued = iota + 1
	agedTier
)

// NewQueues makes empty queues; agingAfterMs 0 means no aging.
func NewQueues(agingAfterMs int64) *Queues {
	return &Queues{agingAfterMs: agingAfterMs, lists: map[string][]*Workload{}, dead: map[*Workload]bool{}, deadIn: map[string]int{},
		aged: map[string][]*Workload{}, state: map[*Workload]queued{}, bySize: map[int64]int{}, inQ: map[string]int{}}
}

// Push queues w (its Priority and SubmittedMs set) in its ClusterQueue.
func (q *Queues) Push(w *Workload) {
	// An old entry of w may still be in the list, dead: drop the dead
	// ones first so that it is not there twice.
	if q.dead[w] {
		q.lists[w.Queue] = slices.DeleteFunc(q.lists[w.Queue], func(x *Workload) bool { return q.dead[x] })
		q.deadIn[w.Queue] = 0
		delete(q.dead, w)
	}
	q.lists[w.Queue] = InsertFIFO(q.lists[w.Queue], w)
	q.state[w] = waiting
	q.bySize[w.Units()]++
	q.inQ[w.Queue]++
	q.n++
	if q.agingAfterMs > 0 {
		i, _ := slices.BinarySearchFunc(q.aging, w, func(a, b *Workload) int { return cmp.Compare(a.SubmittedMs, b.SubmittedMs) })
		q.aging = slices.Insert(q.aging, i, w)
	}
}

// Remove takes an admitted workload out of its queue.
func (q *Queues) Remove(w *Workload) {
	st := q.state[w]
	if st == 0 {
		return
	}
	delete(q.state, w)
	q.bySize[w.Units()]--
	q.inQ[w.Queue]--
	q.n--
	if st == agedTier {
		q.aged[w.Queue] = slices.DeleteFunc(q.aged[w.Queue], func(x *Workload) bool { return x == w })
		q.nAged--
		return
	}
	q.dead[w] = true
	q.deadIn[w.Queue]++
	if l := q.lists[w.Queue]; q.deadIn[w.Queue] > len(l)/2 {
		q.lists[w.Queue] = slices.DeleteFunc(l, func(x *Workload) bool { return q.dead[x] })
		q.deadIn[w.Queue] = 0
	}
}

// Len is the number of workloads waiting; In those of one ClusterQueue.
func (q *Queues) Len() int            { return q.n }
func (q *Queues) In(queue string) int { return q.inQ[queue] }

// Smallest is the fewest units a waiting workload needs (MaxInt64 when
// none waits): below it, no free capacity can admit anything.
func (q *Queues) Smallest() int64 {
	smallest := int64(math.MaxInt64)
	for size, n := range q.bySize {
		if n > 0 {
			smallest = min(smallest, size)
		}
	}
	return smallest
}

// Age moves the workloads submitted at or before nowMs − AgingAfterMs to
// their queue's aged tier, oldest first; it returns how many are aged.
func (q *Queues) Age(nowMs int64) int {
	if q.agingAfterMs <= 0 {
		return 0
	}
	limit := nowMs - q.agingAfterMs
	n := 0
	for ; n < len(q.aging) && q.aging[n].SubmittedMs <= limit; n++ {
		w := q.aging[n]
		if q.state[w] != waiting {
			continue
		}
		q.lists[w.Queue] = slices.DeleteFunc(q.lists[w.Queue], func(x *Workload) bool { return x == w })
		q.state[w] = agedTier
		q.aged[w.Queue] = append(q.aged[w.Queue], w)
		q.nAged++
	}
	q.aging = q.aging[n:]
	return q.nAged
}

// Stream offers the waiting workloads (not the aged tier) in the order a
// policy's queue shares give: the queue with the lowest share first, each
// queue in its own order.
func (q *Queues) Stream(shares map[string]float64) Pending {
	return Stream(shares, q.lists, func(w *Workload) bool { return q.dead[w] })
}

// LiveStream offers the queued workloads as Stream does, the shares
// following the cycle's admissions (LiveStream).
func (q *Queues) LiveStream(shares map[string]float64, refresh func(queue string) float64) Pending {
	return LiveStream(shares, q.lists, func(w *Workload) bool { return q.dead[w] }, refresh)
}

// AgedStream offers the aged tier the same way.
func (q *Queues) AgedStream(shares map[string]float64) Pending {
	return Stream(shares, q.aged, nil)
}

// Backoff is how long a workload evicted for the evictions-th time waits
// before it queues again: Kueue's waitForPodsReady requeuing strategy,
// baseMs × 2^(evictions−1), at most maxMs (0: no cap).
func Backoff(baseMs, maxMs int64, evictions int) int64 {
	d := baseMs << min(max(evictions-1, 0), 20)
	if maxMs > 0 {
		d = min(d, maxMs)
	}
	return d
}

// Defer keeps w (evicted, not queued) out of the queues until atMs; Wake
// queues it again then.
func (q *Queues) Defer(w *Workload, atMs int64) {
	q.deferred = append(q.deferred, deferredWorkload{w, atMs})
}

// NextWake is when the first deferred workload is due; ok is false when
// none is deferred.
func (q *Queues) NextWake() (atMs int64, ok bool) {
	atMs = math.MaxInt64
	for _, d := range q.deferred {
		atMs = min(atMs, d.atMs)
	}
	return atMs, len(q.deferred) > 0
}

// Deferred is how many workloads wait out a backoff.
func (q *Queues) Deferred() int { return len(q.deferred) }

// Wake queues the deferred workloads due at nowMs, in the order they were
// deferred, each as if created at nowMs (Kueue requeues an evicted
// workload by its eviction time, behind the ones already waiting).
func (q *Queues) Wake(nowMs int64) {
	kept := q.deferred[:0]
	for _, d := range q.deferred {
		if d.atMs > nowMs {
			kept = append(kept, d)
			continue
		}
		d.w.SubmittedMs = nowMs
		q.Push(d.w)
	}
	clear(q.deferred[len(kept):])
	q.deferred = kept
}
