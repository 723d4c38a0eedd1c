package kube

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuledger/gpuledger/ledger"
)

func obj(m map[string]any) unstructured.Unstructured { return unstructured.Unstructured{Object: m} }

// TestPending: pending workloads count in their LocalQueue's ClusterQueue
// with their GPUs and their wait since creation or their last eviction;
// admitted, finished and inactive ones, and those of unknown queues, do
// not.
func TestPending(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	lqs := []unstructured.Unstructured{
		obj(map[string]any{"metadata": map[string]any{"namespace": "nlp", "name": "main"}, "spec": map[string]any{"clusterQueue": "cq-nlp"}}),
	}
	gpus := func(n int64) map[string]any {
		return map[string]any{"podSets": []any{map[string]any{"name": "main", "count": n, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "8"}}}}}}}}}
	}
	wl := func(name string, created time.Duration, spec map[string]any, status map[string]any) unstructured.Unstructured {
		spec["queueName"] = "main"
		m := map[string]any{"metadata": map[string]any{"namespace": "nlp", "name": name, "creationTimestamp": ago(created)}, "spec": spec}
		if status != nil {
			m["status"] = status
		}
		return obj(m)
	}
	cond := func(typ string, at time.Duration) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": typ, "status": "True", "lastTransitionTime": ago(at)}}}
	}
	wls := []unstructured.Unstructured{
		wl("waiting", 2*time.Hour, gpus(2), nil),                              // 16 GPUs, 2 h
		wl("requeued", 5*time.Hour, gpus(1), cond("Evicted", 10*time.Minute)), // 8 GPUs, 10 min
		wl("admitted", time.Hour, gpus(1), map[string]any{"admission": map[string]any{"clusterQueue": "cq-nlp"},
			"conditions": cond("Admitted", 30*time.Minute)["conditions"]}),
		wl("done", time.Hour, gpus(1), map[string]any{"conditions": append(cond("Admitted", 50*time.Minute)["conditions"].([]any),
			cond("Finished", time.Minute)["conditions"].([]any)...)}),
		wl("off", time.Hour, func() map[string]any { s := gpus(1); s["active"] = false; return s }(), nil),
	}
	other := wl("elsewhere", time.Hour, gpus(1), nil)
	other.Object["spec"].(map[string]any)["queueName"] = "unknown"
	wls = append(wls, other)
	p := Pending(wls, lqs, now)
	q := p["cq-nlp"]
	if len(p) != 1 || q == nil || q.GPUs != 24 || len(q.Ages) != 2 || q.Ages[0] != 7200 || q.Ages[1] != 600 {
		t.Fatalf("pending: %+v (cq-nlp %+v); want 24 GPUs waiting 7200 s and 600 s", p, q)
	}
	// The times the ledger gets: every Workload with a GPU request.
	times := WorkloadTimes("prod", wls)
	byName := map[string]ledger.WorkloadTime{}
	for _, w := range times {
		byName[w.Name] = w
	}
	if len(times) != 6 {
		t.Errorf("%d workload times, want 6: %+v", len(times), times)
	}
	for name, want := range map[string]ledger.WorkloadTime{
		"waiting":  {Cluster: "prod", Namespace: "nlp", Name: "waiting", LocalQueue: "main", Resource: "nvidia.com/gpu", Count: 16, Submit: now.Add(-2 * time.Hour)},
		"admitted": {Cluster: "prod", Namespace: "nlp", Name: "admitted", LocalQueue: "main", Resource: "nvidia.com/gpu", Count: 8, Submit: now.Add(-time.Hour), Admit: now.Add(-30 * time.Minute)},
		"done": {Cluster: "prod", Namespace: "nlp", Name: "done", LocalQueue: "main", Resource: "nvidia.com/gpu", Count: 8, Submit: now.Add(-time.Hour),
			Admit: now.Add(-50 * time.Minute), Finish: now.Add(-time.Minute)},
	} {
		if got := byName[name]; !got.Submit.Equal(want.Submit) || got.Admit != want.Admit || got.Finish != want.Finish ||
			got.Count != want.Count || got.Resource != want.Resource || got.LocalQueue != want.LocalQueue || got.Cluster != want.Cluster {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}

	c := &Controller{pending: p, weights: map[string]*queueWeight{}}
	var b strings.Builder
	if err := c.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`gpuledger_pending_workload_gpus{cluster_queue="cq-nlp"} 24`,
		`gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-nlp",le="320"} 0`,
		`gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-nlp",le="640"} 1`,
		`gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-nlp",le="5120"} 1`,
		`gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-nlp",le="10240"} 2`,
		`gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-nlp",le="+Inf"} 2`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}
