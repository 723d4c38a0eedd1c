package kube

import (
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// TestReadClusterQueue: the entitlement is each flavor's nominal GPUs (a
// MIG slice its share of a GPU) at the flavor's price; CPU and memory
// quotas are no GPUs; the weight and cohort are read.
func TestReadClusterQueue(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "llm"},
		"spec": map[string]any{"cohortName": "research", "fairSharing": map[string]any{"weight": "500m"},
			"resourceGroups": []any{
				map[string]any{"coveredResources": []any{"cpu", "nvidia.com/gpu"}, "flavors": []any{
					map[string]any{"name": "h100", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "64"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8"}}},
					map[string]any{"name": "t4", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "32"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(4)}}}}},
				map[string]any{"coveredResources": []any{"nvidia.com/mig-1g.10gb"}, "flavors": []any{
					map[string]any{"name": "h100-mig", "resources": []any{
						map[string]any{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "14"}}}}},
			}}}}
	prices := map[string]int64{"h100": 6_880_000, "t4": 526_000, "h100-mig": 6_880_000}
	q := ReadClusterQueue(u, prices)
	want := 8*6_880_000.0 + 4*526_000.0 + 2*6_880_000.0
	if q.Name != "llm" || q.Cohort != "research" || q.Weight != 0.5 || math.Abs(q.Entitlement-want) > 1e-6 {
		t.Errorf("got %+v, want llm in research, weight 0.5, entitlement %g", q, want)
	}
	q = ReadClusterQueue(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, prices)
	if q.Weight != 1 || q.Cohort != "" || q.Entitlement != 0 {
		t.Errorf("an empty ClusterQueue: got %+v, want weight 1, no cohort, no entitlement", q)
	}
}

// TestClusterQueueWeights: within a cohort, a queue that spent more than
// its entitlement's share of the cohort's spend gets a smaller weight, so
// that Kueue's share (borrowed / weight) puts it behind; queues outside a
// cohort, alone in one, or without an entitlement get none; cohorts are
// weighed apart.
func TestClusterQueueWeights(t *testing.T) {
	qs := []ClusterQueue{
		{Name: "h", Cohort: "c", Entitlement: 100},
		{Name: "t", Cohort: "c", Entitlement: 100},
		{Name: "m", Cohort: "c", Entitlement: 200},
		{Name: "alone", Cohort: "solo", Entitlement: 50},
		{Name: "nocohort", Entitlement: 50},
		{Name: "noprice", Cohort: "c"},
		{Name: "x", Cohort: "d", Entitlement: 10},
		{Name: "y", Cohort: "d", Entitlement: 10},
	}
	// Cohort c spent 800 on 400 of entitlement: 2 per unit. h spent 4 per
	// unit, t 1, m 1.5.
	spend := map[string]float64{"h": 400, "t": 100, "m": 300, "alone": 1e9, "noprice": 1e9, "x": 0, "y": 0}
	w := ClusterQueueWeights(qs, spend)
	for q, want := range map[string]float64{"h": 0.5, "t": 2, "m": 4.0 / 3, "x": 1, "y": 1} {
		if math.Abs(w[q]-want) > 1e-12 {
			t.Errorf("%s: weight %g, want %g", q, w[q], want)
		}
	}
	for _, q := range []string{"alone", "nocohort", "noprice"} {
		if _, ok := w[q]; ok {
			t.Errorf("%s: weight %g, want none", q, w[q])
		}
	}
	// Kueue's key for equal borrowing: borrowed / weight. h, which spent
	// the most per entitlement, goes last.
	if !(1/w["t"] < 1/w["m"] && 1/w["m"] < 1/w["h"]) {
		t.Errorf("weights %v do not order the borrowers t, m, h", w)
	}
}

