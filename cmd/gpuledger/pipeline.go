package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/sim"
)

// simOptions drives one simulated run through the whole loop.
type simOptions struct {
	cfg            *config.Config
	cluster        string
	start, end     time.Time
	scrapeInterval time.Duration
	seed           uint64
	load           float64
	store          ledger.Store
	// progress, when set, is called after each simulated day.
	progress func(done, total time.Duration, samples uint64)
}

type simResult struct {
	sim         sim.Stats
	ingest      ingest.Stats
	attribution attribution.Stats
	rows        int
	scrapes     int
	bytes       int64
	model       *attribution.Model
}

// runDemoLoop runs the demo's loop: the modelled cluster admits and runs a job mix,
// its exporters' telemetry is rendered as text exposition scrape by scrape,
// parsed by ingest, attributed, and written to the ledger a day at a time.
// Rendering runs in its own goroutine, parsing and attribution in this one.
func runDemoLoop(ctx context.Context, o simOptions) (*simResult, error) {
	cl, err := sim.NewCluster(o.cfg, o.cluster)
	if err != nil {
		return nil, err
	}
	model, err := o.cfg.AttributionModel(o.cluster)
	if err != nil {
		return nil, err
	}
	att, err := attribution.New(model, attribution.Options{
		ScrapeIntervalMs: o.scrapeInterval.Milliseconds(), StartMs: o.start.UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("cost model: %w", err)
	}
	jobs := sim.GenerateMix(o.cfg, o.start, o.end.Sub(o.start), o.load, o.seed)
	res := &simResult{model: model}
	res.sim = cl.Run(jobs, o.start, o.end)
	tel := sim.NewTelemetry(cl, o.start, o.end, o.scrapeInterval)
	tel.ExporterUpgrades = true

	type scrape struct {
		at   time.Time
		body []byte
	}
	const inFlight = 8
	full := make(chan scrape, inFlight)
	empty := make(chan []byte, inFlight)
	for range inFlight {
		empty <- make([]byte, 0, 256<<10)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(full)
		for {
			var buf []byte
			select {
			case buf = <-empty:
			case <-ctx.Done():
				return
			}
			at, body, ok := tel.Next(buf[:0])
			if !ok {
				return
			}
			full <- scrape{at, body}
		}
	}()

	var parser ingest.Parser
	nextFlush := o.start.Add(24 * time.Hour)
	// Hours close as the data passes them; the last ones when it ends.
	flush := func(until time.Time) error {
		var rows []ledger.Row
		var workloads []ledger.WorkloadRow
		if until.Before(o.end) {
			rows, workloads = att.Ready()
		} else {
			rows, workloads = att.Emit(until.UnixMilli())
		}
		res.rows += len(rows)
		if err := o.store.WriteHours(ctx, rows, workloads); err != nil {
			return fmt.Errorf("write ledger up to %s: %w", until.Format(time.RFC3339), err)
		}
		if o.progress != nil {
			o.progress(until.Sub(o.start), o.end.Sub(o.start), parser.Stats().Samples)
		}
		return nil
	}
	for sc := range full {
		for !sc.at.Before(nextFlush) {
			if err := flush(nextFlush); err != nil {
				return nil, err
			}
			nextFlush = nextFlush.Add(24 * time.Hour)
		}
		if err := parser.ParseExposition(sc.body, sc.at.UnixMilli(), att); err != nil {
			return nil, fmt.Errorf("parse scrape at %s: %w", sc.at.Format(time.RFC3339), err)
		}
		res.scrapes++
		res.bytes += int64(len(sc.body))
		empty <- sc.body
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := flush(o.end); err != nil {
		return nil, err
	}
	res.ingest = parser.Stats()
	res.attribution = att.Stats()
	return res, nil
}
