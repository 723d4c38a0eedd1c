package ingest

import (
	"encoding/gob"
	"fmt"

	"github.com/gpuledger/gpuledger/attribution"
)

// The reorder buffer in a snapshot (version 2): after the snapshot's
// header, a stream of chunks, each a piece of one run of one kind of item
// (a request's items, in time order, from the one taken out next), with
// the label sets its items are the first to use; a chunk of kind 0 ends
// it. A label set is written once (an item names it by its number), and
// nothing is copied whole before it is written: a buffer at its bound
// (millions of items) costs the snapshot a few bytes an item, and little
// memory to write or read. Restoring the runs with their sequence numbers
// gives the items back in the order they would have been taken out.

// Kinds of a bufferChunk.
const (
	chunkEnd = iota
	chunkSamples
	chunkPods
	chunkQueues
)

// chunkItems is how many items a chunk holds at most.
const chunkItems = 1 << 16

// bufferChunk is a piece of a run of the reorder buffer.
type bufferChunk struct {
	Kind       uint8
	Seq        uint64
	SampleSets []attribution.Sample
	PodSets    []attribution.PodInfo
	QueueSets  []attribution.QueueSample
	Samples    []snapSample
	Pods       []snapPod
	Queues     []snapQueue
}

// snapSample, snapPod and snapQueue are buffered items with their label
// set's number.
type (
	snapSample struct {
		Set    uint32
		TimeMs int64
		Value  float64
		Field  attribution.Field
	}
	snapPod struct {
		Set          uint32
		TimeMs       int64
		RequestMilli int64
		Phase        attribution.Phase
	}
	snapQueue struct {
		Set    uint32
		TimeMs int64
		Value  float64
		Le     float64
		Metric attribution.QueueMetric
	}
)

// runCodec says how one kind of item goes into chunks and comes back.
type runCodec[T, L, S any] struct {
	kind   uint8
	labels func(*T) *L
	toSnap func(*T, uint32) S
	put    func(*bufferChunk, []L, []S)
	// Reading: the chunk's sets and items, how a set is held again (its
	// interned copy and what it cost), and an item rebuilt.
	get     func(*bufferChunk) ([]L, []S)
	hold    func(*L) (*L, uint32)
	setOf   func(S) uint32
	fromSnp func(S, *L, uint32) T
}

var (
	sampleCodec = runCodec[heldSample, attribution.Sample, snapSample]{
		kind:   chunkSamples,
		labels: func(h *heldSample) *attribution.Sample { return h.labels },
		toSnap: func(h *heldSample, set uint32) snapSample {
			return snapSample{Set: set, TimeMs: h.TimeMs, Value: h.Value, Field: h.Field}
		},
		put: func(c *bufferChunk, sets []attribution.Sample, items []snapSample) {
			c.SampleSets, c.Samples = sets, items
		},
		get:   func(c *bufferChunk) ([]attribution.Sample, []snapSample) { return c.SampleSets, c.Samples },
		setOf: func(s snapSample) uint32 { return s.Set },
		fromSnp: func(s snapSample, l *attribution.Sample, own uint32) heldSample {
			return heldSample{labels: l, TimeMs: s.TimeMs, Value: s.Value, Field: s.Field, own: own}
		},
	}
	podCodec = runCodec[heldPod, attribution.PodInfo, snapPod]{
		kind:   chunkPods,
		labels: func(h *heldPod) *attribution.PodInfo { return h.labels },
		toSnap: func(h *heldPod, set uint32) snapPod {
			return snapPod{Set: set, TimeMs: h.TimeMs, RequestMilli: h.RequestMilli, Phase: h.Phase}
		},
		put:   func(c *bufferChunk, sets []attribution.PodInfo, items []snapPod) { c.PodSets, c.Pods = sets, items },
		get:   func(c *bufferChunk) ([]attribution.PodInfo, []snapPod) { return c.PodSets, c.Pods },
		setOf: func(s snapPod) uint32 { return s.Set },
		fromSnp: func(s snapPod, l *attribution.PodInfo, own uint32) heldPod {
			return heldPod{labels: l, TimeMs: s.TimeMs, RequestMilli: s.RequestMilli, Phase: s.Phase, own: own}
		},
	}
	queueCodec = runCodec[heldQueue, attribution.QueueSample, snapQueue]{
		kind:   chunkQueues,
		labels: func(h *heldQueue) *attribution.QueueSample { return h.labels },
		toSnap: func(h *heldQueue, set uint32) snapQueue {
			return snapQueue{Set: set, TimeMs: h.TimeMs, Value: h.Value, Le: h.Le, Metric: h.Metric}
		},
		put: func(c *bufferChunk, sets []attribution.QueueSample, items []snapQueue) {
			c.QueueSets, c.Queues = sets, items
		},
		get:   func(c *bufferChunk) ([]attribution.QueueSample, []snapQueue) { return c.QueueSets, c.Queues },
		setOf: func(s snapQueue) uint32 { return s.Set },
		fromSnp: func(s snapQueue, l *attribution.QueueSample, own uint32) heldQueue {
			return heldQueue{labels: l, TimeMs: s.TimeMs, Value: s.Value, Le: s.Le, Metric: s.Metric, own: own}
		},
	}
)

