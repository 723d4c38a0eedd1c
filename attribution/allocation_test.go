package attribution

import (
	"cmp"
	"slices"
	"testing"
	"time"
	"unsafe"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

func allocationModel() *Model {
	h100 := func(node, idx string) GPU {
		return GPU{Node: node, Index: idx, Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000}
	}
	return &Model{
		Cluster: "lab",
		GPUs: []GPU{h100("g1", "0"), h100("g1", "1"), h100("g2", "0"), h100("g2", "1"),
			{Node: "m1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100-mig", RateMicrosPerHour: 7_000_000,
				MIG: []string{"3g.40gb", "3g.40gb", "1g.10gb"}}},
		LocalQueues: map[QueueRef]string{
			{"train", "training"}: "research", {"vision", "training-v"}: "vision", {"serve", "serving"}: "serving",
		},
		ClusterQueueTeams: map[string]string{"research": "ml", "vision": "vision", "serving": "nlp"},
		NamespaceTeams:    map[string]string{"train": "ml", "infer": "nlp", "vision": "vision", "serve": "nlp"},
		Quotas: map[QuotaRef]int64{
			{"research", "h100"}: QuotaUnitsPerGPU, {"vision", "h100"}: QuotaUnitsPerGPU, {"serving", "h100-mig"}: 12,
		},
	}
}

// allocationFeed is the hour testdata/allocation.csv describes, in time
// order.
func allocationFeed() []event {
	var out []event
	ms := func(sec int) int64 { return t0.UnixMilli() + int64(sec)*1000 }
	dcgm := func(sec int, node, gpu, prof, inst, ns, pod, queue, ens, epod string, gr float64) {
		out = append(out, event{s: &Sample{TimeMs: ms(sec), Node: node, GPU: gpu, Profile: prof, Instance: inst,
			Namespace: ns, Pod: pod, Queue: queue, ExporterNamespace: ens, ExporterPod: epod, Field: FieldGREngineActive, Value: gr}})
	}
	for sec := 0; sec < 3600; sec += 15 {
		if sec < 1800 {
			dcgm(sec, "g1", "0", "", "", "train", "a", "training", "", "", 0.5)
		}
		switch {
		case sec < 1200:
			dcgm(sec, "g1", "1", "", "", "infer", "b", "", "gpu-operator", "dcgm-exporter-aaaa", 1)
		case sec >= 1800:
			dcgm(sec, "g1", "1", "", "", "infer", "b", "", "gpu-operator", "dcgm-exporter-bbbb", 1)
		}
		dcgm(sec, "g2", "0", "", "", "", "", "", "", "", 0)
		dcgm(sec, "g2", "1", "", "", "", "", "", "", "", 0.9)
		dcgm(sec, "m1", "0", "3g.40gb", "1", "serve", "d", "serving", "gpu-operator", "dcgm-exporter-mmmm", 0.6)
		dcgm(sec, "m1", "0", "3g.40gb", "2", "gpu-operator", "dcgm-exporter-mmmm", "", "", "", 0)
		dcgm(sec, "m1", "0", "1g.10gb", "7", "gpu-operator", "dcgm-exporter-mmmm", "", "", "", 0)
	}
	ksm := func(sec int, ns, pod, node, queue, kind string, milli int64) {
		out = append(out,
			event{p: &PodInfo{TimeMs: ms(sec), Namespace: ns, Pod: pod, Phase: PhaseRunning}},
			event{p: &PodInfo{TimeMs: ms(sec), Namespace: ns, Pod: pod, Node: node, Queue: queue}})
		if milli > 0 {
			out = append(out, event{p: &PodInfo{TimeMs: ms(sec), Namespace: ns, Pod: pod, Node: node, Container: "main", Kind: kind, RequestMilli: milli}})
		}
	}
	for sec := 0; sec < 3600; sec += 30 {
		ksm(sec, "train", "a", "g1", "training", KindGPU, 1000)
		ksm(sec, "infer", "b", "g1", "", KindGPU, 1000)
		ksm(sec, "vision", "c", "g2", "training-v", KindGPU, 1000)
		ksm(sec, "serve", "d", "m1", "serving", MIGKind("3g.40gb"), 1000)
		ksm(sec, "gpu-operator", "dcgm-exporter-mmmm", "m1", "", "", 0)
	}
	slices.SortStableFunc(out, func(a, b event) int { return cmp.Compare(a.timeMs(), b.timeMs()) })
	return out
}

func TestAllocationCSV(t *testing.T) {
	m := allocationModel()
	a, err := New(m, Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range allocationFeed() {
		feedTo(a, ev)
	}
	rows, wls := a.Emit(t0.Add(time.Hour).UnixMilli())
	want := readLedgerCSV(t, "testdata/allocation.csv")
	if diff := gocmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-3)); diff != "" {
		t.Errorf("ledger differs from testdata/allocation.csv (-want +got):\n%s", diff)
	}
	checkReconciles(t, m, rows)
	for _, w := range wls {
		if w.Namespace == "gpu-operator" {
			t.Errorf("the exporter's pod was charged: %+v", w)
		}
	}
	if s := a.Stats(); len(s.Rejected) != 0 || s.UnplacedMs != 0 {
		t.Errorf("rejected %v, unplaced %d ms; want none", s.Rejected, s.UnplacedMs)
	}
}

