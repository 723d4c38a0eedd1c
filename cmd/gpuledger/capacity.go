package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/sim"
)

func runCapacity(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("capacity", `Reads the ledger and says, per GPU flavor, whether to buy more: the expansion
trigger buys when the flavor's GPUs were busy (DCGM's activity; capacity.measure
allocated: held by pods, as Kubernetes says) for at least
capacity.utilizationPercent (80) of their time over the last capacity.windowDays
(30), with the ledger holding the flavor since before the window and for 95% of
its hours. A flavor held that much but busy less is told to reclaim: the GPUs
held idle, what they cost a month, and the namespaces that hold them. A buy
names the block (capacity.purchaseGPUs, 72), its monthly cost at the flavor's
price, the evidence, and, when the trigger has not fired but the daily share
rises, when its trend crosses the threshold. It buys too for a ClusterQueue
whose workloads wait for admission while the GPUs its own pods hold are busy
(else it says reclaim): their capacity.waitPercentile (90th) wait over
capacity.waitMinutes (30) over capacity.waitWindowDays (7) and over its last
day, counting the workloads still pending at their wait so far (Kueue's
kueue_admission_wait_time_seconds and pending workloads, with the pending ages
gpuledger controller exports, ingested like DCGM's series); it names the flavor
the queue runs on. It also shows each budgeted team's month-to-date and
forecast spend against its budget (alerts at 50, 80 and 100%).

With -alertmanager.url the alerts go to Alertmanager's API v2 (labels alertname,
cluster, flavor, cluster_queue or team, trigger, severity, action,
generator="gpuledger"; the evidence
in annotations), resolved when the condition clears; Alertmanager keeps the
state, so a restart neither duplicates nor forgets one. With -interval it runs
until interrupted, sending again each time.`, stdout)
	cfgPath := configFlag(fs, "business-data configuration file (prices, budgets, capacity)")
	cluster := fs.String("cluster", "", "cluster of the configuration; empty for the only one")
	openStore := storeFlags(fs, defaultLedgerPath, storeRead)
	at := fs.String("at", "", "evaluate as of this time (RFC 3339); default now")
	amURL := fs.String("alertmanager.url", "", "Alertmanager to send the alerts to, such as http://alertmanager:9093; empty: print only")
	interval := fs.Duration("interval", 0, "evaluate again every interval until interrupted (0: once)")
	newLogger := logFlags(fs)
	log, cfg, err := parseWithConfig(fs, args, cfgPath, newLogger)
	if err != nil {
		return err
	}
	am, err := cfg.AttributionModel(*cluster)
	if err != nil {
		return err
	}
	rule := capacity.RuleOf(cfg.Capacity)
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return usageError{fmt.Sprintf("-at=%q is not RFC 3339; want such as 2026-11-30T12:00:00Z", *at)}
		}
		now = func() time.Time { return t }
	}
	if *interval < 0 || (*interval > 0 && *amURL == "") {
		return usageError{fmt.Sprintf("-interval=%s: want 0, or a positive interval with -alertmanager.url", *interval)}
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	prices := capacityOptions(cfg, am.Cluster).PricesMicros
	var alertmanager *capacity.Alertmanager
	if *amURL != "" {
		alertmanager = &capacity.Alertmanager{URL: *amURL}
	}
	for {
		if err := evaluateCapacity(ctx, stdout, log, store, am.Cluster, cfg, rule, prices, now(), alertmanager, 3*max(*interval, 5*time.Minute)); err != nil {
			if *interval == 0 {
				return err
			}
			log.Warn("capacity not evaluated", "err", err)
		}
		if *interval == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

func evaluateCapacity(ctx context.Context, w io.Writer, log *slog.Logger, store ledger.Store, cluster string, cfg *config.Config,
	rule capacity.Rule, prices map[string]int64, now time.Time, am *capacity.Alertmanager, ttl time.Duration) error {
	recs, err := capacity.Evaluate(ctx, store, cluster, now, rule, prices)
	if err != nil {
		return err
	}
	wr := capacity.WaitRuleOf(cfg.Capacity)
	waits, err := capacity.EvaluateWaits(ctx, store, cluster, now, wr, prices)
	if err != nil {
		return err
	}
	budgets, err := capacity.Budgets(ctx, store, cluster, cfg.TeamBudgets(), now)
	if err != nil {
		return err
	}
	whatIfs, err := sim.WhatIfs(ctx, store, cfg, cluster, now, recs, waits)
	if err != nil {
		return err
	}
	cur := cfg.Currency
	rep := capacity.Report{Cluster: cluster, At: now, Currency: cur, Rule: rule, WaitRule: wr, Expansion: recs, Waits: waits, WhatIfs: whatIfs,
		WhatIfDays: int(sim.WhatIfWindow.Hours() / 24), Budgets: budgets}
	if err := rep.WriteText(w); err != nil {
		return err
	}
	alerts := append(capacity.ExpansionAlerts(cluster, cur, recs), capacity.WaitAlerts(cluster, cur, waits)...)
	alerts = append(alerts, capacity.BudgetAlerts(cluster, cur, budgets)...)
	var names []string
	for _, a := range alerts {
		labels := slices.DeleteFunc([]string{a.Labels["flavor"], a.Labels["cluster_queue"], a.Labels["team"]}, func(s string) bool { return s == "" })
		names = append(names, a.Labels["alertname"]+"{"+strings.Join(labels, ",")+"}")
	}
	if am == nil {
		fmt.Fprintf(w, "\n%d alerts: %s (pass -alertmanager.url to send them)\n", len(alerts), strings.Join(names, ", "))
		return nil
	}
	sent, resolved, err := am.Sync(ctx, cluster, alerts, time.Now(), ttl)
	if err != nil {
		return fmt.Errorf("%w; check -alertmanager.url", err)
	}
	fmt.Fprintf(w, "\nAlertmanager %s: %d alerts sent (%s), %d resolved\n", am.URL, sent, strings.Join(names, ", "), resolved)
	return nil
}

func runRules(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("rules", `Writes vmalert/Prometheus rule groups that express the verdicts of gpuledger
capacity on the raw metrics, for users who alert from their TSDB: recording
rules every 5 minutes for each flavor's GPUs, those held (kube-state-metrics:
nvidia.com/gpu requested by Running pods, the nodes of each flavor taken from
the configuration) and those busy (dcgm-exporter's GR engine activity, else
GPU_UTIL/100); then, over capacity.windowDays, guarded by a sample count (95%
of the window) and data from before the window, never a 'for' of 30 days:
GPUCapacityExpansion when the share of capacity.measure (busy by default) is
at or over capacity.utilizationPercent, and GPUCapacityReclaim when the held
share is but the busy one is not (buying would add idle GPUs). On MIG nodes
the slices count as whole-GPU equivalents (3g.40gb: 3/7), as in the ledger:
nvidia.com/mig-* requests and each instance's GR engine activity by its
GPU_I_PROFILE. The queue-wait
trigger too: recording rules for each ClusterQueue's admitted waits
(kueue_admission_wait_time_seconds' increase), its pending workloads' ages
(gpuledger controller's metrics) and the GPUs its LocalQueues' namespaces hold
and keep busy, then, when the p90 of the window's waits and of its last day's
are both over capacity.waitMinutes, with the same guards:
GPUCapacityReclaim{trigger="queue_wait"} when the queue's own GPUs were busy
less than capacity.utilizationPercent of their held time, else
GPUCapacityExpansion{trigger="queue_wait"}, labelled with the flavor of the
queue's quota.`, stdout)
	cfgPath := configFlag(fs, "business-data configuration file (clusters, nodes and their flavors, capacity)")
	cluster := fs.String("cluster", "", "cluster of the configuration; empty for the only one")
	out := fs.String("out", "", "file to write the rules to; empty: standard output")
	kueueMatch := fs.String("kueue.match", "", `label matchers that select this cluster's Kueue, controller, kube-state-metrics and DCGM series in a TSDB shared by clusters (the flavors' series are told apart by their nodes), such as cluster="prod"; empty: all`)
	newLogger := logFlags(fs)
	_, cfg, err := parseWithConfig(fs, args, cfgPath, newLogger)
	if err != nil {
		return err
	}
	c, err := cfg.Cluster(*cluster)
	if err != nil {
		return err
	}
	flavors, queues, err := capacity.RuleInputsOf(cfg, c)
	if err != nil {
		return err
	}
	doc := capacity.PrometheusRules(c.Name, flavors, capacity.RuleOf(cfg.Capacity)) + capacity.PrometheusWaitRules(c.Name, queues, capacity.WaitRuleOf(cfg.Capacity), *kueueMatch)
	if *out == "" {
		_, err := io.WriteString(stdout, doc)
		return err
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d flavors of cluster %s\n", *out, len(flavors), c.Name)
	return nil
}

// capacityOptions are the capacity routes' business data from the
// configuration.
func capacityOptions(cfg *config.Config, cluster string) api.CapacityOptions {
	prices := map[string]int64{}
	for _, f := range cfg.ResourceFlavors {
		prices[f.Name] = cfg.PriceMicros(f.Name)
	}
	return api.CapacityOptions{Cluster: cluster, Rule: capacity.RuleOf(cfg.Capacity), WaitRule: capacity.WaitRuleOf(cfg.Capacity), PricesMicros: prices, Budgets: cfg.TeamBudgets(),
		Endpoints: capacity.EndpointOptionsOf(cfg.Capacity, prices)}
}
