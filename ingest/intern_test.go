package ingest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/attribution"
)

// fill sets every field of the struct v points to a value of its own, so
// that a field the reorder buffer does not carry shows as a difference.
func fill(v any) {
	e := reflect.ValueOf(v).Elem()
	for i := range e.NumField() {
		f := e.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-%d", e.Type().Field(i).Name, i))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Float32, reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		default:
			panic(fmt.Sprintf("fill: field %s of kind %s", e.Type().Field(i).Name, f.Kind()))
		}
	}
}

// TestHeldCarriesEveryField: what leaves the reorder buffer is what came
// in, field for field, for each kind of item.
func TestHeldCarriesEveryField(t *testing.T) {
	var ls labelSets
	var s attribution.Sample
	fill(&s)
	h := ls.hold(&s)
	if got := h.sample(); !reflect.DeepEqual(got, s) {
		t.Errorf("sample: %s", cmp.Diff(s, got))
	}
	var p attribution.PodInfo
	fill(&p)
	hp := ls.holdPod(&p)
	if got := hp.pod(); !reflect.DeepEqual(got, p) {
		t.Errorf("pod: %s", cmp.Diff(p, got))
	}
	var q attribution.QueueSample
	fill(&q)
	hq := ls.holdQueue(&q)
	if got := hq.queue(); !reflect.DeepEqual(got, q) {
		t.Errorf("queue: %s", cmp.Diff(q, got))
	}
}

// TestLabelSetsShareAndForget: equal labels from different buffers share
// one set; values are not taken for others by where they split; a set no
// item used is forgotten after two rotations, while an item still held
// keeps its labels.
func TestLabelSetsShareAndForget(t *testing.T) {
	var ls labelSets
	buf := []byte("node-a0")
	a := attribution.Sample{Node: string(buf[:6]), GPU: string(buf[6:]), TimeMs: 1, Value: 1}
	b := attribution.Sample{Node: "node-a", GPU: "0", TimeMs: 2, Value: 2}
	ha, hb := ls.hold(&a), ls.hold(&b)
	if ha.labels != hb.labels {
		t.Fatal("equal labels got two sets")
	}
	// The same bytes split elsewhere are other labels.
	c := attribution.Sample{Node: "node-", GPU: "a0"}
	if hc := ls.hold(&c); hc.labels == ha.labels {
		t.Fatal(`("node-", "a0") taken for ("node-a", "0")`)
	}
	if got := ls.samples.len(); got != 2 {
		t.Fatalf("%d sets, want 2", got)
	}
	ls.maybeRotate(internEvery, 0)
	if got := ls.samples.len(); got != 2 {
		t.Fatalf("after one rotation: %d sets, want 2 (the previous generation)", got)
	}
	// b's labels are used again: they are carried into the new generation.
	if again := ls.hold(&b); again.labels != ha.labels {
		t.Fatal("a set of the previous generation was made again")
	}
	ls.maybeRotate(2*internEvery, 0)
	if got := ls.samples.len(); got != 1 {
		t.Fatalf("after two rotations: %d sets, want 1 (the one used since the first)", got)
	}
	if got := ha.sample(); got != a {
		t.Fatalf("held item changed: %+v, want %+v", got, a)
	}
}

// TestLabelSetsBounded: a flood of new label sets within one rotation
// period rotates the tables early, so they stay within a few times the
// live sets.
func TestLabelSetsBounded(t *testing.T) {
	var ls labelSets
	peak := 0
	for i := range 500_000 {
		s := attribution.Sample{Node: fmt.Sprint("node-", i), GPU: "0"}
		ls.hold(&s)
		ls.maybeRotate(0, 10)
		peak = max(peak, ls.samples.len())
	}
	if peak > 2<<16+100 {
		t.Fatalf("%d label sets held at once for a flood of one-off series; want at most %d", peak, 2<<16+100)
	}
}
