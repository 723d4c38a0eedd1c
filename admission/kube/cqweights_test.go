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
	"k8s.io/client-go/dynamic"
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
	w, cw := ClusterQueueWeights(qs, nil, spend)
	for q, want := range map[string]float64{"h": 0.5, "t": 2, "m": 4.0 / 3, "x": 1, "y": 1} {
		if math.Abs(w[q].Weight-want) > 1e-12 {
			t.Errorf("%s: weight %g, want %g", q, w[q].Weight, want)
		}
	}
	if x := w["m"]; x.Spend != 300 || x.Entitlement != 200 {
		t.Errorf("m weighed by spend %g, entitlement %g; want 300, 200", x.Spend, x.Entitlement)
	}
	for _, q := range []string{"alone", "nocohort", "noprice"} {
		if _, ok := w[q]; ok {
			t.Errorf("%s: weight %g, want none", q, w[q].Weight)
		}
	}
	if len(cw) != 0 {
		t.Errorf("no Cohort objects, Cohort weights %v; want none", cw)
	}
	// Kueue's key for equal borrowing: borrowed / weight. h, which spent
	// the most per entitlement, goes last.
	if !(1/w["t"].Weight < 1/w["m"].Weight && 1/w["m"].Weight < 1/w["h"].Weight) {
		t.Errorf("weights %v do not order the borrowers t, m, h", w)
	}
}

// TestClusterQueueWeightsInATree: in a tree of Cohort objects every child
// of a cohort, ClusterQueue or Cohort, is weighed against its siblings by
// its subtree's spend and entitlement (a Cohort's own pool included); the
// root gets no weight, nor do Cohorts in a cycle of parents and the
// queues under them.
func TestClusterQueueWeightsInATree(t *testing.T) {
	// org: research (a, b, and a pool worth 100) and platform (p), and
	// the queue ops directly under org.
	cohorts := []Cohort{
		{Name: "org"},
		{Name: "research", Parent: "org", Entitlement: 100},
		{Name: "platform", Parent: "org"},
		{Name: "loop1", Parent: "loop2"}, {Name: "loop2", Parent: "loop1"}, {Name: "under", Parent: "loop1"},
	}
	qs := []ClusterQueue{
		{Name: "a", Cohort: "research", Entitlement: 100},
		{Name: "b", Cohort: "research", Entitlement: 100},
		{Name: "p", Cohort: "platform", Entitlement: 300},
		{Name: "ops", Cohort: "org", Entitlement: 100},
		{Name: "l1", Cohort: "loop1", Entitlement: 100}, {Name: "l2", Cohort: "loop2", Entitlement: 100},
		{Name: "u1", Cohort: "under", Entitlement: 100}, {Name: "u2", Cohort: "under", Entitlement: 100},
	}
	// research: 300 entitled, spent 600 (a 500, b 100); platform: 300,
	// spent 300; ops: 100, spent 100. org: 700 entitled, 1000 spent.
	spend := map[string]float64{"a": 500, "b": 100, "p": 300, "ops": 100, "l1": 1, "l2": 1, "u1": 1, "u2": 2}
	w, cw := ClusterQueueWeights(qs, cohorts, spend)
	perUnit := 1000.0 / 700
	for name, want := range map[string]float64{"research": perUnit / 2, "platform": perUnit, "ops": perUnit} {
		got := cw[name].Weight
		if name == "ops" {
			got = w[name].Weight
		}
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s under org: weight %g, want %g", name, got, want)
		}
	}
	if x := cw["research"]; x.Spend != 600 || x.Entitlement != 300 {
		t.Errorf("research weighed by spend %g, entitlement %g; want its subtree's 600, 300 (its pool included)", x.Spend, x.Entitlement)
	}
	// Within research: 600 spent on 200 of the queues' entitlement, 3 a
	// unit; a spent 5, b 1.
	for name, want := range map[string]float64{"a": 3.0 / 5, "b": 3} {
		if math.Abs(w[name].Weight-want) > 1e-12 {
			t.Errorf("%s in research: weight %g, want %g", name, w[name].Weight, want)
		}
	}
	for _, name := range []string{"p", "l1", "l2", "u1", "u2"} {
		if x, ok := w[name]; ok {
			t.Errorf("ClusterQueue %s: weight %g, want none (alone in its cohort, or under a cycle)", name, x.Weight)
		}
	}
	for _, name := range []string{"org", "loop1", "loop2", "under"} {
		if x, ok := cw[name]; ok {
			t.Errorf("Cohort %s: weight %g, want none (the root, or in or under a cycle)", name, x.Weight)
		}
	}
}

// TestReadCohort: a Cohort's parent, weight and own pool are read.
func TestReadCohort(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "research"},
		"spec": map[string]any{"parentName": "org", "fairSharing": map[string]any{"weight": "2"},
			"resourceGroups": []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{
				map[string]any{"name": "h100", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "2"}}}}}}}}}
	c := ReadCohort(u, map[string]int64{"h100": 6_880_000})
	if c.Name != "research" || c.Parent != "org" || c.Weight != 2 || c.Entitlement != 2*6_880_000 {
		t.Errorf("got %+v, want research under org, weight 2, entitlement %d", c, 2*6_880_000)
	}
	c = ReadCohort(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "root"}}}, nil)
	if c.Weight != 1 || c.Parent != "" || c.Entitlement != 0 {
		t.Errorf("an empty Cohort: got %+v, want weight 1, no parent, no entitlement", c)
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
			u := getObject(t, dyn, w.gvr, w.ref.Namespace, w.ref.Name)
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

// getObject reads an object from a (fake) API server: a namespaced one
// when ns is set, else a cluster-scoped one.
func getObject(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	var err error
	if ns == "" {
		u, err = dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	} else {
		u, err = dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}
