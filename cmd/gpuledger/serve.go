package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
	"github.com/gpuledger/gpuledger/reports"
)

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("serve", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (cluster, teams, prices, budgets, tokens)")
	cluster := fs.String("cluster", "", "cluster the received telemetry is from; empty for the only one")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Serve)
	var sf api.ServeFlags
	var lf ingest.LiveFlags
	sf.Register(fs)
	lf.Register(fs)
	clock := flagutil.Clock(fs)
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	var ao attribution.Options
	budget, from, err := lf.Budget(&ao)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	log.Info("memory budget", "limit", budget.Limit, "from", from, "remoteWriteInflightBytes", budget.Inflight, "reorderWindowBytes", budget.Buffer,
		"pods", budget.Pods, "goMemoryLimit", budget.GoLimit)
	model, err := cfg.AttributionModel(*cluster)
	if err != nil {
		return err
	}
	auth, err := api.LoadAuth(cfg, sf.TokensFile, sf.NoAuth, sf.Listen, log)
	if err != nil {
		return err
	}
	now, err := clock()
	if err != nil {
		return err
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	lf.Pipeline.Logger, lf.Pipeline.Now = log, now
	pl, err := ingest.NewPipeline(model, ao, store, lf.Pipeline)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	opts := sf.Options
	opts.Store, opts.Logger, opts.Auth, opts.Report, opts.Capacity = store, log, auth, reportOptions(cfg, ""), api.CapacityOptions(capacity.SettingsOf(cfg, model.Cluster))
	opts.Stats, opts.Health, opts.MaxInflightBytes, opts.Generation, opts.Version = pl.Stats, pl.Health, budget.Inflight, pl.Writes, version
	if sf.TokensFile != "" {
		opts.TokenFiles = []string{sf.TokensFile}
		opts.ReloadTokens = func() ([]api.Token, error) { return api.TokensOf(cfg, sf.TokensFile) }
	}
	if sf.RemoteWrite {
		opts.Ingest = pl
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		pl.Run(runCtx, time.Second)
		close(done)
	}()
	if len(lf.Targets) > 0 {
		go ingest.NewScraper(pl, ingest.ScrapeOptions{Targets: lf.Targets, Interval: lf.Interval, Logger: log, Now: now}).Run(ctx)
	}
	log.Info("serving", "addr", sf.Listen, "tls", opts.TLSCertFile != "", "auth", auth != nil, "remoteWrite", sf.RemoteWrite,
		"scrapeTargets", len(lf.Targets), "ingestDir", lf.Pipeline.Dir)
	err = api.New(opts).ListenAndServe(ctx, sf.Listen)
	// Stop: write what is settled, save the open hour's state for the
	// restart.
	stopRun()
	<-done
	if cerr := pl.Close(context.Background()); cerr != nil {
		log.Error("pipeline shutdown", "err", cerr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; pass another -http.listenAddr", err)
	}
	return nil
}

func runReport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("report", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (teams, budgets, currency)")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Read)
	month := flagutil.Month(fs, "month", "", "month to report, YYYY-MM (required)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	out := fs.String("out", ".", "folder to write the reports into")
	format := fs.String("format", "csv,xlsx", "comma-separated formats: csv, xlsx, focus (FOCUS 1.3 cost and usage rows, focus-YYYY-MM.csv)")
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	if month.IsZero() {
		return flagutil.Usagef("report needs -month, YYYY-MM such as 2026-10")
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	formats := flagutil.Split(*format)
	opts := reportOptions(cfg, *cluster)
	opts.FOCUS = slices.Contains(formats, "focus")
	cb, err := reports.Build(ctx, store, *month, opts)
	if err != nil {
		return err
	}
	paths, err := cb.WriteFiles(*out, formats)
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	return err
}

// reportOptions labels and budgets reports from the configuration.
func reportOptions(cfg *config.Config, cluster string) reports.Options {
	s := capacity.SettingsOf(cfg, cluster)
	return reports.Options{Currency: cfg.Currency, Teams: cfg.TeamNames(), Budgets: cfg.TeamBudgets(), Cluster: cluster,
		Capacity: &s.Rule, Wait: &s.WaitRule, Endpoints: &s.Endpoints, PricesMicros: s.PricesMicros}
}
