package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/reports"
)

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("serve", `Serves the cost API (/api/v1/cost, /api/v1/workloads), chargeback downloads
(/api/v1/reports/chargeback/YYYY-MM?format=csv|xlsx), /healthz and /metrics from a ledger,
and keeps the ledger current: it takes Prometheus remote write on POST /api/v1/write
(point vmagent or Prometheus at it) and can scrape exporters itself (-scrape.targets).
An hour is written once it is -ingest.lag old.`, stdout)
	cfgPath := fs.String("config", "examples/cluster.yaml", "business-data configuration file (cluster, teams, prices, budgets)")
	cluster := fs.String("cluster", "", "cluster the received telemetry is from; empty for the only one")
	openStore := storeFlags(fs, "gpuledger-data/ledger")
	listen := fs.String("http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	remoteWrite := fs.Bool("remoteWrite", true, "accept Prometheus remote write on POST /api/v1/write")
	targets := fs.String("scrape.targets", "", "comma-separated exporter URLs to scrape (dcgm-exporter, kube-state-metrics), e.g. http://node-1:9400/metrics")
	interval := fs.Duration("scrape.interval", 15*time.Second, "scrape interval, and how long a last sample counts")
	lag := fs.Duration("ingest.lag", 5*time.Minute, "how long after an hour ends it is written; later samples for it are rejected as late")
	newLogger := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger()
	cfg, model, err := loadModel(*cfgPath, *cluster)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	pl, err := ingest.NewPipeline(model, attribution.Options{ScrapeIntervalMs: interval.Milliseconds()}, store,
		ingest.PipelineOptions{Lag: *lag, Logger: log})
	if err != nil {
		return err
	}
	opts := api.Options{Store: store, Logger: log, Report: reportOptions(cfg, ""), IngestStats: pl.Stats, Gauges: storeGauges(store)}
	if *remoteWrite {
		opts.Ingest = pl
	}
	go pl.Run(ctx, time.Minute)
	if ts := splitList(*targets); len(ts) > 0 {
		go ingest.NewScraper(pl, ingest.ScrapeOptions{Targets: ts, Interval: *interval, Logger: log}).Run(ctx)
	}
	log.Info("serving", "addr", *listen, "remoteWrite", *remoteWrite, "scrapeTargets", len(splitList(*targets)))
	err = api.New(opts).ListenAndServe(ctx, *listen)
	if ferr := pl.Flush(context.Background()); ferr != nil {
		log.Error("final ledger flush failed", "err", ferr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; pass another -http.listenAddr", err)
	}
	return nil
}

func runReport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("report", "Writes the chargeback of one month from a ledger as chargeback-YYYY-MM.csv and .xlsx.", stdout)
	cfgPath := fs.String("config", "examples/cluster.yaml", "business-data configuration file (teams, budgets, currency)")
	openStore := storeFlags(fs, "gpuledger-demo/ledger")
	monthFlag := fs.String("month", "", "month to report, YYYY-MM (required)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	out := fs.String("out", ".", "folder to write the reports into")
	format := fs.String("format", "csv,xlsx", "comma-separated formats: csv, xlsx")
	newLogger := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	month, err := time.Parse("2006-01", *monthFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	cb, err := reports.Build(ctx, store, month, reportOptions(cfg, *cluster))
	if err != nil {
		return err
	}
	paths, err := writeReport(cb, *out, splitList(*format))
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	return nil
}

// reportOptions labels and budgets reports from the configuration.
func reportOptions(cfg *config.Config, cluster string) reports.Options {
	return reports.Options{Currency: cfg.Currency, Teams: cfg.TeamNames(), Budgets: cfg.TeamBudgets(), Cluster: cluster}
}

// loadModel reads the configuration and one cluster's cost model from it.
func loadModel(path, cluster string) (*config.Config, *attribution.Model, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	model, err := cfg.AttributionModel(cluster)
	if err != nil {
		return nil, nil, err
	}
	return cfg, model, nil
}
