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
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/flagutil"
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
	cfgPath := config.Flag(fs, "business-data configuration file")
	cluster := fs.String("cluster", "", "cluster of the configuration to simulate; empty for the only one")
	out := fs.String("out", "gpuledger-demo", "folder for the reports and, unless -ledger.path is set, the ledger")
	ledgerPath := fs.String("ledger.path", "", "embedded ledger directory (default <out>/ledger); it is cleared first")
	month := flagutil.Month(fs, "month", demoMonth, "month to simulate, YYYY-MM: by default the month the README's output and examples show, so that they are what a newcomer gets; any month works")
	seed := fs.Uint64("seed", 1, "random seed of the job mix; the same seed gives the same ledger")
	load := fs.Float64("load", 0.85, "offered load as a fraction of each queue's nominal quota")
	interval := fs.Duration("scrape.interval", 15*time.Second, "exporter scrape interval")
	serve := fs.Bool("serve", true, "serve the API after the reports until interrupted")
	listen := fs.String("http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	newLogger := flagutil.Logger(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	log := newLogger()
	cfg, _, err := config.Locate(*cfgPath, os.Stderr)
	if err != nil {
		return fmt.Errorf("%w\nfix the file, or run from the repository root so that examples/cluster.yaml is found", err)
	}
	if *interval < time.Second {
		return flagutil.Usagef("-scrape.interval=%s is too short; want at least 1s", *interval)
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
	end := month.AddDate(0, 1, 0)
	fmt.Fprintf(stdout, "Simulating %s (%d days) of cluster %s, scrape every %s, seed %d.\n",
		month.Format("January 2006"), int(end.Sub(*month).Hours()/24), cl.Name, *interval, *seed)
	res, err := demo.Run(ctx, demo.Options{Config: cfg, Cluster: *cluster, Start: *month, End: end, ScrapeInterval: *interval,
		Seed: *seed, Load: *load, Store: store, Progress: demo.TextProgress(os.Stderr)})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	ropts := reportOptions(cfg, res.Model.Cluster)
	cb, err := reports.Build(ctx, store, *month, ropts)
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
	srv := api.New(api.Options{Store: store, Report: ropts, Capacity: api.CapacityOptions(capacity.SettingsOf(cfg, res.Model.Cluster)), Logger: log})
	srv.PublishStats(ingest.PipelineStats{Ingest: res.Offline.Ingest, Attribution: res.Offline.Attribution})
	demo.WriteTryIt(stdout, *listen, *month)
	if err := srv.ListenAndServe(ctx, *listen); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; pass another -http.listenAddr, or -serve=false", err)
	}
	return nil
}
