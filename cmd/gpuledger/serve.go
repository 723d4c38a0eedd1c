package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/reports"
)

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("serve", stdout)
	cfgPath := configFlag(fs, "business-data configuration file (cluster, teams, prices, budgets, tokens)")
	cluster := fs.String("cluster", "", "cluster the received telemetry is from; empty for the only one")
	openStore := storeFlags(fs, defaultLedgerPath, storeServe)
	listen := fs.String("http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	tlsCert := fs.String("http.tlsCertFile", "", "TLS certificate (PEM) to serve HTTPS with; read again when its contents change (a pair that does not load keeps the old one, logged and counted in gpuledger_reload_failures_total)")
	tlsKey := fs.String("http.tlsKeyFile", "", "TLS private key (PEM) of -http.tlsCertFile")
	tokensFile := fs.String("auth.tokensFile", "", "YAML file of more API tokens (tokens: [{name, sha256, scopes}]), such as a mounted Secret; read again when its contents change (a token taken out is refused within 10 s)")
	noAuth := fs.Bool("auth.disabled", false, "serve without tokens: anyone who reaches the port reads every team's costs and writes samples; for a trial on 127.0.0.1 only")
	remoteWrite := fs.Bool("remoteWrite", true, "accept Prometheus remote write on POST /api/v1/write")
	maxBody := fs.Int64("remoteWrite.maxBytes", 16<<20, "largest compressed remote-write body; larger ones are answered 413")
	maxInflight := fs.Int64("remoteWrite.maxInflightBytes", 128<<20, "remote-write bytes handled at once; past it requests are answered 429")
	maxSeries := fs.Int("remoteWrite.maxSeries", 200_000, "most series in one remote-write request")
	targets := fs.String("scrape.targets", "", "comma-separated exporter URLs to scrape (dcgm-exporter, kube-state-metrics), e.g. http://node-1:9400/metrics")
	interval := fs.Duration("scrape.interval", 15*time.Second, "scrape interval, and how long a last sample counts")
	dir := fs.String("ingest.dir", "gpuledger-data/pipeline", "directory of the write-ahead log and snapshots of the live pipeline; keep it on a persistent volume")
	settle := fs.Duration("ingest.settleAfter", 10*time.Minute, "how long after an hour ends it is settled: written, and closed to late samples")
	maxAhead := fs.Duration("ingest.maxAhead", 2*time.Minute, "samples stamped further ahead of this server's clock are rejected (must be less than -ingest.settleAfter)")
	window := fs.Duration("ingest.reorderWindow", 2*time.Minute, "how long (of sample time) samples wait to be put in time order: requests from several vmagent queues arrive out of order, by seconds live and by an outage's length after one; at most -ingest.settleAfter less 5 minutes")
	catchUp := fs.Duration("ingest.catchUpWindow", 10*time.Minute, "the least reorder window while a backlog comes in (requests more than -ingest.reorderWindow behind the clock, and that long after the last): after an outage each vmagent queue retries the block it held at its own time, as old as the outage is long, so the window is as deep as the backlog when that is longer, within -ingest.maxBuffered; a negative value, or one no longer than -ingest.reorderWindow, keeps -ingest.reorderWindow")
	maxBuffered := fs.Int("ingest.maxBuffered", 5_000_000, "most samples and pod facts waiting in the reorder window; past it (or past a quarter of -ingest.memoryLimit in bytes: 32 bytes an item and the labels it brought, a few hundred for a pod seen for the first time) the oldest are put in order early (gpuledger_ingest_shed_samples_total), and a held block of a backlog that deep can come out of order: 5,000,000 is about 23 minutes of 10,000 GPUs' kept series")
	memLimit := fs.String("ingest.memoryLimit", "", "memory serve may use in all, such as 4GiB: an eighth of it for the remote-write bytes in flight (as sent and as they decode; at most -remoteWrite.maxInflightBytes), a quarter for the reorder window (past it the oldest are put in order early), an eighth for the pods remembered (about 1 KiB each; past it those with no GPU request and the least recently reported are forgotten), and Go's garbage collector is told 80% of it unless GOMEMLIMIT is set; empty: the container's cgroup limit, else the machine's memory")
	cacheTTL := fs.Duration("http.cacheTTL", 30*time.Second, "how long answers of the read routes are kept (dropped at once when serve writes the ledger, or, on the embedded ledger, when another process such as gpuledger ingest does); 0 turns the cache off")
	newLogger := logFlags(fs)
	clock := clockFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxBuffered <= 0 {
		return usageError{fmt.Sprintf("-ingest.maxBuffered=%d: want a positive number of samples, such as 5000000", *maxBuffered)}
	}
	log := newLogger()
	budget, from, err := ingest.MemoryBudgetOf(*memLimit, *maxInflight)
	if err != nil {
		return usageError{"-ingest.memoryLimit: " + err.Error()}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(budget.GoLimit)
	}
	log.Info("memory budget", "limit", budget.Limit, "from", from, "remoteWriteInflightBytes", budget.Inflight, "reorderWindowBytes", budget.Buffer,
		"pods", budget.Pods, "goMemoryLimit", budget.GoLimit)
	cfg, model, cfgFile, err := loadModel(*cfgPath, *cluster)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "warning", w.Format(cfgFile))
	}
	auth, err := loadAuth(cfg, *tokensFile, *noAuth, *listen, log)
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
	pl, err := ingest.NewPipeline(model, attribution.Options{ScrapeIntervalMs: interval.Milliseconds(), MaxPods: budget.Pods}, store, ingest.PipelineOptions{
		Dir: *dir, SettleAfter: *settle, MaxAhead: *maxAhead, ReorderWindow: *window, CatchUpWindow: *catchUp, MaxBuffered: *maxBuffered,
		MaxBufferedBytes: budget.Buffer, Limits: ingest.Limits{MaxSeries: *maxSeries}, Logger: log, Now: now})
	if err != nil {
		return usageError{err.Error()}
	}
	opts := api.Options{Store: store, Logger: log, Auth: auth, Report: reportOptions(cfg, ""), Capacity: capacityOptions(cfg, model.Cluster), Stats: pl.Stats, Health: pl.Health,
		MaxRemoteWriteBytes: *maxBody, MaxInflightBytes: budget.Inflight, TLSCertFile: *tlsCert, TLSKeyFile: *tlsKey,
		CacheTTL: *cacheTTL, Generation: pl.Writes, Version: version}
	if *tokensFile != "" {
		opts.TokenFiles = []string{*tokensFile}
		opts.ReloadTokens = func() ([]api.Token, error) { return collectTokens(cfg, *tokensFile) }
	}
	if *remoteWrite {
		opts.Ingest = pl
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		pl.Run(runCtx, time.Second)
		close(done)
	}()
	if ts := splitList(*targets); len(ts) > 0 {
		go ingest.NewScraper(pl, ingest.ScrapeOptions{Targets: ts, Interval: *interval, Logger: log, Now: now}).Run(ctx)
	}
	log.Info("serving", "addr", *listen, "tls", *tlsCert != "", "auth", auth != nil, "remoteWrite", *remoteWrite,
		"scrapeTargets", len(splitList(*targets)), "ingestDir", *dir)
	err = api.New(opts).ListenAndServe(ctx, *listen)
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

