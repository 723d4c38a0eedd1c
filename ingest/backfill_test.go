package ingest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// gapModel is one H100 at 3.60 an hour (1,000 micro-units a second).
func gapModel() *attribution.Model {
	return &attribution.Model{Cluster: "lab",
		GPUs:           []attribution.GPU{{Node: "n1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000}},
		NamespaceTeams: map[string]string{"research": "ml"}}
}

// gapFile writes 01:00-05:00 of one GPU held by research/train-0, scraped
// every 15 s, with no scrape between 02:58:00 and 03:02:00: a gap of 4
// minutes, under the 5-minute staleness bound, across the 03:00 boundary.
func gapFile(t *testing.T) string {
	t.Helper()
	var b []byte
	start := simStart.Add(time.Hour)
	gapFrom, gapTo := simStart.Add(2*time.Hour+58*time.Minute), simStart.Add(3*time.Hour+2*time.Minute)
	for at := start; at.Before(start.Add(4 * time.Hour)); at = at.Add(15 * time.Second) {
		if at.After(gapFrom) && at.Before(gapTo) {
			continue
		}
		b = fmt.Appendf(b, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",Hostname=\"n1\",namespace=\"research\",pod=\"train-0\"} 1 %d\n", at.UnixMilli())
	}
	path := filepath.Join(t.TempDir(), "gap.prom")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBackfillChunksAndLiveAgree: the 4-minute gap at 03:00 is bridged by
// the sample at 02:58, whatever the -chunk: 02:58-03:00 in hour 02, 03:00-
// 03:02 in hour 03. Every hour is ml's, all of it: 3,600 GPU-seconds,
// 3,600,000 micro-units, all active. (Closed at the chunk end, as before,
// the sample at 02:58 counted 15 s and 225,000 went to unallocated.) The
// live pipeline fed the same scrapes writes the same ledger.
func TestBackfillChunksAndLiveAgree(t *testing.T) {
	m := gapModel()
	path := gapFile(t)
	start, end := simStart.Add(time.Hour), simStart.Add(5*time.Hour)
	var want []ledger.Row
	for h := start; h.Before(end); h = h.Add(time.Hour) {
		want = append(want, ledger.Row{Key: ledger.Key{Hour: h, Cluster: "lab", Team: "ml", Namespace: "research", Flavor: "h100"},
			GPUSeconds: 3600, ActiveGPUSeconds: 3600, CostMicros: 3_600_000})
	}
	for _, chunk := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 26 * time.Hour} {
		store := openStore(t)
		_, err := Backfill(context.Background(), BackfillOptions{Source: &FileSource{Path: path}, Store: store, Model: m,
			Start: start, End: end, Chunk: chunk})
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := ledgertest.Dump(t, store, start, end)
		if diff := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("-chunk %s (-want +got):\n%s", chunk, diff)
		}
	}
}

// TestRelabelledPodLabelsMoney: kube_pod_labels scraped with honorLabels
// false names the pod in exported_namespace/exported_pod; its queue still
// reaches the ledger. research/a holds both H100s of n1 (3.60 an hour
// each) all hour at full activity; its queue training is ClusterQueue
// research (team ml), whose nominal quota is 1 GPU: half of its 7,200,000
// is borrowed, 3,600,000 and 3,600 GPU-seconds on each row. (Read from
// namespace/pod, the labels named kube-state-metrics' own pod: no queue,
// no ClusterQueue, nothing borrowed.)
func TestRelabelledPodLabelsMoney(t *testing.T) {
	m := gapModel()
	m.GPUs = append(m.GPUs, attribution.GPU{Node: "n1", Index: "1", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000})
	m.LocalQueues = map[attribution.QueueRef]string{{Namespace: "research", Name: "training"}: "research"}
	m.ClusterQueueTeams = map[string]string{"research": "ml"}
	m.Quotas = map[attribution.QuotaRef]int64{{ClusterQueue: "research", Flavor: "h100"}: attribution.QuotaUnitsPerGPU}
	var b []byte
	start := simStart
	for at := start; at.Before(start.Add(time.Hour)); at = at.Add(15 * time.Second) {
		ms := at.UnixMilli()
		for _, gpu := range []string{"0", "1"} {
			b = fmt.Appendf(b, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=%q,Hostname=\"n1\",exported_namespace=\"research\",exported_pod=\"a\",namespace=\"gpu-operator\",pod=\"dcgm-exporter-x\"} 1 %d\n", gpu, ms)
		}
		b = fmt.Appendf(b, "kube_pod_labels{namespace=\"monitoring\",pod=\"kube-state-metrics-0\",exported_namespace=\"research\",exported_pod=\"a\",label_kueue_x_k8s_io_queue_name=\"training\"} 1 %d\n", ms)
	}
	path := filepath.Join(t.TempDir(), "relabelled.prom")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	store := openStore(t)
	if _, err := Backfill(context.Background(), BackfillOptions{Source: &FileSource{Path: path}, Store: store, Model: m,
		Start: start, End: start.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	rows, _ := ledgertest.Dump(t, store, start, start.Add(time.Hour))
	key := ledger.Key{Hour: start, Cluster: "lab", Team: "ml", Namespace: "research", LocalQueue: "training", ClusterQueue: "research", Flavor: "h100"}
	borrowed := key
	borrowed.Borrowed = true
	want := []ledger.Row{
		{Key: key, GPUSeconds: 3600, ActiveGPUSeconds: 3600, CostMicros: 3_600_000},
		{Key: borrowed, GPUSeconds: 3600, ActiveGPUSeconds: 3600, CostMicros: 3_600_000},
	}
	if diff := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestFreeNodeUnderRelabelledJob: dcgm-exporter scraped with honorLabels
// false (holders in exported_*, the exporter in namespace and pod), node
// n1 with a GPU held, node n2 with its GPUs all free: n2's series carry
// only its exporter's pod, which no series ever names apart from a holder.
// The scrape job shows the renaming (n1's series), so n2's GPUs are free:
// unallocated, not billed to the exporter's pod (_unowned, as before). A
// feed without the job label bills it as before.
func TestFreeNodeUnderRelabelledJob(t *testing.T) {
	m := gapModel()
	m.GPUs = append(m.GPUs, attribution.GPU{Node: "n2", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000})
	m.NamespaceTeams = map[string]string{"research": "ml"}
	run := func(job string) []ledger.Row {
		t.Helper()
		var b []byte
		for at := simStart; at.Before(simStart.Add(time.Hour)); at = at.Add(15 * time.Second) {
			ms := at.UnixMilli()
			b = fmt.Appendf(b, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",Hostname=\"n1\",exported_namespace=\"research\",exported_pod=\"a\",namespace=\"gpu-operator\",pod=\"nvidia-dcgm-exporter-n1\"%s} 1 %d\n", job, ms)
			b = fmt.Appendf(b, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",Hostname=\"n2\",namespace=\"gpu-operator\",pod=\"nvidia-dcgm-exporter-n2\"%s} 0 %d\n", job, ms)
		}
		path := filepath.Join(t.TempDir(), "relabelled.prom")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		store := openStore(t)
		if _, err := Backfill(context.Background(), BackfillOptions{Source: &FileSource{Path: path}, Store: store, Model: m,
			Start: simStart, End: simStart.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		rows, _ := ledgertest.Dump(t, store, simStart, simStart.Add(time.Hour))
		return rows
	}
	teams := func(rows []ledger.Row) map[string]int64 {
		out := map[string]int64{}
		for _, r := range rows {
			out[r.Team] += r.CostMicros
		}
		return out
	}
	// n1's GPU held by research/a, n2's free.
	want := map[string]int64{"ml": 3_600_000, ledger.TeamUnallocated: 3_600_000}
	if got := teams(run(`,job="gpu-operator/nvidia-dcgm-exporter"`)); !maps.Equal(got, want) {
		t.Errorf("with the job label: %v, want %v", got, want)
	}
	want = map[string]int64{"ml": 3_600_000, ledger.TeamUnowned: 3_600_000}
	if got := teams(run("")); !maps.Equal(got, want) {
		t.Errorf("without a job label: %v, want %v (the exporter's pod taken for a holder, as before)", got, want)
	}
}
