package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
)

func runIngest(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("ingest", stdout)
	cfgPath := configFlag(fs, "business-data configuration file")
	cluster := fs.String("cluster", "", "cluster of the configuration the telemetry is from; empty for the only one")
	from := fs.String("from", "", "where to read from (required); see above")
	startFlag := fs.String("start", "", "start of the range, RFC 3339 (required); rounded down to an hour")
	endFlag := fs.String("end", "", "end of the range, RFC 3339 (required); rounded down to an hour")
	chunk := fs.Duration("chunk", time.Hour, "how much to read per request; a whole number of hours")
	interval := fs.Duration("scrape.interval", 15*time.Second, "the exporters' scrape interval: how long a last sample counts")
	by := fs.String("by", os.Getenv("USER"), "who runs the backfill, recorded with the restatements it makes")
	reason := fs.String("reason", "", "why, recorded with the restatements it makes, such as \"node 7's exporter was down\"")
	openStore := storeFlags(fs, defaultLedgerPath, storeWrite)
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from == "" || *startFlag == "" || *endFlag == "" {
		return usageError{"ingest needs -from, -start and -end; see 'gpuledger ingest -help'"}
	}
	start, err := time.Parse(time.RFC3339, *startFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-start=%q is not RFC 3339; want such as 2026-10-01T00:00:00Z", *startFlag)}
	}
	end, err := time.Parse(time.RFC3339, *endFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-end=%q is not RFC 3339; want such as 2026-11-01T00:00:00Z", *endFlag)}
	}
	log := newLogger()
	_, model, _, err := loadModel(*cfgPath, *cluster)
	if err != nil {
		return err
	}
	src, err := ingest.NewSource(*from, nil, *interval)
	if err != nil {
		return usageError{err.Error()}
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	began := time.Now()
	prog, err := ingest.Backfill(ctx, ingest.BackfillOptions{
		Source: src, Store: store, Model: model, Logger: log,
		Attribution: attribution.Options{ScrapeIntervalMs: interval.Milliseconds()},
		Start:       start, End: end, Chunk: *chunk, By: *by, Reason: *reason,
		SplitProgress: func(read, total int64) {
			el := time.Since(began)
			eta := time.Duration(float64(el) * float64(total-read) / float64(max(read, 1)))
			fmt.Fprintf(os.Stderr, "\rsplitting %s by hour: %.0f of %.0f MiB  %.0f MiB/s  ETA %s ", *from, float64(read)/(1<<20), float64(total)/(1<<20),
				float64(read)/(1<<20)/max(el.Seconds(), 1e-3), eta.Round(time.Second))
			if read == total {
				fmt.Fprintln(os.Stderr)
				began = time.Now() // the chunks' ETA from here
			}
		},
		Progress: func(p ingest.BackfillProgress) {
			done := p.Done
			if !p.Resumed.IsZero() {
				done -= p.Resumed.Sub(start.Truncate(time.Hour))
			}
			left := p.Total - p.Done
			el := time.Since(began)
			eta := time.Duration(float64(el) * float64(left) / float64(max(done, time.Millisecond)))
			fmt.Fprintf(os.Stderr, "\r%5.1f%%  %s of %s  %.1fM samples  ETA %s ",
				100*float64(p.Done)/float64(p.Total), p.Done, p.Total, float64(p.Ingest.Samples)/1e6, eta.Round(time.Second))
		},
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ingested %s to %s from %s: %d ledger rows, %d samples attributed, %d rejected %v\n",
		start.Truncate(time.Hour).Format(time.RFC3339), end.Truncate(time.Hour).Format(time.RFC3339), src.Name(),
		prog.Rows, prog.Attribution.Accepted, sum(prog.Attribution.Rejected), prog.Attribution.Rejected)
	if prog.Restated > 0 || prog.Adjusted > 0 {
		fmt.Fprintf(stdout, "changed hours already written: %d team-hour(s) restated in open months, %d adjusted in closed months (%d cluster-hour(s) of closed months not rewritten); see the chargeback's Restatements, or GET /api/v1/admin/restatements\n",
			prog.Restated, prog.Adjusted, prog.ClosedHours)
	}
	return nil
}

func sum(m map[attribution.Reason]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
