package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// workloadOf makes a Workload of one pod set (count pods of one GPU) of
// the targets' fixture: onlyA100 pins it by node affinity, and a flavor
// makes it reserved on that flavor.
type workloadOf func(ns, name string, gpus int64, onlyA100 bool, flavor string) *unstructured.Unstructured

// targetsFixture is a ClusterQueue "shared" of 2 H100s (6.00 an hour)
// and 4 A100s (2.00) with the LocalQueues of research and vision.
func targetsFixture(t *testing.T) (*Teams, Flavors, workloadOf) {
	t.Helper()
	teams := &Teams{ByNamespace: map[string]string{"research": "research", "vision": "vision"},
		PriceMicrosPerGPUHour: map[string]int64{"h100": 6_000_000, "a100": 2_000_000}}
	cq := obj(map[string]any{"metadata": map[string]any{"name": "shared"}, "spec": map[string]any{"resourceGroups": []any{map[string]any{
		"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{
			map[string]any{"name": "h100", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(2)}}},
			map[string]any{"name": "a100", "resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "4"}}},
		}}}}})
	rf := func(name string) unstructured.Unstructured {
		return obj(map[string]any{"metadata": map[string]any{"name": name}, "spec": map[string]any{"nodeLabels": map[string]any{FlavorLabel: name}}})
	}
	lq := func(ns string) unstructured.Unstructured {
		return obj(map[string]any{"metadata": map[string]any{"namespace": ns, "name": "q"}, "spec": map[string]any{"clusterQueue": "shared"}})
	}
	f := ReadFlavors([]unstructured.Unstructured{cq}, []unstructured.Unstructured{rf("h100"), rf("a100")},
		[]unstructured.Unstructured{lq("research"), lq("vision")})
	if f.GPUs["h100"] != 2 || f.GPUs["a100"] != 4 || strings.Join(f.ByClusterQueue["shared"], ",") != "h100,a100" {
		t.Fatalf("flavors %+v", f)
	}
	var wl workloadOf = func(ns, name string, gpus int64, onlyA100 bool, flavor string) *unstructured.Unstructured {
		spec := map[string]any{"containers": []any{map[string]any{"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}}}}}
		if onlyA100 {
			spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": FlavorLabel, "operator": "In", "values": []any{"a100"}}}}}}}}
		}
		m := map[string]any{"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{"queueName": "q", "podSets": []any{map[string]any{"name": "main", "count": gpus, "template": map[string]any{"spec": spec}}}}}
		if flavor != "" {
			m["status"] = map[string]any{"admission": map[string]any{"clusterQueue": "shared", "podSetAssignments": []any{
				map[string]any{"name": "main", "flavors": map[string]any{"nvidia.com/gpu": flavor}}}}}
		}
		u := obj(m)
		return &u
	}
	return teams, f, wl
}

// TestFlavorTargets: a ClusterQueue of 2 H100s and 4 A100s shared by
// research (any flavor) and vision (its pods' affinity allows A100s
// only). The money-fair split gives research the H100s and vision the
// A100s. research's workload that Kueue put on an A100, while research
// holds the H100s and vision waits with no A100 of its own, is held with
// a message that names both teams and the flavor; the same workload is
// let through once vision holds its share, or has nothing pending, and a
// workload on the H100s is never held for vision, which cannot use them.
func TestFlavorTargets(t *testing.T) {
	teams, f, wl := targetsFixture(t)
	onH100 := wl("research", "r-running", 2, false, "h100")
	candidate := wl("research", "r-new", 1, false, "a100")
	visionWaits := wl("vision", "v-waiting", 2, true, "")
	if got := f.allowed(visionWaits, "shared"); strings.Join(got, ",") != "a100" {
		t.Fatalf("vision's allowed flavors %v, want a100", got)
	}

	v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, candidate, visionWaits}, nil, time.Minute)
	if v.Ready || v.RetryAfter != time.Minute {
		t.Fatalf("research on an A100 while vision waits for its A100s: %+v, want held for a minute", v)
	}
	for _, want := range []string{"team research", "a100", "team vision", "money-fair share"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q does not name %q", v.Message, want)
		}
	}
	// vision holds all four A100s: research may have what frees up.
	visionHolds := wl("vision", "v-running", 4, true, "a100")
	if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, visionHolds, visionWaits}, nil, time.Minute); !v.Ready {
		t.Errorf("vision holds its share: %+v, want ready", v)
	}
	// Nobody else waits: research may use the A100s.
	if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100}, nil, time.Minute); !v.Ready {
		t.Errorf("no other team waits: %+v, want ready", v)
	}
	// On the H100s research is never held for vision.
	h := wl("research", "r-h100", 1, false, "h100")
	if v := FlavorTargets(teams, f, h, []*unstructured.Unstructured{visionWaits}, nil, time.Minute); !v.Ready {
		t.Errorf("research on an H100: %+v, want ready", v)
	}
	// vision's reservation that will not run on it (its check answered
	// Retry, or Kueue evicted it) is work vision waits for, not A100s it
	// holds.
	withStatus := func(u *unstructured.Unstructured, conds []any, checks []any) *unstructured.Unstructured {
		c := u.DeepCopy()
		_ = unstructured.SetNestedSlice(c.Object, conds, "status", "conditions")
		_ = unstructured.SetNestedSlice(c.Object, checks, "status", "admissionChecks")
		return c
	}
	cond := func(typ, at string) any {
		return map[string]any{"type": typ, "status": "True", "lastTransitionTime": at}
	}
	visionAll := wl("vision", "v-all", 4, true, "a100")
	retry := withStatus(visionAll, []any{cond("QuotaReserved", "2026-12-07T01:00:00Z")},
		[]any{map[string]any{"name": "gpuledger", "state": "Retry"}})
	evicted := withStatus(visionAll, []any{cond("QuotaReserved", "2026-12-07T01:00:00Z"), cond("Evicted", "2026-12-07T01:00:02Z")}, nil)
	for name, w := range map[string]*unstructured.Unstructured{"check answered Retry": retry, "evicted": evicted} {
		if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, w}, nil, time.Minute); v.Ready {
			t.Errorf("vision's 4 A100s reserved but %s: research let through, want held for vision", name)
		}
	}
	// A reservation re-made after an eviction holds again.
	readmitted := withStatus(visionAll, []any{cond("Evicted", "2026-12-07T01:00:00Z"), cond("QuotaReserved", "2026-12-07T01:00:05Z")}, nil)
	if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, readmitted}, nil, time.Minute); !v.Ready {
		t.Errorf("vision holds its 4 A100s again after an eviction: %+v, want ready", v)
	}
	// A reservation still to be decided is not held yet: the answers
	// count only those given before them.
	pending := withStatus(visionAll, []any{cond("QuotaReserved", "2026-12-07T01:00:00Z")},
		[]any{map[string]any{"name": "gpuledger", "state": "Pending"}})
	if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, pending}, nil, time.Minute); !v.Ready {
		t.Errorf("vision's reservation counted as held (no undecided): %+v, want ready", v)
	}
	undecided := func(w *unstructured.Unstructured) bool { return w.GetName() == "v-all" }
	if v := FlavorTargets(teams, f, candidate, []*unstructured.Unstructured{onH100, pending}, undecided, time.Minute); v.Ready {
		t.Errorf("vision's reservation still to be decided: research let through, want held for vision")
	}
	// A workload no team owns is not held.
	stray := wl("elsewhere", "x", 1, false, "a100")
	if v := FlavorTargets(teams, f, stray, []*unstructured.Unstructured{visionWaits}, nil, time.Minute); !v.Ready {
		t.Errorf("a workload of no team: %+v, want ready", v)
	}
}

