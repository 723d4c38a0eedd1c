package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
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
	rule := capacityRule(cfg.Capacity)
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

// waitRule is the configuration's queue-wait trigger.
func waitRule(c *config.Capacity) capacity.WaitRule {
	r := capacity.DefaultWaitRule
	if c == nil {
		return r
	}
	if c.PurchaseGPUs > 0 {
		r.PurchaseGPUs = c.PurchaseGPUs
	}
	if c.WaitMinutes > 0 {
		r.Threshold = time.Duration(c.WaitMinutes) * time.Minute
	}
	if c.WaitPercentile > 0 {
		r.Quantile = float64(c.WaitPercentile) / 100
	}
	if c.WaitWindowDays > 0 {
		r.Window = time.Duration(c.WaitWindowDays) * 24 * time.Hour
	}
	if c.UtilizationPercent > 0 {
		r.Busy = float64(c.UtilizationPercent) / 100
	}
	return r
}

// endpointOptions is the configuration's cold start, for scale-to-zero on
// the ledger's endpoints; prices is the flavors', whose highest is the
// price of an endpoint's GPU-hour where its workload has none.
func endpointOptions(c *config.Capacity, prices map[string]int64) capacity.EndpointOptions {
	o := capacity.DefaultEndpointOptions
	if len(prices) > 0 {
		o.PriceMicros = slices.Max(slices.Collect(maps.Values(prices)))
	}
	if c == nil {
		return o
	}
	if c.ColdStartSeconds > 0 {
		o.Default = time.Duration(c.ColdStartSeconds) * time.Second
	}
	if c.ColdStartPenalty.Set {
		o.PenaltyMicros = c.ColdStartPenalty.Micros
	}
	o.Loads = map[string]time.Duration{}
	for m, s := range c.ColdStartModels {
		o.Loads[m] = time.Duration(s) * time.Second
	}
	for _, sc := range c.SLAClasses {
		class := capacity.SLAClass{Name: sc.Name, Namespaces: sc.Namespaces, PenaltyMicros: o.PenaltyMicros, MaxP95: time.Duration(sc.MaxP95ExtraSeconds) * time.Second}
		if sc.ColdStartPenalty.Set {
			class.PenaltyMicros = sc.ColdStartPenalty.Micros
		}
		if sc.MaxP95ExtraSeconds < 0 {
			class.MaxP95 = -1
		}
		o.Classes = append(o.Classes, class)
	}
	return o
}

// capacityRule is the configuration's expansion trigger.
func capacityRule(c *config.Capacity) capacity.Rule {
	r := capacity.DefaultRule
	if c == nil {
		return r
	}
	if c.PurchaseGPUs > 0 {
		r.PurchaseGPUs = c.PurchaseGPUs
	}
	if c.UtilizationPercent > 0 {
		r.Threshold = float64(c.UtilizationPercent) / 100
	}
	if c.WindowDays > 0 {
		r.Window = time.Duration(c.WindowDays) * 24 * time.Hour
	}
	if c.Measure != "" {
		r.Measure = capacity.Measure(c.Measure)
	}
	return r
}

func evaluateCapacity(ctx context.Context, w io.Writer, log *slog.Logger, store ledger.Store, cluster string, cfg *config.Config,
	rule capacity.Rule, prices map[string]int64, now time.Time, am *capacity.Alertmanager, ttl time.Duration) error {
	recs, err := capacity.Evaluate(ctx, store, cluster, now, rule, prices)
	if err != nil {
		return err
	}
	wr := waitRule(cfg.Capacity)
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
	byFlavor := map[string]*capacity.RuleFlavor{}
	for _, n := range c.Nodes {
		layout, err := ruleSlices(n)
		if err != nil {
			return err
		}
		f := byFlavor[n.Flavor]
		if f == nil {
			f = &capacity.RuleFlavor{Name: n.Flavor, MIG: layout}
			byFlavor[n.Flavor] = f
		}
		if !slices.Equal(f.MIG, layout) {
			return fmt.Errorf("flavor %s: node %s is partitioned %v (%s), another node otherwise; the rules count one layout per flavor: give the layouts flavors of their own",
				n.Flavor, n.Name, n.MIG, n.GPUModel)
		}
		f.Nodes = append(f.Nodes, n.Name)
	}
	var flavors []capacity.RuleFlavor
	for _, f := range byFlavor {
		flavors = append(flavors, *f)
	}
	namespaces := map[string][]string{}
	for _, lq := range cfg.LocalQueues {
		if !slices.Contains(namespaces[lq.ClusterQueue], lq.Namespace) {
			namespaces[lq.ClusterQueue] = append(namespaces[lq.ClusterQueue], lq.Namespace)
		}
	}
	var queues []capacity.RuleQueue
	for _, q := range cfg.ClusterQueues {
		if len(q.Flavors) > 0 {
			queues = append(queues, capacity.RuleQueue{Name: q.Name, Flavor: q.Flavors[0].Name, Namespaces: namespaces[q.Name]})
		}
	}
	doc := capacity.PrometheusRules(c.Name, flavors, capacityRule(cfg.Capacity)) + capacity.PrometheusWaitRules(c.Name, queues, waitRule(cfg.Capacity), *kueueMatch)
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

// ruleSlices is a node's MIG layout for the rules, parsed by the ledger's
// own rules: each profile's compute slices of its GPU model's, and its
// resource as kube-state-metrics names it.
func ruleSlices(n config.Node) ([]capacity.RuleSlice, error) {
	var out []capacity.RuleSlice
	for _, p := range n.MIG {
		mp, err := attribution.ParseMIGProfile(p)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out = append(out, capacity.RuleSlice{Profile: p, Resource: attribution.SanitizeName(config.MIGResourcePrefix + p),
			Slices: mp.ComputeSlices, Of: attribution.MIGComputeSlices(n.GPUModel)})
	}
	return out, nil
}

// capacityOptions are the capacity routes' business data from the
// configuration.
func capacityOptions(cfg *config.Config, cluster string) api.CapacityOptions {
	prices := map[string]int64{}
	for _, f := range cfg.ResourceFlavors {
		prices[f.Name] = cfg.PriceMicros(f.Name)
	}
	return api.CapacityOptions{Cluster: cluster, Rule: capacityRule(cfg.Capacity), WaitRule: waitRule(cfg.Capacity), PricesMicros: prices, Budgets: cfg.TeamBudgets(),
		Endpoints: endpointOptions(cfg.Capacity, prices)}
}
