package ingest

// The reorder window: samples held in time order until the frontier
// passes them, bounded in count and bytes, and released to attribution.

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
)

func floorHourMs(ms int64) int64 { return time.UnixMilli(ms).UTC().Truncate(time.Hour).UnixMilli() }

// window is the reorder window at the clock nowMs, in milliseconds: while
// a backlog comes in, the catch-up window or, if longer, the backlog's
// depth and a reorder window more, so that a block held since the backlog
// began is still in order when it comes; else the reorder window.
func (st *state) window(nowMs int64, opts PipelineOptions) int64 {
	if st.catchingUp(nowMs) {
		return max(opts.CatchUpWindow.Milliseconds(), st.catchUpDepthMs+opts.ReorderWindow.Milliseconds())
	}
	return opts.ReorderWindow.Milliseconds()
}

// catchUp says whether a backlog gets a window of its own.
func (o PipelineOptions) catchUp() bool { return o.CatchUpWindow > o.ReorderWindow }

// catchingUp says whether a backlog is coming in at the clock nowMs.
func (st *state) catchingUp(nowMs int64) bool { return nowMs < st.catchUpUntilMs }

// bound releases the oldest of the buffer, whatever the window, until it
// holds at most limit samples and pod facts, and costs at most
// limitBytes: a backlog longer than the buffer can hold is put in order
// as far as it can be, not refused. Interned tables that cost more than
// half of limitBytes by themselves (a flood of distinct series) start a
// new generation, twice if need be: the sets still buffered stay with
// their items.
func (st *state) bound(limit int, limitBytes int64) {
	for range 2 {
		if st.sets.bytes() <= limitBytes/2 {
			break
		}
		st.sets.rotate(st.maxMs)
	}
	for n := st.buffered(); n > 0 && (n > limit || st.bufferBytes() > limitBytes); {
		st.release(st.oldestMs() + 1)
		m := st.buffered()
		st.shed += uint64(n - m)
		n = m
	}
}

// bufferBytes is what the reorder buffer costs: its items, the label sets
// they brought in, and the interned tables.
func (st *state) bufferBytes() int64 {
	return st.samples.bytes + st.pods.bytes + st.queues.bytes + st.sets.bytes()
}

// bufferSink puts a request's samples in the reorder buffer, less those
// too new (past limitMs) or late (before lateMs, in settled hours).
type bufferSink struct {
	st              *state
	limitMs, lateMs int64
	// newestMs and oldestMs are the newest and oldest sample or pod fact
	// taken (newestMs 0: none).
	newestMs, oldestMs int64
	res                Result
}

func (b *bufferSink) Add(s *attribution.Sample) {
	if b.admit(s.TimeMs) {
		b.st.samples.pending = append(b.st.samples.pending, b.st.sets.hold(s))
	}
}

// admit counts a sample stamped ms as too new, late or accepted, and says
// whether it was accepted.
func (b *bufferSink) admit(ms int64) bool {
	switch {
	case ms > b.limitMs:
		b.res.TooNew++
		return false
	case ms < b.lateMs:
		b.res.Late++
		return false
	}
	b.res.Accepted++
	b.took(ms)
	return true
}

// took notes a sample or pod fact stamped ms taken into the buffer.
func (b *bufferSink) took(ms int64) {
	if b.newestMs == 0 {
		b.oldestMs = ms
	}
	b.newestMs, b.oldestMs = max(b.newestMs, ms), min(b.oldestMs, ms)
	b.st.maxMs = max(b.st.maxMs, ms)
}

func (b *bufferSink) AddPod(p attribution.PodInfo) {
	// A pod fact past the limit or before the settled hours says nothing
	// the ledger can use; it is dropped without a word.
	if p.TimeMs > b.limitMs || p.TimeMs < b.lateMs {
		return
	}
	b.res.Accepted++
	b.took(p.TimeMs)
	b.st.pods.pending = append(b.st.pods.pending, b.st.sets.holdPod(&p))
}

func (b *bufferSink) AddQueue(q *attribution.QueueSample) {
	if b.admit(q.TimeMs) {
		b.st.queues.pending = append(b.st.queues.pending, b.st.sets.holdQueue(q))
	}
}

// order makes what a request added to the buffers a run of each (in time
// order by itself), given out oldest first across the runs.
func (st *state) order() {
	st.samples.order(sampleMs, sampleBytes)
	st.pods.order(podMs, podBytes)
	st.queues.order(queueMs, queueBytes)
	st.sets.maybeRotate(st.maxMs, st.buffered())
}

// release passes buffered samples and pod facts older than untilMs to
// attribution, in time order, and takes the hours they close. (Requests
// and ticks release what is at least the reorder window old: without a
// window, everything, and no sample keeps a reference to its body.)
func (st *state) release(untilMs int64) {
	untilMs = max(untilMs, st.releasedMs)
	st.releasedMs = untilMs
	for {
		s, p, q := st.samples.first(), st.pods.first(), st.queues.first()
		sDue := s != nil && s.TimeMs < untilMs
		pDue := p != nil && p.TimeMs < untilMs
		qDue := q != nil && q.TimeMs < untilMs
		switch {
		case sDue && (!pDue || s.TimeMs <= p.TimeMs) && (!qDue || s.TimeMs <= q.TimeMs):
			x := s.sample()
			st.att.Add(&x)
			st.samples.pop()
		case pDue && (!qDue || p.TimeMs <= q.TimeMs):
			st.att.AddPod(p.pod())
			st.pods.pop()
		case qDue:
			x := q.queue()
			st.att.AddQueue(&x)
			st.queues.pop()
		default:
			st.collect()
			return
		}
	}
}