// TestReplayTeams: a replay flavor of MIG slices is priced per slice; the
// controller's Teams price a whole GPU (seven 1g slices), as the
// configuration does, so that the flavor targets and the ClusterQueue
// entitlements weigh a slice at its share of the GPU. In the cohort
// layout each team owns its ClusterQueue; otherwise the shared one.
func TestReplayTeams(t *testing.T) {
	flavors := []ReplayFlavor{{Name: "h100", GPUs: 8, PriceMicrosPerGPUHour: 7_000_000},
		{Name: "mig", GPUs: 14, PriceMicrosPerGPUHour: 1_000_000, Resource: "nvidia.com/mig-1g.10gb"}}
	teams := map[string]bool{"a": true, "b": true}
	tc, unit := replayTeams(teams, flavors, nil)
	if tc.PriceMicrosPerGPUHour["mig"] != 7_000_000 || unit["mig"] != 1_000_000 || tc.PriceMicrosPerGPUHour["h100"] != 7_000_000 || unit["h100"] != 7_000_000 {
		t.Errorf("prices per GPU %v, per unit %v; want the MIG flavor at 7.00 a GPU and 1.00 a slice", tc.PriceMicrosPerGPUHour, unit)
	}
	if tc.ByClusterQueue[replayQueue] == "" || len(tc.ByClusterQueue) != 1 || tc.ByNamespace["a"] != "a" {
		t.Errorf("shared layout: %+v", tc)
	}
	tc, _ = replayTeams(teams, flavors, map[string]map[string]int{"a": {"h100": 4}, "b": {"h100": 4}})
	if tc.ByClusterQueue["a"] != "a" || tc.ByClusterQueue["b"] != "b" || len(tc.ByClusterQueue) != 2 {
		t.Errorf("cohort layout: ClusterQueues %v, want a and b their own", tc.ByClusterQueue)
	}
}

// TestSetWeight: a weight change patches the queue's
// spec.fairSharing.weight and records a FairSharingWeight Event (a
// ClusterQueue's in the default namespace, a LocalQueue's in its own); in
// dry-run mode nothing is patched and the Event says so; both count the
// change.
func TestSetWeight(t *testing.T) {
	for _, dry := range []bool{false, true} {
		cq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "ClusterQueue", "metadata": map[string]any{"name": "a"}}}
		lq := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "LocalQueue", "metadata": map[string]any{"name": "q", "namespace": "ns"}}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{clusterQsGVR: "ClusterQueueList", localQueuesGVR: "LocalQueueList"}, cq, lq)
		core := kubefake.NewClientset()
		c := &Controller{o: Options{DryRun: dry, Now: func() time.Time { return testNow }, Log: slog.New(slog.DiscardHandler)}, dyn: dyn, core: core}
		qw := &queueWeight{}
		for _, w := range []struct {
			gvr schema.GroupVersionResource
			ref corev1.ObjectReference
			ns  string
		}{
			{clusterQsGVR, corev1.ObjectReference{Kind: "ClusterQueue", Name: "a"}, "default"},
			{localQueuesGVR, corev1.ObjectReference{Kind: "LocalQueue", Namespace: "ns", Name: "q"}, "ns"},
		} {
			if err := c.setWeight(context.Background(), w.gvr, w.ref, 1, 0.5, "why", qw); err != nil {
				t.Fatal(err)
			}
			var u *unstructured.Unstructured
			var err error
			if w.ref.Namespace == "" {
				u, err = dyn.Resource(w.gvr).Get(context.Background(), w.ref.Name, metav1.GetOptions{})
			} else {
				u, err = dyn.Resource(w.gvr).Namespace(w.ref.Namespace).Get(context.Background(), w.ref.Name, metav1.GetOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedString(u.Object, "spec", "fairSharing", "weight")
			if want := map[bool]string{false: "500m", true: ""}[dry]; got != want {
				t.Errorf("dry run %v, %s %s: weight %q, want %q", dry, w.ref.Kind, w.ref.Name, got, want)
			}
			evs, err := core.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(evs.Items) != 1 {
				t.Fatalf("dry run %v, %s: Events in %s: %v, %v; want one", dry, w.ref.Kind, w.ns, err, evs)
			}
			ev := evs.Items[0]
			if want := map[bool]string{false: "FairSharingWeight", true: "FairSharingWeightDryRun"}[dry]; ev.Reason != want || ev.Message != "why" ||
				ev.InvolvedObject.Kind != w.ref.Kind || ev.InvolvedObject.Name != w.ref.Name {
				t.Errorf("dry run %v: Event %+v, want %s on %s %s", dry, ev, want, w.ref.Kind, w.ref.Name)
			}
		}
		if qw.changes != 2 || c.Stats.WeightChanges.Load() != map[bool]int64{false: 2, true: 0}[dry] {
			t.Errorf("dry run %v: %d changes counted, %d written", dry, qw.changes, c.Stats.WeightChanges.Load())
		}
	}
}
