package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// TestUpdateWeightsCountIdleCost: the controller passes -idlePenalty to
// both weights it writes. Teams a and b paid the same for an H100 hour,
// but half of a's was paid while its GPU sat idle. Without the penalty
// their LocalQueues (on one ClusterQueue) and their ClusterQueues (in one
// cohort) keep equal weights; with -idlePenalty 1 a's idle cost counts
// twice, so both of a's queues get a smaller weight than b's.
func TestUpdateWeightsCountIdleCost(t *testing.T) {
	hour := testNow.Add(-2 * time.Hour).Truncate(time.Hour)
	row := func(team, cq string, idle int64) ledger.Row {
		return ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "test", Team: team, Namespace: team, LocalQueue: "q", ClusterQueue: cq, Flavor: "h100"},
			GPUSeconds: 3600, CostMicros: 6_880_000, IdleCostMicros: idle}
	}
	lq := func(ns, cq string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "q", "namespace": ns},
			"spec":     map[string]any{"clusterQueue": cq},
			"status": map[string]any{"fairSharing": map[string]any{"admissionFairSharingStatus": map[string]any{
				"consumedResources": map[string]any{"nvidia.com/gpu": "8"}}}}}}
	}
	cq := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "ClusterQueue",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"cohortName": "c", "resourceGroups": []any{
				map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{
					map[string]any{"name": "h100", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8"}}}}}}}}}
	}
	teams := Teams{Cluster: "test", ByNamespace: map[string]string{"a": "a", "b": "b"},
		ByClusterQueue:        map[string]string{"cq-a": "a", "cq-b": "b"},
		Entitlement:           map[string]float64{"a": 1, "b": 1},
		PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	// weight reads what the controller wrote (1 when it wrote nothing).
	weight := func(t *testing.T, dyn *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, ns, name string) float64 {
		t.Helper()
		u := getObject(t, dyn, gvr, ns, name)
		if w, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight"); ok {
			return quantity(w)
		}
		return 1
	}
	for _, penalty := range []float64{0, 1} {
		// The LocalQueues share a ClusterQueue, so their weights are
		// compared; the ClusterQueues share a cohort. Each ledger row
		// names the ClusterQueue its team's spend is counted under.
		store := embeddedtest.Open(t, row("a", "cq-a", 3_440_000), row("b", "cq-b", 0))
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{clusterQsGVR: "ClusterQueueList", localQueuesGVR: "LocalQueueList", workloadsGVR: "WorkloadList", cohortsGVR: "CohortList"},
			lq("a", "shared"), lq("b", "shared"), cq("cq-a"), cq("cq-b"))
		c := &Controller{o: Options{Store: store, HalfLife: time.Hour, Hysteresis: 0.1, ClusterQueueWeights: true, IdlePenalty: penalty,
			Now: func() time.Time { return testNow }, Log: slog.New(slog.DiscardHandler)},
			dyn: dyn, core: kubefake.NewClientset(), teams: teams, checks: map[string]bool{}, answeredReady: map[string]time.Time{},
			weights: map[string]*queueWeight{}, cqWeights: map[string]*queueWeight{}}
		if err := c.UpdateWeights(context.Background()); err != nil {
			t.Fatal(err)
		}
		lqA, lqB := weight(t, dyn, localQueuesGVR, "a", "q"), weight(t, dyn, localQueuesGVR, "b", "q")
		cqA, cqB := weight(t, dyn, clusterQsGVR, "", "cq-a"), weight(t, dyn, clusterQsGVR, "", "cq-b")
		if penalty == 0 && (lqA != lqB || cqA != cqB) {
			t.Errorf("no penalty: LocalQueue weights a %g, b %g; ClusterQueue weights a %g, b %g; want each pair equal (equal spend)", lqA, lqB, cqA, cqB)
		}
		if penalty > 0 && (lqA >= lqB || cqA >= cqB) {
			t.Errorf("penalty %g: LocalQueue weights a %g, b %g; ClusterQueue weights a %g, b %g; want a's below b's (a paid for idle GPUs)",
				penalty, lqA, lqB, cqA, cqB)
		}
	}
}
