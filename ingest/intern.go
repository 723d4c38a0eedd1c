package ingest

import (
	"encoding/binary"
	"unsafe"

	"github.com/gpuledger/gpuledger/attribution"
)

// The reorder buffer keeps each sample as what varies from one sample of
// a series to the next (time, value) and a pointer to its labels, which
// are interned: one copy of each distinct set, shared by every buffered
// sample that carries it. A buffered sample is 32 bytes instead of an
// attribution.Sample's 176, and it no longer keeps the request's label
// values (and with them the whole request's arena) alive for the window.

//
// The buffer counts what it holds in bytes (bufferBytes): each item's own
// size, and the label set it was the first in its generation to use (own:
// a set made or taken on from the generation before), so that a flood of
// distinct series (new pods by the million) costs what it takes, and the
// interned tables' own bytes.

// heldSample is a buffered DCGM sample.
type heldSample struct {
	labels *attribution.Sample // the series' labels; its TimeMs, Field and Value are unused
	TimeMs int64
	Value  float64
	Field  attribution.Field
	own    uint32 // bytes of the label set it brought in
}

func (h *heldSample) sample() attribution.Sample {
	s := *h.labels
	s.TimeMs, s.Value, s.Field = h.TimeMs, h.Value, h.Field
	return s
}

// heldPod is a buffered kube-state-metrics fact.
type heldPod struct {
	labels       *attribution.PodInfo
	TimeMs       int64
	RequestMilli int64
	Phase        attribution.Phase
	own          uint32
}

func (h *heldPod) pod() attribution.PodInfo {
	p := *h.labels
	p.TimeMs, p.RequestMilli, p.Phase = h.TimeMs, h.RequestMilli, h.Phase
	return p
}

// heldQueue is a buffered Kueue, controller or vLLM sample.
type heldQueue struct {
	labels *attribution.QueueSample
	TimeMs int64
	Value  float64
	Le     float64
	Metric attribution.QueueMetric
	own    uint32
}

// Sizes of the buffered items, and what an interned set costs besides its
// key and struct: its map entry in a generation (Go's map: the key's and
// value's words, and the bucket's share).
const (
	heldSampleBytes = int64(unsafe.Sizeof(heldSample{}))
	heldPodBytes    = int64(unsafe.Sizeof(heldPod{}))
	heldQueueBytes  = int64(unsafe.Sizeof(heldQueue{}))
	setEntryBytes   = 48
)

func sampleBytes(h *heldSample) int64 { return heldSampleBytes + int64(h.own) }
func podBytes(h *heldPod) int64       { return heldPodBytes + int64(h.own) }
func queueBytes(h *heldQueue) int64   { return heldQueueBytes + int64(h.own) }

func (h *heldQueue) queue() attribution.QueueSample {
	q := *h.labels
	q.TimeMs, q.Value, q.Le, q.Metric = h.TimeMs, h.Value, h.Le, h.Metric
	return q
}

// interned holds the distinct label sets of one kind of buffered item,
// keyed by their values, each length-prefixed (so that no value can be
// taken for two). The strings of an interned set are parts of its key: one
// allocation a set. Two generations: rotate drops the sets no item used
// since the rotation before (an item still buffered keeps its own set
// alive; the table only forgets it).
type interned[T any] struct {
	key       []byte
	parts     []string
	cur, prev map[string]*T
	// curBytes and prevBytes are what the generations' sets cost: keys,
	// structs and map entries.
	curBytes, prevBytes int64
}

func (in *interned[T]) add(s string) {
	in.key = binary.AppendUvarint(in.key, uint64(len(s)))
	in.key = append(in.key, s...)
}

// get returns the set of the values added since the last get, made by
// build from them (parts of a string that outlives the request) when new,
// and what it cost when it came into this generation (0 when it was
// there already).
func (in *interned[T]) get(build func(parts []string) *T) (*T, uint32) {
	if v, ok := in.cur[string(in.key)]; ok {
		in.key = in.key[:0]
		return v, 0
	}
	k := string(in.key)
	in.key = in.key[:0]
	v, ok := in.prev[k]
	if !ok {
		in.parts = in.parts[:0]
		for rest := k; len(rest) > 0; {
			n, w := binary.Uvarint([]byte(rest[:min(len(rest), binary.MaxVarintLen64)]))
			rest = rest[w:]
			in.parts = append(in.parts, rest[:n])
			rest = rest[n:]
		}
		v = build(in.parts)
	}
	if in.cur == nil {
		in.cur = make(map[string]*T, len(in.prev))
	}
	in.cur[k] = v
	var zero T
	cost := int64(len(k)) + int64(unsafe.Sizeof(zero)) + setEntryBytes
	in.curBytes += cost
	return v, uint32(cost)
}

