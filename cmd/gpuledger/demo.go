package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/reports"
	"github.com/gpuledger/gpuledger/sim/demo"
)

// demoMonth is the month the demo simulates unless told another: the one
// the README's tour and API examples show (a fixed month, not the one
// before today, so that they stay what `make run` gives).
const demoMonth = "2026-10"

func runDemo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("demo", stdout)
	cfgPath := configFlag(fs, "business-data configuration file")
	cluster := fs.String("cluster", "", "cluster of the configuration to simulate; empty for the only one")
	out := fs.String("out", "gpuledger-demo", "folder for the reports and, unless -ledger.path is set, the ledger")
	ledgerPath := fs.String("ledger.path", "", "embedded ledger directory (default <out>/ledger); it is cleared first")
	monthFlag := fs.String("month", demoMonth, "month to simulate, YYYY-MM: by default the month the README's output and examples show, so that they are what a newcomer gets; any month works")
	seed := fs.Uint64("seed", 1, "random seed of the job mix; the same seed gives the same ledger")
	load := fs.Float64("load", 0.85, "offered load as a fraction of each queue's nominal quota")
	interval := fs.Duration("scrape.interval", 15*time.Second, "exporter scrape interval")
	serve := fs.Bool("serve", true, "serve the API after the reports until interrupted")
	listen := fs.String("http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	newLogger := logFlags(fs)
	log, cfg, err := parseWithConfig(fs, args, cfgPath, newLogger)
	if err != nil {
		return fmt.Errorf("%w\nfix the file, or run from the repository root so that examples/cluster.yaml is found", err)
	}
	month, err := time.Parse("2006-01", *monthFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
	}
	if *interval < time.Second {
		return usageError{fmt.Sprintf("-scrape.interval=%s is too short; want at least 1s", *interval)}
	}
	if *ledgerPath == "" {
		*ledgerPath = filepath.Join(*out, "ledger")
	}
	if err := os.RemoveAll(*ledgerPath); err != nil {
		return fmt.Errorf("clear ledger directory: %w", err)
	}
	store, err := embedded.Open(*ledgerPath, embedded.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()

	cl, err := cfg.Cluster(*cluster)
	if err != nil {
		return err
	}
	start := month
	end := month.AddDate(0, 1, 0)
	fmt.Fprintf(stdout, "Simulating %s (%d days) of cluster %s, scrape every %s, seed %d.\n",
		month.Format("January 2006"), int(end.Sub(start).Hours()/24), cl.Name, *interval, *seed)
	began := time.Now()
	res, err := demo.Run(ctx, demo.Options{Config: cfg, Cluster: *cluster, Start: start, End: end, ScrapeInterval: *interval,
		Seed: *seed, Load: *load, Store: store, Progress: func(done, total time.Duration, samples uint64) {
			el := time.Since(began)
			eta := time.Duration(float64(el) * float64(total-done) / float64(max(done, 1)))
			fmt.Fprintf(os.Stderr, "\rday %2d/%d  %6.1fM samples  %5.1fs elapsed  ETA %4.1fs ",
				int(done.Hours()/24), int(total.Hours()/24), float64(samples)/1e6, el.Seconds(), eta.Seconds())
		}})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	ropts := reportOptions(cfg, res.Model.Cluster)
	cb, err := reports.Build(ctx, store, month, ropts)
	if err != nil {
		return err
	}
	paths, err := cb.WriteFiles(*out, []string{"csv", "xlsx"})
	if err != nil {
		return err
	}
	res.WriteStats(stdout)
	cb.WriteSummary(stdout, len(res.Model.GPUs))
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	if !*serve {
		return nil
	}
	// The demo serves its simulated ledger without tokens, on loopback by
	// default: gpuledger serve requires them.
	srv := api.New(api.Options{Store: store, Report: ropts, Capacity: capacityOptions(cfg, res.Model.Cluster), Logger: log})
	srv.PublishStats(ingest.PipelineStats{Ingest: res.Offline.Ingest, Attribution: res.Offline.Attribution})
	m := month.Format("2006-01")
	fmt.Fprintf(stdout, "\nServing on http://%s (Ctrl-C to stop). Open http://%s/?month=%s in a browser, or try:\n", *listen, *listen, m)
	fmt.Fprintf(stdout, "  curl 'http://%s/api/v1/cost?from=%s&to=%s&step=month&groupBy=team'\n", *listen, m, end.Format("2006-01"))
	fmt.Fprintf(stdout, "  curl -OJ 'http://%s/api/v1/reports/chargeback/%s?format=xlsx'\n", *listen, m)
	fmt.Fprintf(stdout, "  curl 'http://%s/api/v1/capacity?at=%s'\n", *listen, end.Add(-12*time.Hour).Format(time.RFC3339))
	fmt.Fprintf(stdout, "  curl 'http://%s/api/v1/budgets?at=%s'\n", *listen, end.Add(-12*time.Hour).Format(time.RFC3339))
	fmt.Fprintf(stdout, "  curl http://%s/metrics\n", *listen)
	if err := srv.ListenAndServe(ctx, *listen); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; pass another -http.listenAddr, or -serve=false", err)
	}
	return nil
}