// tickFrontier is where a tick at nowMs releases the buffer up to. While
// requests come (one within the reorder window's length of the clock), the
// window is in sample time, as a request releases it: a sender catching up
// on a backlog, its samples far behind the clock, keeps the order the
// window gives its queues. Once they stop, nothing: silence is an outage as
// often as the end of a feed (and a restart begins with one), and the
// blocks vmagent's queues held through it come back as old as it was long,
// however long that was. What a feed that ended left buffered is released
// when its hour settles (settle), which is all the ledger waits for.
func (st *state) tickFrontier(nowMs int64, opts PipelineOptions) int64 {
	if nowMs-st.lastWriteMs < opts.ReorderWindow.Milliseconds() {
		return min(nowMs, st.maxMs) - st.window(nowMs, opts) + 1
	}
	return math.MinInt64
}

func (st *state) buffered() int { return st.samples.len() + st.pods.len() + st.queues.len() }

// oldestMs is the time of the oldest sample, pod fact or queue sample
// buffered; math.MaxInt64 when none is.
func (st *state) oldestMs() int64 {
	oldest := int64(math.MaxInt64)
	if s := st.samples.first(); s != nil {
		oldest = s.TimeMs
	}
	if p := st.pods.first(); p != nil {
		oldest = min(oldest, p.TimeMs)
	}
	if q := st.queues.first(); q != nil {
		oldest = min(oldest, q.TimeMs)
	}
	return oldest
}

func sampleMs(s *heldSample) int64 { return s.TimeMs }
func podMs(p *heldPod) int64       { return p.TimeMs }
func queueMs(q *heldQueue) int64   { return q.TimeMs }

// timeQueue is one kind of the reorder buffer: the items of each request
// are a run of their own, in time order, and the items are taken out
// oldest first across the runs (a k-way merge over a heap of runs), ties
// in the order they came: the order a stable sort of everything would give,
// without moving any item. (Requests of several vmagent queues interleave
// in time, so a sorted buffer would move most of a scrape for each one.)
type timeQueue[T any] struct {
	// pending is what the request being parsed adds; order makes it a run.
	pending []T
	heap    []*timeRun[T] // by the time of their first item, then seq
	n       int           // items waiting in the runs
	seq     uint64
	at      func(*T) int64
	// size is what an item costs in memory, bytes what the waiting ones
	// cost together.
	size  func(*T) int64
	bytes int64
	// free holds the items of runs taken out, emptied, for the next
	// requests' pending: a scrape's requests then add to the buffer
	// without growing a slice each.
	free [][]T
}

// maxFreeRuns bounds timeQueue.free: about as many as the requests a
// reorder window takes out at once, and no more held for nothing.
const maxFreeRuns = 64

// timeRun is one request's items, next from head on.
type timeRun[T any] struct {
	items []T
	head  int
	seq   uint64
}

// order makes what the last request added a run of the queue.
func (q *timeQueue[T]) order(at, size func(*T) int64) {
	q.at, q.size = at, size
	add := q.pending
	if len(add) == 0 {
		return
	}
	q.pending = nil
	if k := len(q.free); k > 0 {
		q.pending, q.free[k-1] = q.free[k-1], nil
		q.free = q.free[:k-1]
	}
	if !sortedBy(add, at) {
		slices.SortStableFunc(add, func(a, b T) int { return cmp.Compare(at(&a), at(&b)) })
	}
	q.seq++
	q.n += len(add)
	for i := range add {
		q.bytes += size(&add[i])
	}
	q.heap = append(q.heap, &timeRun[T]{items: add, seq: q.seq})
	q.up(len(q.heap) - 1)
}

// first returns the oldest waiting item, nil when none waits.
func (q *timeQueue[T]) first() *T {
	if len(q.heap) == 0 {
		return nil
	}
	r := q.heap[0]
	return &r.items[r.head]
}

// pop takes out the oldest waiting item.
func (q *timeQueue[T]) pop() {
	r := q.heap[0]
	q.bytes -= q.size(&r.items[r.head])
	var zero T
	r.items[r.head] = zero // no reference to request bodies kept here
	r.head++
	q.n--
	if r.head == len(r.items) {
		if len(q.free) < maxFreeRuns {
			q.free = append(q.free, r.items[:0])
		}
		last := len(q.heap) - 1
		q.heap[0] = q.heap[last]
		q.heap[last] = nil
		q.heap = q.heap[:last]
	}
	if len(q.heap) > 0 {
		q.down(0)
	}
}

// len is how many items wait.
func (q *timeQueue[T]) len() int { return q.n }

// reset makes items, in time order, the waiting ones.
func (q *timeQueue[T]) reset(items []T, at, size func(*T) int64) {
	*q = timeQueue[T]{at: at, size: size}
	q.pending = items
	q.order(at, size)
}

func (q *timeQueue[T]) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	ta, tb := q.at(&a.items[a.head]), q.at(&b.items[b.head])
	return ta < tb || ta == tb && a.seq < b.seq
}

func (q *timeQueue[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.heap[i], q.heap[p] = q.heap[p], q.heap[i]
		i = p
	}
}

func (q *timeQueue[T]) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(q.heap) && q.less(l, m) {
			m = l
		}
		if r := l + 1; r < len(q.heap) && q.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.heap[i], q.heap[m] = q.heap[m], q.heap[i]
		i = m
	}
}

// sortedBy says whether items are in time order.
func sortedBy[T any](items []T, at func(*T) int64) bool {
	for i := 1; i < len(items); i++ {
		if at(&items[i]) < at(&items[i-1]) {
			return false
		}
	}
	return true
}

// decodedPool keeps decodings for reuse (their arenas, label and sample
// lists): the reorder buffer interns the labels it keeps, so nothing
// refers to a decoding once it is parsed.
var decodedPool = sync.Pool{New: func() any { return &RemoteWrite{} }}
