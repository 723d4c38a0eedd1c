package capacity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// evaluate runs the trigger on the ledger of a cluster as `gpuledger
// capacity` does and syncs Alertmanager with its alerts.
func evaluate(t *testing.T, am *Alertmanager, cluster string, days int) []Recommendation {
	t.Helper()
	ctx := context.Background()
	s := embeddedtest.Open(t, saturated(cluster, days)...)
	facts, err := ReadFacts(ctx, s, cluster, now.Add(-DefaultRule.Window-24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	recs := Expansion(facts, nil, now, DefaultRule, prices)
	budgets, err := Budgets(ctx, s, cluster, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	alerts := append(ExpansionAlerts(cluster, "USD", recs), BudgetAlerts(cluster, "USD", budgets)...)
	if _, _, err := am.Sync(ctx, cluster, alerts, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	return recs
}

// active lists the cluster's gpuledger alerts Alertmanager has active.
func active(t *testing.T, am *Alertmanager, cluster string) []Alert {
	t.Helper()
	alerts, err := am.list(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	return alerts
}

// TestExpansionAlertInAlertmanager: 31 days of a saturated ClusterQueue
// raise exactly the expansion alert, with its evidence, in a real
// Alertmanager; 29 days raise nothing. Evaluating again after gpuledger
// or Alertmanager restarts leaves one alert; when the condition clears the
// alert is resolved.
func TestExpansionAlertInAlertmanager(t *testing.T) {
	testenv.Slow(t, "Alertmanager")
	dir := t.TempDir()
	url, stop := testenv.StartAlertmanager(t, dir)
	am := &Alertmanager{URL: url}

	recs := evaluate(t, am, "young", 29)
	if len(recs) != 1 || recs[0].Fired {
		t.Fatalf("29 days: %+v", recs)
	}
	if got := active(t, am, "young"); len(got) != 0 {
		t.Fatalf("29 days raised %d alerts: %+v", len(got), got)
	}

	evaluate(t, am, "prod", 31)
	got := active(t, am, "prod")
	if len(got) != 1 {
		t.Fatalf("31 days: %d alerts, want exactly the expansion alert: %+v", len(got), got)
	}
	a := got[0]
	for k, v := range map[string]string{"alertname": AlertExpansion, "flavor": "h100", "cluster": "prod", "severity": "warning", "action": "expand", "generator": Generator} {
		if a.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, a.Labels[k], v)
		}
	}
	ev := a.Annotations["evidence"]
	for _, want := range []string{"h100's GPU time 90.6% allocated (daily 90.6%-90.6%) and 87.5% active from 2026-10-31 to 2026-11-30", "720 of 720 hours", "64 GPUs"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence %q lacks %q", ev, want)
		}
	}
	if rec := a.Annotations["recommendation"]; !strings.Contains(rec, "72 h100 GPUs, 361612.80 USD a month") {
		t.Errorf("recommendation %q", rec)
	}
	first := a.StartsAt
	t.Logf("in Alertmanager: %v %v", a.Labels, a.Annotations)

	// gpuledger restarts (a new client, no state of its own) and evaluates
	// again: still one alert, with the same start.
	am = &Alertmanager{URL: url}
	evaluate(t, am, "prod", 31)
	if got := active(t, am, "prod"); len(got) != 1 || !got[0].StartsAt.Equal(first) {
		t.Fatalf("after gpuledger's restart: %d alerts (%v; first started %v)", len(got), got, first)
	}
	// Alertmanager restarts (it keeps no alerts across restarts: senders
	// send them again): the next evaluation raises the one alert again.
	stop()
	url, _ = testenv.StartAlertmanager(t, dir)
	am = &Alertmanager{URL: url}
	evaluate(t, am, "prod", 31)
	if got := active(t, am, "prod"); len(got) != 1 {
		t.Fatalf("after Alertmanager's restart: %d alerts: %v", len(got), got)
	}

	// The condition clears (a quieter month): the alert is resolved.
	if _, resolved, err := am.Sync(context.Background(), "prod", nil, time.Now(), time.Hour); err != nil || resolved != 1 {
		t.Fatalf("resolved %d, %v", resolved, err)
	}
	if got := active(t, am, "prod"); len(got) != 0 {
		t.Errorf("%d alerts still active after the condition cleared: %s", len(got), fmt.Sprint(got))
	}
}
