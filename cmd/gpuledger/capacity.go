package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
	"github.com/gpuledger/gpuledger/sim"
)

func runCapacity(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("capacity", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (prices, budgets, capacity)")
	cluster := fs.String("cluster", "", "cluster of the configuration; empty for the only one")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Read)
	at := flagutil.Time(fs, "at", "evaluate as of this time (RFC 3339); default now")
	amURL := fs.String("alertmanager.url", "", "Alertmanager to send the alerts to, such as http://alertmanager:9093; empty: print only")
	interval := fs.Duration("interval", 0, "evaluate again every interval until interrupted (0: once)")
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	am, err := cfg.AttributionModel(*cluster)
	if err != nil {
		return err
	}
	w := capacity.Watch{Now: time.Now, Interval: *interval, Log: log}
	if !at.IsZero() {
		w.Now = func() time.Time { return *at }
	}
	if *amURL != "" {
		w.Alertmanager = &capacity.Alertmanager{URL: *amURL}
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	w.Assess = capacity.AssessOptions{Store: store, Config: cfg, Cluster: am.Cluster, Prices: capacity.SettingsOf(cfg, am.Cluster).PricesMicros,
		WhatIfDays: int(sim.WhatIfWindow.Hours() / 24),
		WhatIfs: func(ctx context.Context, now time.Time, recs []capacity.Recommendation, waits []capacity.QueueWait) ([]string, error) {
			return sim.WhatIfs(ctx, store, cfg, am.Cluster, now, recs, waits)
		}}
	return w.Run(ctx, stdout)
}

func runRules(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("rules", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (clusters, nodes and their flavors, capacity)")
	cluster := fs.String("cluster", "", "cluster of the configuration; empty for the only one")
	out := fs.String("out", "", "file to write the rules to; empty: standard output")
	kueueMatch := fs.String("kueue.match", "", `label matchers that select this cluster's Kueue, controller, kube-state-metrics and DCGM series in a TSDB shared by clusters (the flavors' series are told apart by their nodes), such as cluster="prod"; empty: all`)
	_, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	doc, name, flavors, err := capacity.RulesDocument(cfg, *cluster, *kueueMatch)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err := io.WriteString(stdout, doc)
		return err
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d flavors of cluster %s\n", *out, flavors, name)
	return nil
}