// TestDemotions: research, which may run anywhere, holds both H100s, its
// money-fair share; vision may use the A100s only. While an A100 is free
// and vision waits for it, research's next workload would land there and
// be held, so research is demoted on a100; not when the A100s are full,
// when vision waits for nothing, when an H100 is free (its workload goes
// there, within its share), nor when its only pending workload asks for
// more than is free. vision, under its share, is never demoted. A
// reservation just held counts as pending and its GPUs as free.
func TestDemotions(t *testing.T) {
	teams, f, wl := targetsFixture(t)
	research2 := wl("research", "r-running", 2, false, "h100")
	research1 := wl("research", "r-one", 1, false, "h100")
	rPending := wl("research", "r-next", 1, false, "")
	vPending := wl("vision", "v-next", 2, true, "")
	vAll := wl("vision", "v-all", 4, true, "a100")
	cases := []struct {
		name      string
		workloads []*unstructured.Unstructured
		want      string
	}{
		{"an A100 free, vision waits", []*unstructured.Unstructured{research2, rPending, vPending}, "research:a100"},
		{"the A100s full", []*unstructured.Unstructured{research2, vAll, rPending, vPending}, ""},
		{"vision waits for nothing", []*unstructured.Unstructured{research2, rPending}, ""},
		{"an H100 free", []*unstructured.Unstructured{research1, rPending, vPending}, ""},
		{"too big for what is free", []*unstructured.Unstructured{research2, wl("vision", "v-3", 3, true, "a100"), wl("research", "r-big", 2, false, ""), vPending}, ""},
	}
	for _, c := range cases {
		var got []string
		for team, fl := range Demotions(teams, f, c.workloads, nil) {
			got = append(got, team+":"+fl)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("%s: demoted %v, want %q", c.name, got, c.want)
		}
	}
	// research's reservation of an A100 just answered Retry, still shown
	// reserved: without released it fills the A100 research would take.
	rHeld := wl("research", "r-held", 4, false, "a100")
	if d := Demotions(teams, f, []*unstructured.Unstructured{research2, rHeld, vPending}, nil); len(d) != 0 {
		t.Errorf("the held reservation counted as reserved: demoted %v, want none (no A100 free)", d)
	}
	released := func(w *unstructured.Unstructured) bool { return w.GetName() == "r-held" }
	if d := Demotions(teams, f, []*unstructured.Unstructured{research2, rHeld, vPending}, released); d["research"] != "a100" || len(d) != 1 {
		t.Errorf("the held reservation released: demoted %v, want research on a100", d)
	}
}

