package capacity

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// Kueue's buckets for kueue_admission_wait_time_seconds: 1, then 2.5·2^k.
var kueueBounds = func() []float64 {
	b := []float64{1}
	for v := 2.5; len(b) < 16; v *= 2 {
		b = append(b, v)
	}
	return append(b, math.Inf(1))
}()

// waits is a histogram in Kueue's buckets of n workloads each of which
// waited w seconds.
func waits(n int, w float64) ledger.Histogram {
	h := ledger.Histogram{Bounds: kueueBounds, Counts: make([]float64, len(kueueBounds))}
	for i, b := range kueueBounds {
		if w <= b {
			h.Counts[i] = float64(n)
		}
	}
	return h
}

// queueHours makes days of hourly queue rows of cluster queue cq ending at
// now's hour: each hour 4 workloads admitted after the wait of wait(day)
// (none when 0), and 2 pending ones at the hour's end of age pending(day) seconds (none
// when 0).
func queueHours(cq string, days int, wait, pending func(day int) float64) []ledger.QueueRow {
	end := now.Truncate(time.Hour)
	start := end.Add(-time.Duration(days) * 24 * time.Hour)
	var out []ledger.QueueRow
	for h := start; h.Before(end); h = h.Add(time.Hour) {
		d := int(h.Sub(start).Hours() / 24)
		r := ledger.QueueRow{Hour: h, Cluster: "prod", ClusterQueue: cq, PendingWorkloads: 2}
		if w := wait(d); w > 0 {
			r.Admitted, r.AdmittedWait = 4, waits(4, w)
		}
		if p := pending(d); p > 0 {
			r.PendingWait, r.PendingGPUs = waits(2, p), 16
		}
		out = append(out, r)
	}
	return out
}

func TestWaitRule(t *testing.T) {
	const minute = 60.0
	for _, tc := range []struct {
		name     string
		rows     []ledger.QueueRow
		fired    bool
		why      string
		forecast bool
	}{
		{"8 days of 50-minute waits", queueHours("cq", 8, constant(50*minute), constant(0)), true, "p90 wait for admission in cq", false},
		{"8 days of 10-minute waits", queueHours("cq", 8, constant(10*minute), constant(0)), false, "not over 30 min", false},
		{"3 days of 50-minute waits", queueHours("cq", 3, constant(50*minute), constant(0)), false, "not enough history", false},
		// Nothing admitted for a day: the workloads still pending for
		// hours are what the wait is.
		{"admissions stop, the pending wait", queueHours("cq", 8, func(d int) float64 {
			if d == 7 {
				return 0
			}
			return 40 * minute
		}, func(d int) float64 {
			if d == 7 {
				return 5 * 3600
			}
			return 0
		}), true, "still pending", false},
		{"caught up on the last day", queueHours("cq", 8, func(d int) float64 {
			if d == 7 {
				return 5 * minute
			}
			return 3 * 3600
		}, constant(0)), false, "the queue has caught up", false},
		{"rising waits", queueHours("cq", 21, func(d int) float64 { return float64(d+1) * minute }, constant(0)), false, "not over 30 min", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := Waits(tc.rows, map[string]QueueUse{"cq": {Flavor: "h100"}}, now, DefaultWaitRule, prices)
			if len(ws) != 1 {
				t.Fatalf("%d verdicts, want 1", len(ws))
			}
			w := ws[0]
			if w.Fired != tc.fired || !strings.Contains(w.Why, tc.why) {
				t.Errorf("fired %v (%s), want %v (%q)", w.Fired, w.Why, tc.fired, tc.why)
			}
			if !w.Forecast.IsZero() != tc.forecast {
				t.Errorf("forecast %v, want one: %v", w.Forecast, tc.forecast)
			}
			if w.Fired && (w.Flavor != "h100" || w.MonthlyCostMicros != 72*6_880_000*HoursPerMonth) {
				t.Errorf("flavor %q, monthly cost %d", w.Flavor, w.MonthlyCostMicros)
			}
		})
	}
}

// TestWaitWhileOwnGPUsIdle: a queue whose workloads wait 50 minutes while
// the GPUs its own pods hold are 13% busy (notebooks left open) is told to
// reclaim them, with the namespaces that hold them idle, not to buy 72;
// with its GPUs 90% busy it is told to buy.
func TestWaitWhileOwnGPUsIdle(t *testing.T) {
	rows := queueHours("notebooks", 8, constant(50*60), constant(0))
	week := DefaultWaitRule.Window.Seconds()
	holder := IdleHolder{Team: "data-science", Namespace: "ds-notebooks", ClusterQueue: "notebooks", IdleGPUs: 11.9, HeldGPUs: 13.7}
	idle := QueueUse{Flavor: "h100", Held: 13.7 * week, Active: 0.13 * 13.7 * week, Holders: []IdleHolder{holder}}
	w := Waits(rows, map[string]QueueUse{"notebooks": idle}, now, DefaultWaitRule, prices)[0]
	if w.Fired || w.Action != ActionReclaim || w.Reclaim == nil || len(w.Reclaim.Holders) != 1 || !strings.Contains(w.Why, "while its own h100 GPUs were 13.0% busy") {
		t.Fatalf("waits with idle GPUs: %s %+v", w.Action, w)
	}
	if g := w.Reclaim.IdleGPUs; math.Abs(g-0.87*13.7) > 0.01 {
		t.Errorf("%g GPUs held idle, want %g", g, 0.87*13.7)
	}
	busy := idle
	busy.Active = 0.9 * 13.7 * week
	if w := Waits(rows, map[string]QueueUse{"notebooks": busy}, now, DefaultWaitRule, prices)[0]; !w.Fired || w.Action != ActionBuy {
		t.Errorf("waits with busy GPUs: %s %s", w.Action, w.Why)
	}
}