func (in *interned[T]) len() int { return len(in.cur) + len(in.prev) }

func (in *interned[T]) bytes() int64 { return in.curBytes + in.prevBytes }

func (in *interned[T]) rotate() {
	in.prev, in.cur = in.cur, nil
	in.prevBytes, in.curBytes = in.curBytes, 0
}

// labelSets is the reorder buffer's interned label sets.
type labelSets struct {
	samples interned[attribution.Sample]
	pods    interned[attribution.PodInfo]
	queues  interned[attribution.QueueSample]
	// rotatedMs is the newest sample time at the last rotation.
	rotatedMs int64
}

// internEvery is how much sample time passes between rotations: a set
// no sample used for this long (a pod gone, a device that moved) is
// forgotten within twice it.
const internEvery = 10 * 60 * 1000

// maybeRotate rotates the tables every internEvery of sample time, and
// sooner when the newer generation holds more sets than twice the items
// buffered (no more can be in use) and a margin: a flood of new series
// then costs the tables no more than the buffer's own bound.
func (ls *labelSets) maybeRotate(nowMs int64, buffered int) {
	n := len(ls.samples.cur) + len(ls.pods.cur) + len(ls.queues.cur)
	if nowMs-ls.rotatedMs < internEvery && n <= 2*buffered+1<<16 {
		return
	}
	ls.rotate(nowMs)
}

// rotate starts a new generation of every table.
func (ls *labelSets) rotate(nowMs int64) {
	ls.samples.rotate()
	ls.pods.rotate()
	ls.queues.rotate()
	ls.rotatedMs = nowMs
}

// bytes is what the tables cost.
func (ls *labelSets) bytes() int64 { return ls.samples.bytes() + ls.pods.bytes() + ls.queues.bytes() }

func (ls *labelSets) hold(s *attribution.Sample) heldSample {
	in := &ls.samples
	in.add(s.Node)
	in.add(s.GPU)
	in.add(s.Profile)
	in.add(s.Instance)
	in.add(s.Namespace)
	in.add(s.Pod)
	in.add(s.Queue)
	in.add(s.ExporterNamespace)
	in.add(s.ExporterPod)
	if s.DRA {
		in.add("d")
	} else {
		in.add("")
	}
	in.add(s.Job)
	labels, own := in.get(sampleLabels)
	return heldSample{labels: labels, TimeMs: s.TimeMs, Value: s.Value, Field: s.Field, own: own}
}

func sampleLabels(p []string) *attribution.Sample {
	return &attribution.Sample{Node: p[0], GPU: p[1], Profile: p[2], Instance: p[3], Namespace: p[4], Pod: p[5],
		Queue: p[6], ExporterNamespace: p[7], ExporterPod: p[8], DRA: p[9] != "", Job: p[10]}
}

func (ls *labelSets) holdPod(p *attribution.PodInfo) heldPod {
	in := &ls.pods
	in.add(p.Namespace)
	in.add(p.Pod)
	in.add(p.Queue)
	in.add(p.OwnerKind)
	in.add(p.OwnerName)
	in.add(p.Node)
	in.add(p.Container)
	in.add(p.Kind)
	labels, own := in.get(podLabels)
	return heldPod{labels: labels, TimeMs: p.TimeMs, RequestMilli: p.RequestMilli, Phase: p.Phase, own: own}
}

func podLabels(p []string) *attribution.PodInfo {
	return &attribution.PodInfo{Namespace: p[0], Pod: p[1], Queue: p[2], OwnerKind: p[3], OwnerName: p[4], Node: p[5],
		Container: p[6], Kind: p[7]}
}

func (ls *labelSets) holdQueue(q *attribution.QueueSample) heldQueue {
	in := &ls.queues
	in.add(q.ClusterQueue)
	in.add(q.Namespace)
	in.add(q.Pod)
	in.add(q.Model)
	in.add(q.Series)
	labels, own := in.get(queueLabels)
	return heldQueue{labels: labels, TimeMs: q.TimeMs, Value: q.Value, Le: q.Le, Metric: q.Metric, own: own}
}

func queueLabels(p []string) *attribution.QueueSample {
	return &attribution.QueueSample{ClusterQueue: p[0], Namespace: p[1], Pod: p[2], Model: p[3], Series: p[4]}
}
