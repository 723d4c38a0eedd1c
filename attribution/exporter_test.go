package attribution

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestRelabelledJobSurvivesSnapshot: a scrape job learnt to rename holders
// to exported_* (node g1's held GPU), then the Attributor saved and
// restored, then an hour of g2's free GPU alone, named by its exporter's
// pod with the job's label: unallocated, not billed to the exporter's
// namespace, before the restore and after it; and a series of another job
// that names a pod plainly still makes it a holder.
func TestRelabelledJobSurvivesSnapshot(t *testing.T) {
	m := &Model{Cluster: "lab", GPUs: []GPU{
		{Node: "g1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
		{Node: "g2", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
		{Node: "g3", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
	}, NamespaceTeams: map[string]string{"train": "ml", "gpu-operator": "platform"}}
	a, err := New(m, Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	add := func(a *Attributor, sec int, node, ns, pod, ens, epod, job string) {
		a.Add(&Sample{TimeMs: t0.UnixMilli() + int64(sec)*1000, Node: node, GPU: "0", Namespace: ns, Pod: pod,
			ExporterNamespace: ens, ExporterPod: epod, Job: job, Field: FieldGREngineActive, Value: 0.5})
	}
	for sec := 0; sec < 7200; sec += 15 {
		if sec < 60 { // held on g1 for a minute: the job is learnt
			add(a, sec, "g1", "train", "a", "gpu-operator", "dcgm-exporter-g1", "dcgm")
		}
		add(a, sec, "g3", "train", "b", "", "", "honoring") // another job, honorLabels true
		if sec == 1800 {
			b, err := a.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if a, _, err = Restore(m, Options{}, b); err != nil {
				t.Fatal(err)
			}
		}
		add(a, sec, "g2", "gpu-operator", "dcgm-exporter-g2", "", "", "dcgm")
	}
	rows, _ := a.Emit(t0.Add(2 * time.Hour).UnixMilli())
	cost := map[string]int64{}
	for _, r := range rows {
		if r.Hour.Equal(t0.Add(time.Hour)) {
			cost[r.Team] += r.CostMicros
		}
	}
	// The second hour: g1 and g2 free, g3 held by train/b.
	if cost["ml"] != 3_600_000 || cost[ledger.TeamUnallocated] != 2*3_600_000 || cost["platform"] != 0 {
		t.Errorf("the hour after the restore: %v; want ml 3.6, unallocated 7.2, platform nothing", cost)
	}
}

// TestForgetPods: past MaxPods, a flood of pods that only name a queue (as
// a hostile sender's kube_pod_labels would) makes room by forgetting
// others like them, the least recently reported first: the pods with GPU
// requests stay, and so does the newest of the flood.
func TestForgetPods(t *testing.T) {
	m := &Model{Cluster: "lab", GPUs: []GPU{{Node: "g1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 1}}}
	a, err := New(m, Options{StartMs: t0.UnixMilli(), MaxPods: 100})
	if err != nil {
		t.Fatal(err)
	}
	ms := t0.UnixMilli()
	for i := range 10 {
		a.AddPod(PodInfo{TimeMs: ms, Namespace: "train", Pod: fmt.Sprintf("real-%d", i), Node: "g1", Container: "main", Kind: KindGPU, RequestMilli: 1000})
	}
	for i := range 1000 {
		a.AddPod(PodInfo{TimeMs: ms + int64(i), Namespace: "flood", Pod: fmt.Sprintf("fake-%d", i), Queue: "q"})
	}
	if n := a.Pods(); n > 100 {
		t.Errorf("%d pods remembered, MaxPods 100", n)
	}
	for i := range 10 {
		if a.pods[podKey{"train", fmt.Sprintf("real-%d", i)}] == nil {
			t.Errorf("train/real-%d, with a GPU request, was forgotten", i)
		}
	}
	if a.pods[podKey{"flood", "fake-999"}] == nil || a.pods[podKey{"flood", "fake-0"}] != nil {
		t.Error("the newest of the flood forgotten, or its oldest kept")
	}
	if got := a.Stats().PodsForgotten; got != uint64(1010-a.Pods()) {
		t.Errorf("%d forgotten, want %d", got, 1010-a.Pods())
	}
}