// TestAllocationWithoutKubeStateMetrics: the same DCGM series without
// kube-state-metrics cannot know who held the unobserved time: it is
// unallocated, and the relabelled free series are still not charged to the
// exporter's pod (learned from the held series of the same exporter).
func TestAllocationWithoutKubeStateMetrics(t *testing.T) {
	m := allocationModel()
	a, _ := New(m, Options{StartMs: t0.UnixMilli()})
	for _, ev := range allocationFeed() {
		if ev.s != nil {
			feedTo(a, ev)
		}
	}
	rows, _ := a.Emit(t0.Add(time.Hour).UnixMilli())
	checkReconciles(t, m, rows)
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Team] += r.CostMicros
		if r.UnmeasuredCostMicros != 0 {
			t.Errorf("unmeasured cost without kube-state-metrics: %+v", r)
		}
	}
	want := map[string]int64{
		// g1/0 1800-3600 s, g1/1 1200-1800 s, all of g2, 4 MIG slices.
		ledger.TeamUnallocated: 1_800_000 + 600_000 + 7_200_000 + 4_000_000,
		"ml":                   1_800_000,
		"nlp":                  3_000_000 + 3_000_000,
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("cost per team (-want +got):\n%s", diff)
	}
}

// TestInputBuffersReused: samples and pod facts whose strings alias a parse
// buffer (as ingest passes them) leave nothing pointing into it: the buffer
// is scribbled over after every call, and the ledger is the one the same
// facts give from strings of their own.
func TestInputBuffersReused(t *testing.T) {
	m := allocationModel()
	want, _ := New(m, Options{StartMs: t0.UnixMilli()})
	got, _ := New(m, Options{StartMs: t0.UnixMilli()})
	buf := make([]byte, 0, 1024)
	alias := func(s string) string {
		if s == "" {
			return ""
		}
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[start], len(s))
	}
	scribble := func() {
		for i := range buf {
			buf[i] = '#'
		}
		buf = buf[:0]
	}
	for _, ev := range allocationFeed() {
		feedTo(want, ev)
		if ev.s != nil {
			s := *ev.s
			s.Node, s.GPU, s.Profile, s.Instance = alias(s.Node), alias(s.GPU), alias(s.Profile), alias(s.Instance)
			s.Namespace, s.Pod, s.Queue = alias(s.Namespace), alias(s.Pod), alias(s.Queue)
			s.ExporterNamespace, s.ExporterPod = alias(s.ExporterNamespace), alias(s.ExporterPod)
			got.Add(&s)
		} else {
			p := *ev.p
			p.Namespace, p.Pod, p.Queue, p.Node = alias(p.Namespace), alias(p.Pod), alias(p.Queue), alias(p.Node)
			p.OwnerKind, p.OwnerName, p.Container, p.Kind = alias(p.OwnerKind), alias(p.OwnerName), alias(p.Container), alias(p.Kind)
			got.AddPod(p)
		}
		scribble()
	}
	until := t0.Add(time.Hour).UnixMilli()
	wantRows, wantWls := want.Emit(until)
	gotRows, gotWls := got.Emit(until)
	if diff := gocmp.Diff(wantRows, gotRows); diff != "" {
		t.Errorf("rows from reused buffers (-own strings +aliased):\n%s", diff)
	}
	if diff := gocmp.Diff(wantWls, gotWls); diff != "" {
		t.Errorf("workload rows from reused buffers (-own strings +aliased):\n%s", diff)
	}
}
