package kube

import (
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
