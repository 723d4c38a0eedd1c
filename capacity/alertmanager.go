package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Alert is one alert in Alertmanager's terms: its identity (Labels) and
// what a person reads (Annotations).
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt,omitzero"`
	EndsAt      time.Time         `json:"endsAt,omitzero"`
}

// Generator is the label value that marks gpuledger's alerts, so that it
// finds its own again after a restart.
const Generator = "gpuledger"

// Alert names.
const (
	AlertExpansion      = "GPUCapacityExpansion"
	AlertReclaim        = "GPUCapacityReclaim"
	AlertBudget         = "TeamBudgetSpent"
	AlertBudgetForecast = "TeamBudgetForecast"
)

// ExpansionAlerts makes an alert of every fired recommendation, with the
// evidence in its annotations.
func ExpansionAlerts(cluster, currency string, recs []Recommendation) []Alert {
	var out []Alert
	for _, r := range recs {
		if r.Action == ActionReclaim {
			out = append(out, reclaimAlert(cluster, currency, r.Flavor, "", "utilization", r.Verdict,
				fmt.Sprintf("Reclaim %.1f idle %s GPUs before buying: %.1f%% of them were held but %.1f%% busy over the last %d days",
					r.Reclaim.IdleGPUs, r.Flavor, 100*r.Allocated, 100*r.Active, r.Hours/24)))
			continue
		}
		if !r.Fired {
			continue
		}
		out = append(out, Alert{
			Labels: map[string]string{"alertname": AlertExpansion, "generator": Generator, "cluster": cluster, "flavor": r.Flavor,
				"trigger": "utilization", "severity": "warning", "action": "expand"},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("Buy %d more %s GPUs: they were %.1f%% busy (%.1f%% held) over the last %d days", r.PurchaseGPUs, r.Flavor,
					100*r.Active, 100*r.Allocated, r.Hours/24),
				"evidence": fmt.Sprintf("%s; %.0f GPUs in the last hour; series: ledger hours of cluster %s, flavor %s, allocated and active / existing GPU-seconds, %s to %s",
					r.Why, r.GPUs, cluster, r.Flavor, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339)),
				"recommendation": fmt.Sprintf("%d %s GPUs, %s %s a month at the flavor's price", r.PurchaseGPUs, r.Flavor, ledger.FormatCents(r.MonthlyCostMicros), currency),
				"what_if":        r.WhatIf,
				"allocated":      strconv.FormatFloat(r.Allocated, 'f', 4, 64),
				"active":         strconv.FormatFloat(r.Active, 'f', 4, 64),
				"window_start":   r.From.Format(time.RFC3339),
				"window_end":     r.To.Format(time.RFC3339),
			}})
		dropEmpty(out[len(out)-1].Annotations)
	}
	return out
}

// WaitAlerts makes an alert of every ClusterQueue the wait rule fired
// for, labelled with the queue and the flavor to buy, the daily waits in
// its evidence.
func WaitAlerts(cluster, currency string, waits []QueueWait) []Alert {
	var out []Alert
	for _, w := range waits {
		if w.Action == ActionReclaim {
			out = append(out, reclaimAlert(cluster, currency, w.Flavor, w.ClusterQueue, "queue_wait", w.Verdict,
				fmt.Sprintf("Reclaim %.1f idle %s GPUs of %s: its workloads waited %s for admission (p90) while its own GPUs were %.1f%% busy",
					w.Reclaim.IdleGPUs, w.Flavor, w.ClusterQueue, Duration(w.Wait), 100*w.Reclaim.HeldActive)))
			continue
		}
		if !w.Fired {
			continue
		}
		var daily []string
		for _, d := range w.Daily {
			daily = append(daily, fmt.Sprintf("%s %s", d.Day.Format("01-02"), Duration(d.Wait)))
		}
		rec := fmt.Sprintf("%d %s GPUs, %s %s a month at the flavor's price", w.PurchaseGPUs, w.Flavor, ledger.FormatCents(w.MonthlyCostMicros), currency)
		if w.Flavor == "" {
			rec = fmt.Sprintf("%d GPUs of the flavor queue %s runs on (none known: no workload of it ran in the window)", w.PurchaseGPUs, w.ClusterQueue)
		}
		out = append(out, Alert{
			Labels: map[string]string{"alertname": AlertExpansion, "generator": Generator, "cluster": cluster, "flavor": w.Flavor,
				"cluster_queue": w.ClusterQueue, "trigger": "queue_wait", "severity": "warning", "action": "expand"},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("Buy %d more %s GPUs: workloads of %s waited %s for admission (p90) over the last %d days", w.PurchaseGPUs, w.Flavor,
					w.ClusterQueue, Duration(w.Wait), w.Hours/24),
				"evidence": fmt.Sprintf("%s; daily: %s; %.1f GPUs pending on average over the last day; series: ledger queue hours of cluster %s, "+
					"kueue_admission_wait_time_seconds and the pending workloads' ages, %s to %s",
					w.Why, strings.Join(daily, ", "), w.PendingGPUs, cluster, w.From.Format(time.RFC3339), w.To.Format(time.RFC3339)),
				"recommendation": rec,
				"what_if":        w.WhatIf,
				"wait_seconds":   strconv.FormatFloat(w.Wait, 'f', 0, 64),
				"window_start":   w.From.Format(time.RFC3339),
				"window_end":     w.To.Format(time.RFC3339),
			}})
		dropEmpty(out[len(out)-1].Annotations)
	}
	return out
}

