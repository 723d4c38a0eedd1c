package kube

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFlavorTargets: a ClusterQueue of 2 H100s and 4 A100s shared by
// research (any flavor) and vision (its pods' affinity allows A100s
// only). The money-fair split gives research the H100s and vision the
// A100s. research's workload that Kueue put on an A100, while research
// holds the H100s and vision waits with no A100 of its own, is held with
// a message that names both teams and the flavor; the same workload is
// let through once vision holds its share, or has nothing pending, and a
// workload on the H100s is never held for vision, which cannot use them.
func TestFlavorTargets(t *testing.T) {
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
	wl := func(ns, name string, gpus int64, onlyA100 bool, flavor string) *unstructured.Unstructured {
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
