package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runIngest(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("ingest", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file")
	cluster := fs.String("cluster", "", "cluster of the configuration the telemetry is from; empty for the only one")
	from := fs.String("from", "", "where to read from (required); see above")
	start := flagutil.Time(fs, "start", "start of the range, RFC 3339 (required); rounded down to an hour")
	end := flagutil.Time(fs, "end", "end of the range, RFC 3339 (required); rounded down to an hour")
	chunk := fs.Duration("chunk", time.Hour, "how much to read per request; a whole number of hours")
	interval := fs.Duration("scrape.interval", 15*time.Second, "the exporters' scrape interval: how long a last sample counts")
	by := fs.String("by", os.Getenv("USER"), "who runs the backfill, recorded with the restatements it makes")
	reason := fs.String("reason", "", "why, recorded with the restatements it makes, such as \"node 7's exporter was down\"")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Write)
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	if *from == "" || start.IsZero() || end.IsZero() {
		return flagutil.Usagef("ingest needs -from, -start and -end; see 'gpuledger ingest -help'")
	}
	model, err := cfg.AttributionModel(*cluster)
	if err != nil {
		return err
	}
	src, err := ingest.NewSource(*from, nil, *interval)
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	o := ingest.BackfillOptions{Source: src, Store: store, Model: model, Logger: log, Attribution: attribution.Options{ScrapeIntervalMs: interval.Milliseconds()},
		Start: *start, End: *end, Chunk: *chunk, By: *by, Reason: *reason}
	o.TextProgress(os.Stderr, *from)
	prog, err := ingest.Backfill(ctx, o)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	prog.WriteSummary(stdout, *start, *end, src.Name())
	return nil
}
