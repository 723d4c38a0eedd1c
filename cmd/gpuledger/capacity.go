package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/sim"
)

func runCapacity(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("capacity", stdout)
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
		if err := evaluateCapacity(ctx, stdout, store, am.Cluster, cfg, prices, now(), alertmanager, 3*max(*interval, 5*time.Minute)); err != nil {
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

func evaluateCapacity(ctx context.Context, w io.Writer, store ledger.Store, cluster string, cfg *config.Config,
	prices map[string]int64, now time.Time, am *capacity.Alertmanager, ttl time.Duration) error {
	a, err := capacity.Assess(ctx, capacity.AssessOptions{Store: store, Config: cfg, Cluster: cluster, Now: now, Prices: prices,
		WhatIfDays: int(sim.WhatIfWindow.Hours() / 24),
		WhatIfs: func(ctx context.Context, recs []capacity.Recommendation, waits []capacity.QueueWait) ([]string, error) {
			return sim.WhatIfs(ctx, store, cfg, cluster, now, recs, waits)
		}})
	if err != nil {
		return err
	}
	if err := a.Report.WriteText(w); err != nil {
		return err
	}
	if am == nil {
		fmt.Fprintf(w, "\n%d alerts: %s (pass -alertmanager.url to send them)\n", len(a.Alerts), a.AlertNames())
		return nil
	}
	sent, resolved, err := am.Sync(ctx, cluster, a.Alerts, time.Now(), ttl)
	if err != nil {
		return fmt.Errorf("%w; check -alertmanager.url", err)
	}
	fmt.Fprintf(w, "\nAlertmanager %s: %d alerts sent (%s), %d resolved\n", am.URL, sent, a.AlertNames(), resolved)
	return nil
}

func runRules(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("rules", stdout)
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