// TestWaitQuantileIncludesPending: a day on which 9 workloads were admitted
// at once and one is still pending after 2 hours has a p90 the admitted
// ones alone would not show.
func TestWaitQuantileIncludesPending(t *testing.T) {
	rows := queueHours("cq", 8, constant(10), constant(0))
	for i := range rows {
		rows[i].PendingWait = waits(1, 7200)
		rows[i].AdmittedWait = waits(0, 10)
		rows[i].Admitted = 0
	}
	rows[len(rows)-1].AdmittedWait, rows[len(rows)-1].Admitted = waits(9, 10), 9
	w := Waits(rows, nil, now, DefaultWaitRule, prices)[0]
	// 9 at ≤10 s, 1 at ≤10240 s (the 7200 s pending one): the 90th
	// percentile is at the top of the 10 s bucket.
	if !(w.LastDay >= 5 && w.LastDay <= 10) || w.Pending != 1 {
		t.Errorf("last day's p90 %g s with %g pending; want 5-10 s and 1", w.LastDay, w.Pending)
	}
	rows[len(rows)-1].AdmittedWait, rows[len(rows)-1].Admitted = waits(1, 10), 1
	w = Waits(rows, nil, now, DefaultWaitRule, prices)[0]
	if w.LastDay < 1800 {
		t.Errorf("last day's p90 %g s with one admitted and one pending for 2 h; want over 1800", w.LastDay)
	}
}

// TestWaitAlertInAlertmanager: 8 days of a ClusterQueue whose workloads
// wait 50 minutes raise exactly one expansion alert, for that queue and the
// flavor it runs on, with the daily waits in its evidence, in a real
// Alertmanager; 6 days of the same raise none.
func TestWaitAlertInAlertmanager(t *testing.T) {
	testenv.Slow(t, "Alertmanager")
	url, _ := testenv.StartAlertmanager(t, t.TempDir())
	am := &Alertmanager{URL: url}
	ctx := context.Background()
	for _, tc := range []struct {
		cluster string
		days    int
		alerts  int
	}{{"young", 6, 0}, {"prod", 8, 1}} {
		s := embeddedtest.Open(t, ledger.Row{Key: ledger.Key{Hour: now.Truncate(time.Hour).Add(-2 * time.Hour), Cluster: tc.cluster, Team: "nlp",
			ClusterQueue: "cq-nlp", Flavor: "h100"}, GPUSeconds: 3600, ActiveGPUSeconds: 3600, CostMicros: 6_880_000})
		rows := queueHours("cq-nlp", tc.days, constant(50*60), constant(0))
		for i := range rows {
			rows[i].Cluster = tc.cluster
		}
		if err := s.WriteQueueHours(ctx, rows); err != nil {
			t.Fatal(err)
		}
		ws, err := EvaluateWaits(ctx, s, tc.cluster, now, DefaultWaitRule, prices)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ws {
			if ws[i].Fired {
				ws[i].WhatIf = "+72 h100 GPUs as quota of cq-nlp: p90 wait 81 min -> 0 min"
			}
		}
		if _, _, err := am.Sync(ctx, tc.cluster, WaitAlerts(tc.cluster, "USD", ws), time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		got := active(t, am, tc.cluster)
		if len(got) != tc.alerts {
			t.Fatalf("%d days: %d alerts, want %d: %+v", tc.days, len(got), tc.alerts, got)
		}
		if tc.alerts == 0 {
			continue
		}
		a := got[0]
		for k, v := range map[string]string{"alertname": AlertExpansion, "flavor": "h100", "cluster_queue": "cq-nlp", "trigger": "queue_wait",
			"severity": "warning", "action": "expand"} {
			if a.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, a.Labels[k], v)
			}
		}
		ev := a.Annotations["evidence"]
		for _, want := range []string{"p90 wait for admission in cq-nlp", "from 2026-11-23 to 2026-11-30", "daily: 11-23 81 min", "11-30 81 min"} {
			if !strings.Contains(ev, want) {
				t.Errorf("evidence %q lacks %q", ev, want)
			}
		}
		if rec := a.Annotations["recommendation"]; !strings.Contains(rec, "72 h100 GPUs, 361612.80 USD a month") {
			t.Errorf("recommendation %q", rec)
		}
		if wi := a.Annotations["what_if"]; wi != "+72 h100 GPUs as quota of cq-nlp: p90 wait 81 min -> 0 min" {
			t.Errorf("what_if annotation %q", wi)
		}
		t.Logf("in Alertmanager: %v %v", a.Labels, a.Annotations)
	}
}
