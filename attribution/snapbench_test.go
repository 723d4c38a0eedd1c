package attribution

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSnapshot saves and restores the state of a 10,000-GPU cluster
// half an hour into an hour, every GPU held by a pod kube-state-metrics
// reports: what the live pipeline does every minute.
func BenchmarkSnapshot(b *testing.B) {
	m := &Model{Cluster: "fleet", NamespaceTeams: map[string]string{}}
	for n := range 1250 {
		for g := range 8 {
			m.GPUs = append(m.GPUs, GPU{Node: fmt.Sprintf("node-%05d", n), Index: strconv.Itoa(g), Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 6_880_000})
		}
	}
	a, _ := New(m, Options{StartMs: t0.UnixMilli()})
	for sec := 0; sec < 1800; sec += 15 {
		ms := t0.UnixMilli() + int64(sec)*1000
		for n := range 1250 {
			node, pod := fmt.Sprintf("node-%05d", n), fmt.Sprintf("train-%05d", n)
			a.AddPod(PodInfo{TimeMs: ms, Namespace: "ns", Pod: pod, Phase: PhaseRunning})
			a.AddPod(PodInfo{TimeMs: ms, Namespace: "ns", Pod: pod, Node: node, Container: "c", Kind: KindGPU, RequestMilli: 8000})
			for g := range 8 {
				s := Sample{TimeMs: ms, Node: node, GPU: strconv.Itoa(g), Namespace: "ns", Pod: pod, Field: FieldGREngineActive, Value: 0.5}
				a.Add(&s)
			}
		}
	}
	var size int
	var restore time.Duration
	b.ReportAllocs()
	for b.Loop() {
		snap, err := a.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		size = len(snap)
		t := time.Now()
		if _, _, err := Restore(m, Options{}, snap); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(t)
	}
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
}