// reclaimAlert is the alert of a reclaim verdict on a flavor (or a
// ClusterQueue): the GPUs held idle, what they cost a month, who holds
// them.
func reclaimAlert(cluster, currency, flavor, queue, trigger string, v Verdict, summary string) Alert {
	var holders []string
	for _, h := range v.Reclaim.Holders {
		holder := fmt.Sprintf("%s/%s %.1f idle of %.1f held (%s %s a month)", h.Team, h.Namespace, h.IdleGPUs, h.HeldGPUs,
			ledger.FormatCents(h.IdleCostMonthlyMicros), currency)
		if len(h.Workloads) > 0 {
			holder += ", its most idle workloads: " + IdleWorkloads(h.Workloads, currency)
		}
		holders = append(holders, holder)
	}
	a := Alert{
		Labels: map[string]string{"alertname": AlertReclaim, "generator": Generator, "cluster": cluster, "flavor": flavor, "cluster_queue": queue,
			"trigger": trigger, "severity": "warning", "action": "reclaim"},
		Annotations: map[string]string{
			"summary":  summary,
			"evidence": fmt.Sprintf("%s; window %s to %s", v.Why, v.From.Format(time.RFC3339), v.To.Format(time.RFC3339)),
			"recommendation": fmt.Sprintf("give back %.1f GPUs held idle (%s %s a month) before buying; most idle: %s", v.Reclaim.IdleGPUs,
				ledger.FormatCents(v.Reclaim.IdleCostMonthlyMicros), currency, strings.Join(holders, "; ")),
			"idle_gpus":    strconv.FormatFloat(v.Reclaim.IdleGPUs, 'f', 2, 64),
			"what_if":      v.WhatIf,
			"window_start": v.From.Format(time.RFC3339),
			"window_end":   v.To.Format(time.RFC3339),
		}}
	dropEmpty(a.Labels)
	dropEmpty(a.Annotations)
	return a
}

// BudgetAlerts makes an alert of every team at or past a budget level
// (the highest one it has reached) and of every team whose forecast
// passes its budget before it has.
func BudgetAlerts(cluster, currency string, budgets []Budget) []Alert {
	severity := map[int]string{50: "info", 80: "warning", 100: "critical"}
	var out []Alert
	for _, b := range budgets {
		money := func(m int64) string { return ledger.FormatCents(m) + " " + currency }
		if b.Level > 0 {
			out = append(out, Alert{
				Labels: map[string]string{"alertname": AlertBudget, "generator": Generator, "cluster": cluster, "team": b.Team,
					"threshold": strconv.Itoa(b.Level), "severity": severity[b.Level], "action": "review-spend"},
				Annotations: map[string]string{
					"summary":  fmt.Sprintf("Team %s has spent %d%% of its monthly budget", b.Team, b.Level),
					"evidence": fmt.Sprintf("%s spent this month of a %s budget; at this rate %s by the month's end", money(b.MonthToDateMicros), money(b.BudgetMicros), money(b.ForecastMicros)),
				}})
		}
		if b.ForecastLevel >= 100 && b.Level < 100 {
			out = append(out, Alert{
				Labels: map[string]string{"alertname": AlertBudgetForecast, "generator": Generator, "cluster": cluster, "team": b.Team,
					"severity": "warning", "action": "review-spend"},
				Annotations: map[string]string{
					"summary":  fmt.Sprintf("Team %s is on course to pass its monthly budget", b.Team),
					"evidence": fmt.Sprintf("%s spent this month; at this rate %s by the month's end, past its %s budget", money(b.MonthToDateMicros), money(b.ForecastMicros), money(b.BudgetMicros)),
				}})
		}
	}
	return out
}