// encodeRuns writes the waiting items of q as chunks.
func encodeRuns[T, L, S any](enc *gob.Encoder, q *timeQueue[T], c runCodec[T, L, S]) error {
	ids := make(map[*L]uint32)
	for _, r := range q.heap {
		for start := r.head; start < len(r.items); start += chunkItems {
			items := r.items[start:min(start+chunkItems, len(r.items))]
			var sets []L
			snaps := make([]S, len(items))
			for i := range items {
				l := c.labels(&items[i])
				id, ok := ids[l]
				if !ok {
					id = uint32(len(ids))
					ids[l] = id
					sets = append(sets, *l)
				}
				snaps[i] = c.toSnap(&items[i], id)
			}
			chunk := bufferChunk{Kind: c.kind, Seq: r.seq}
			c.put(&chunk, sets, snaps)
			if err := enc.Encode(&chunk); err != nil {
				return err
			}
		}
	}
	return nil
}

// runReader rebuilds one kind's runs from chunks.
type runReader[T, L, S any] struct {
	c    runCodec[T, L, S]
	sets []*L
	own  []uint32 // what each set cost, given to the first item that uses it
	runs map[uint64]*timeRun[T]
}

func (rr *runReader[T, L, S]) add(chunk *bufferChunk) error {
	sets, items := rr.c.get(chunk)
	for i := range sets {
		l, own := rr.c.hold(&sets[i])
		rr.sets, rr.own = append(rr.sets, l), append(rr.own, own)
	}
	if rr.runs == nil {
		rr.runs = make(map[uint64]*timeRun[T])
	}
	r := rr.runs[chunk.Seq]
	if r == nil {
		r = &timeRun[T]{seq: chunk.Seq}
		rr.runs[chunk.Seq] = r
	}
	for _, s := range items {
		id := rr.c.setOf(s)
		if int(id) >= len(rr.sets) {
			return fmt.Errorf("snapshot item names label set %d of %d", id, len(rr.sets))
		}
		r.items = append(r.items, rr.c.fromSnp(s, rr.sets[id], rr.own[id]))
		rr.own[id] = 0
	}
	return nil
}

// into makes the runs read q's waiting items.
func (rr *runReader[T, L, S]) into(q *timeQueue[T], at, size func(*T) int64) {
	*q = timeQueue[T]{at: at, size: size}
	for _, r := range rr.runs {
		if len(r.items) == 0 {
			continue
		}
		q.heap = append(q.heap, r)
		q.n += len(r.items)
		for i := range r.items {
			q.bytes += size(&r.items[i])
		}
		q.seq = max(q.seq, r.seq)
		q.up(len(q.heap) - 1)
	}
}

// encodeBuffer writes the reorder buffer after a snapshot's header.
func (st *state) encodeBuffer(enc *gob.Encoder) error {
	if err := encodeRuns(enc, &st.samples, sampleCodec); err != nil {
		return err
	}
	if err := encodeRuns(enc, &st.pods, podCodec); err != nil {
		return err
	}
	if err := encodeRuns(enc, &st.queues, queueCodec); err != nil {
		return err
	}
	return enc.Encode(&bufferChunk{Kind: chunkEnd})
}

// decodeBuffer reads the reorder buffer after a snapshot's header into
// st, its label sets interned in st.sets.
func (st *state) decodeBuffer(dec *gob.Decoder) error {
	samples := runReader[heldSample, attribution.Sample, snapSample]{c: sampleCodec}
	samples.c.hold = func(l *attribution.Sample) (*attribution.Sample, uint32) {
		h := st.sets.hold(l)
		return h.labels, h.own
	}
	pods := runReader[heldPod, attribution.PodInfo, snapPod]{c: podCodec}
	pods.c.hold = func(l *attribution.PodInfo) (*attribution.PodInfo, uint32) {
		h := st.sets.holdPod(l)
		return h.labels, h.own
	}
	queues := runReader[heldQueue, attribution.QueueSample, snapQueue]{c: queueCodec}
	queues.c.hold = func(l *attribution.QueueSample) (*attribution.QueueSample, uint32) {
		h := st.sets.holdQueue(l)
		return h.labels, h.own
	}
	for {
		var chunk bufferChunk
		if err := dec.Decode(&chunk); err != nil {
			return fmt.Errorf("read the reorder buffer: %w", err)
		}
		var err error
		switch chunk.Kind {
		case chunkEnd:
			samples.into(&st.samples, sampleMs, sampleBytes)
			pods.into(&st.pods, podMs, podBytes)
			queues.into(&st.queues, queueMs, queueBytes)
			return nil
		case chunkSamples:
			err = samples.add(&chunk)
		case chunkPods:
			err = pods.add(&chunk)
		case chunkQueues:
			err = queues.add(&chunk)
		default:
			err = fmt.Errorf("chunk of kind %d", chunk.Kind)
		}
		if err != nil {
			return fmt.Errorf("read the reorder buffer: %w", err)
		}
	}
}
