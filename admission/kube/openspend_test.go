package kube

import (
	"context"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOpenSpend: what the admitted Workloads cost since the ledger's
// newest hour ended, each from the later of its admission and that hour's
// end to the earlier of its Finished time and now, at its flavor's price,
// decayed from the span's middle; the pending and the no longer Admitted
// are not counted, and the time Kubernetes wrote is mapped onto the
// controller's clock.
func TestOpenSpend(t *testing.T) {
	teams, _, wl := targetsFixture(t)
	now := time.Date(2026, 12, 7, 10, 40, 0, 0, time.UTC)
	settled := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	stamp := func(u *unstructured.Unstructured, typ string, at time.Time, status string) *unstructured.Unstructured {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		conds = append(conds, map[string]any{"type": typ, "status": status, "lastTransitionTime": at.Format(time.RFC3339)})
		if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	// Kubernetes' clock runs an hour behind the controller's here.
	k8s := func(at time.Time) time.Time { return at.Add(-time.Hour) }
	objectTime := func(at time.Time) time.Time { return at.Add(time.Hour) }
	workloads := []*unstructured.Unstructured{
		// Since 9:30: counted from 10:00, 40 minutes of 2 H100s.
		stamp(wl("research", "long", 2, false, "h100"), "Admitted", k8s(settled.Add(-30*time.Minute)), "True"),
		// 10:20 to 10:30 on 3 A100s.
		stamp(stamp(wl("vision", "short", 3, true, "a100"), "Admitted", k8s(settled.Add(20*time.Minute)), "True"),
			"Finished", k8s(settled.Add(30*time.Minute)), "True"),
		// Evicted: Admitted is False.
		stamp(wl("vision", "evicted", 1, true, "a100"), "Admitted", k8s(settled.Add(10*time.Minute)), "False"),
		// Pending.
		wl("research", "pending", 4, false, ""),
	}
	decay := func(mid time.Time) float64 { return math.Exp2(-now.Sub(mid).Hours()) }
	want := map[string]float64{
		"research": 2 * 6_000_000 * (40.0 / 60) * decay(settled.Add(20*time.Minute)),
		"vision":   3 * 2_000_000 * (10.0 / 60) * decay(settled.Add(25*time.Minute)),
	}
	check := func(name string, got, want map[string]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
		for k, w := range want {
			if math.Abs(got[k]-w) > 1e-6*w {
				t.Errorf("%s: %s %.1f, want %.1f", name, k, got[k], w)
			}
		}
	}
	check("by team", openSpend(teams, workloads, now, settled, time.Hour, objectTime, false), want)
	check("by ClusterQueue", openSpend(teams, workloads, now, settled, time.Hour, objectTime, true), map[string]float64{"shared": want["research"] + want["vision"]})
	// With nothing settled, research's counts from its admission.
	got := openSpend(teams, workloads, now, time.Time{}, time.Hour, objectTime, false)
	if w := 2 * 6_000_000 * (70.0 / 60) * decay(settled.Add(5*time.Minute)); math.Abs(got["research"]-w) > 1e-6*w {
		t.Errorf("with no hour settled research's open spend is %.1f, want %.1f", got["research"], w)
	}
	// A ledger settled past now leaves nothing open.
	if got := openSpend(teams, workloads, now, now.Add(time.Hour), time.Hour, objectTime, false); len(got) != 0 {
		t.Errorf("with the hour settled past now: %v, want nothing", got)
	}
}

// TestOpenSpendWeights: with an empty ledger the teams' weights come from
// what Kueue says they were admitted: research, which has held two H100s
// (6.00 an hour) for half an hour, spent six times vision's one A100
// (2.00) for as long, so with the same consumed usage research's weight is
// a sixth of vision's; without the Workloads both keep weight 1.
func TestOpenSpendWeights(t *testing.T) {
	teams, f, wl := targetsFixture(t)
	teams.Entitlement = map[string]float64{"research": 1, "vision": 1}
	admitted := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Admitted", "status": "True",
			"lastTransitionTime": testNow.Add(-30 * time.Minute).Format(time.RFC3339)}}, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	var workloads []*unstructured.Unstructured
	c, weight := weightsController(t, teams, f, map[string]any{"fairSharing": map[string]any{"admissionFairSharingStatus": map[string]any{
		"consumedResources": map[string]any{"nvidia.com/gpu": "2"}}}}, func() []*unstructured.Unstructured { return workloads })
	ctx := context.Background()
	if err := c.UpdateWeights(ctx); err != nil {
		t.Fatal(err)
	}
	if r, v := weight("research"), weight("vision"); r != 1 || v != 1 {
		t.Fatalf("nothing admitted, nothing in the ledger: weights %g and %g, want 1 and 1", r, v)
	}
	workloads = []*unstructured.Unstructured{admitted(wl("research", "r", 2, false, "h100")), admitted(wl("vision", "v", 1, true, "a100"))}
	if err := c.UpdateWeights(ctx); err != nil {
		t.Fatal(err)
	}
	// consumed / share, 1/6 against 1, scaled to average 1: 2/7 and 12/7.
	if r, v := weight("research"), weight("vision"); math.Abs(r-2.0/7) > 0.001 || math.Abs(v-12.0/7) > 0.001 {
		t.Errorf("weights research %g, vision %g; want 2/7 and 12/7", r, v)
	}
}