// Alertmanager pushes alerts to an Alertmanager's API v2.
type Alertmanager struct {
	// URL is the Alertmanager's base URL, such as http://alertmanager:9093.
	URL    string
	Client *http.Client
}

// fingerprint identifies an alert by its labels, as Alertmanager does.
func fingerprint(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\x00" + labels[k] + "\x00")
	}
	return b.String()
}

// Sync makes the Alertmanager's picture of the cluster's gpuledger alerts
// the given one: each current alert is sent with an end of now + ttl (so
// that it resolves by itself if gpuledger stops; send again before then),
// keeping the start Alertmanager already has for it; each alert of the
// cluster Alertmanager has from gpuledger that is no longer current is
// sent as resolved. Alertmanager keeps the state, so a restarted gpuledger
// neither duplicates nor forgets an alert.
func (a *Alertmanager) Sync(ctx context.Context, cluster string, alerts []Alert, now time.Time, ttl time.Duration) (sent, resolved int, err error) {
	existing, err := a.list(ctx, cluster)
	if err != nil {
		return 0, 0, err
	}
	started := map[string]time.Time{}
	for _, e := range existing {
		started[fingerprint(e.Labels)] = e.StartsAt
	}
	current := map[string]bool{}
	var batch []Alert
	for _, al := range alerts {
		fp := fingerprint(al.Labels)
		current[fp] = true
		al.StartsAt = now
		if s, ok := started[fp]; ok && !s.IsZero() && s.Before(now) {
			al.StartsAt = s
		}
		al.EndsAt = now.Add(ttl)
		batch = append(batch, al)
	}
	for _, e := range existing {
		if !current[fingerprint(e.Labels)] {
			e.EndsAt = now
			batch = append(batch, e)
			resolved++
		}
	}
	if len(batch) == 0 {
		return 0, 0, nil
	}
	if err := a.post(ctx, batch); err != nil {
		return 0, 0, err
	}
	return len(alerts), resolved, nil
}

func (a *Alertmanager) client() *http.Client {
	if a.Client != nil {
		return a.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// list returns the active alerts gpuledger raised for the cluster.
func (a *Alertmanager) list(ctx context.Context, cluster string) ([]Alert, error) {
	return a.Active(ctx, map[string]string{"generator": Generator, "cluster": cluster})
}

// Active returns the active alerts (silenced and inhibited included) whose
// labels have the given values.
func (a *Alertmanager) Active(ctx context.Context, match map[string]string) ([]Alert, error) {
	q := url.Values{}
	keys := make([]string, 0, len(match))
	for k := range match {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("filter", fmt.Sprintf("%s=%q", k, match[k]))
	}
	q.Set("active", "true")
	q.Set("silenced", "true")
	q.Set("inhibited", "true")
	q.Set("unprocessed", "true")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.URL, "/")+"/api/v2/alerts?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("alertmanager URL %q: %w", a.URL, err)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("list the alerts in Alertmanager: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list the alerts in Alertmanager: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var out []Alert
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("Alertmanager's alert list: %w", err)
	}
	return out, nil
}

func (a *Alertmanager) post(ctx context.Context, alerts []Alert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.URL, "/")+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alertmanager URL %q: %w", a.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client().Do(req)
	if err != nil {
		return fmt.Errorf("send alerts to Alertmanager: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("send alerts to Alertmanager: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// dropEmpty removes the annotations with no value (an evidence line that
// does not apply).
func dropEmpty(m map[string]string) {
	maps.DeleteFunc(m, func(_, v string) bool { return v == "" })
}

// IdleWorkloads names workloads with the GPU-hours they held idle and
// what that cost, for a reclaim verdict's reader.
func IdleWorkloads(ws []ledger.WorkloadRow, currency string) string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s/%s %.0f idle GPU-h (%s %s)", w.Kind, w.Name, w.IdleGPUSeconds()/3600, ledger.FormatCents(w.IdleCostMicros), currency))
	}
	return strings.Join(out, ", ")
}