// TestDemotionWeights: the controller writes demotedWeight into a
// demoted team's LocalQueue after an answer, keeps it there when it
// updates the weights, and gives the weight back after the answer that
// finds the team no longer demoted; the other team's is left alone.
func TestDemotionWeights(t *testing.T) {
	teams, f, wl := targetsFixture(t)
	var workloads []*unstructured.Unstructured
	c, weight := weightsController(t, teams, f, nil, func() []*unstructured.Unstructured { return workloads })
	c.o.FlavorTargets = true
	ctx := context.Background()
	if err := c.UpdateWeights(ctx); err != nil {
		t.Fatal(err)
	}
	workloads = []*unstructured.Unstructured{wl("research", "r-running", 2, false, "h100"), wl("research", "r-next", 1, false, ""), wl("vision", "v-next", 2, true, "")}
	c.updateDemotions(ctx, teams, nil)
	if r, v := weight("research"), weight("vision"); r != demotedWeight || v != 1 {
		t.Fatalf("research demoted: weights research %g, vision %g; want %g and 1", r, v, demotedWeight)
	}
	if err := c.UpdateWeights(ctx); err != nil {
		t.Fatal(err)
	}
	if r := weight("research"); r != demotedWeight {
		t.Errorf("after a weight update research's weight is %g, want it still demoted (%g)", r, demotedWeight)
	}
	workloads = append(workloads, wl("vision", "v-all", 4, true, "a100"))
	c.updateDemotions(ctx, teams, nil)
	if r := weight("research"); r != 1 {
		t.Errorf("the A100s full: research's weight %g, want 1 back", r)
	}
}

// weightsController is a controller over a fake API server holding the
// LocalQueues "q" of research and vision in the fixture's ClusterQueue,
// with status (nil: none), an empty ledger and the Workloads list gives;
// weight reads a LocalQueue's fairSharing.weight (1 when unset).
func weightsController(t *testing.T, teams *Teams, f Flavors, status map[string]any, list func() []*unstructured.Unstructured) (*Controller, func(ns string) float64) {
	t.Helper()
	teams.Cluster = "test"
	lq := func(ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kueueGroup + "/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "q", "namespace": ns}, "spec": map[string]any{"clusterQueue": "shared"}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{clusterQsGVR: "ClusterQueueList", localQueuesGVR: "LocalQueueList", workloadsGVR: "WorkloadList"},
		lq("research"), lq("vision"))
	c := &Controller{o: Options{Store: embeddedtest.Open(t), HalfLife: time.Hour, Hysteresis: 0.1,
		Now: func() time.Time { return testNow }, Log: slog.New(slog.DiscardHandler)},
		dyn: dyn, core: kubefake.NewClientset(), teams: *teams, checks: map[string]bool{}, answeredReady: map[string]time.Time{},
		weights: map[string]*queueWeight{}, flavors: f, flavorsAt: time.Now(), workloads: list}
	weight := func(ns string) float64 {
		t.Helper()
		u := getObject(t, dyn, localQueuesGVR, ns, "q")
		if w, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight"); ok {
			return quantity(w)
		}
		return 1
	}
	return c, weight
}

// TestUndecided: a reservation whose check of ours is Pending is
// undecided until the worker answers it Ready, even while the informer's
// copy still shows Pending; a reservation made after that answer is
// undecided again, and other controllers' checks are not ours to decide.
func TestUndecided(t *testing.T) {
	c := &Controller{checks: map[string]bool{"gpuledger": true}, answeredReady: map[string]time.Time{}}
	reservedAt := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	wl := func(check string, at time.Time) *unstructured.Unstructured {
		u := obj(map[string]any{"metadata": map[string]any{"namespace": "vision", "name": "v"}, "status": map[string]any{
			"conditions":      []any{map[string]any{"type": "QuotaReserved", "status": "True", "lastTransitionTime": at.Format(time.RFC3339)}},
			"admissionChecks": []any{map[string]any{"name": check, "state": "Pending"}}}})
		return &u
	}
	w := wl("gpuledger", reservedAt)
	if !c.undecided(w) {
		t.Fatal("a Pending check never answered: decided, want undecided")
	}
	if c.undecided(wl("provisioning", reservedAt)) {
		t.Error("another controller's Pending check: undecided, want decided (not ours)")
	}
	c.noteReady(w, reservedAt.Add(300*time.Millisecond))
	if c.undecided(w) {
		t.Error("answered Ready in the second of the reservation, informer behind: undecided, want decided")
	}
	if !c.undecided(wl("gpuledger", reservedAt.Add(5*time.Second))) {
		t.Error("reserved again after the Ready answer: decided, want undecided")
	}
	// Answers the informer has long caught up with are forgotten.
	other := wl("gpuledger", reservedAt)
	other.SetName("later")
	c.noteReady(other, reservedAt.Add(2*time.Minute))
	if _, ok := c.answeredReady["vision/v"]; ok {
		t.Error("an answer two minutes old is still remembered")
	}
}