// loadAuth collects the tokens of the configuration and the token file.
// Without any, serve refuses to start unless told -auth.disabled.
func loadAuth(cfg *config.Config, tokensFile string, disabled bool, listen string, log *slog.Logger) (*api.Auth, error) {
	toks, err := collectTokens(cfg, tokensFile)
	if err != nil {
		return nil, err
	}
	if disabled {
		log.Warn("authentication disabled: anyone who reaches the port reads every team's costs and writes samples", "addr", listen)
		return nil, nil
	}
	if len(toks) == 0 {
		return nil, usageError{"serve needs API tokens: add auth.tokens to the configuration or pass -auth.tokensFile (gpuledger token -name NAME -scope SCOPE makes one), or pass -auth.disabled for a trial on 127.0.0.1"}
	}
	return api.NewAuth(toks), nil
}

// collectTokens reads the tokens of the configuration and of the token
// file (read again by serve when the file changes).
func collectTokens(cfg *config.Config, tokensFile string) ([]api.Token, error) {
	toks, err := cfg.AllTokens(tokensFile)
	out := make([]api.Token, len(toks))
	for i, t := range toks {
		if err == nil {
			out[i], err = api.NewToken(t.Name, t.SHA256, t.Scopes)
		}
	}
	return out, err
}

func runReport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("report", stdout)
	cfgPath := configFlag(fs, "business-data configuration file (teams, budgets, currency)")
	openStore := storeFlags(fs, defaultLedgerPath, storeRead)
	monthFlag := fs.String("month", "", "month to report, YYYY-MM (required)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	out := fs.String("out", ".", "folder to write the reports into")
	format := fs.String("format", "csv,xlsx", "comma-separated formats: csv, xlsx, focus (FOCUS 1.3 cost and usage rows, focus-YYYY-MM.csv)")
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	month, err := time.Parse("2006-01", *monthFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
	}
	cfg, _, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	formats := splitList(*format)
	opts := reportOptions(cfg, *cluster)
	opts.FOCUS = slices.Contains(formats, "focus")
	cb, err := reports.Build(ctx, store, month, opts)
	if err != nil {
		return err
	}
	paths, err := cb.WriteFiles(*out, formats)
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
	co := capacityOptions(cfg, cluster)
	return reports.Options{Currency: cfg.Currency, Teams: cfg.TeamNames(), Budgets: cfg.TeamBudgets(), Cluster: cluster,
		Capacity: &co.Rule, Wait: &co.WaitRule, Endpoints: &co.Endpoints, PricesMicros: co.PricesMicros}
}

// loadModel reads the configuration and one cluster's cost model from it.
// loadModel finds and reads the configuration and builds the cluster's
// cost model; it returns the file it read.
func loadModel(flagValue, cluster string) (*config.Config, *attribution.Model, string, error) {
	cfg, path, err := loadConfig(flagValue)
	if err != nil {
		return nil, nil, "", err
	}
	model, err := cfg.AttributionModel(cluster)
	if err != nil {
		return nil, nil, "", err
	}
	return cfg, model, path, nil
}
