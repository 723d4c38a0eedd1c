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
	sim     sim.Stats
	offline ingest.OfflineStats
	model   *attribution.Model
}

// runDemoLoop runs the demo's loop: the modelled cluster admits and runs a
// job mix, and its exporters' telemetry, rendered as text exposition scrape
// by scrape, goes through ingest's offline pipeline into the ledger.
func runDemoLoop(ctx context.Context, o simOptions) (*simResult, error) {
	m, err := sim.NewModel(o.cfg, o.cluster)
	if err != nil {
		return nil, err
	}
	jobs := sim.GenerateMix(o.cfg, o.start, o.end.Sub(o.start), o.load, o.seed)
	res := &simResult{model: m.Attribution}
	if res.sim, err = m.Run(jobs, o.start, o.end); err != nil {
		return nil, err
	}
	tel := sim.NewTelemetry(m.Cluster, o.start, o.end, o.scrapeInterval)
	tel.ExporterUpgrades = true
	oo := ingest.OfflineOptions{Start: o.start, End: o.end, ScrapeInterval: o.scrapeInterval}
	if o.progress != nil {
		oo.Progress = func(reached time.Time, samples uint64) { o.progress(reached.Sub(o.start), o.end.Sub(o.start), samples) }
	}
	if res.offline, err = ingest.IngestScrapes(ctx, m.Attribution, o.store, tel.Next, oo); err != nil {
		return nil, err
	}
	// The workloads' times in Kueue, as gpuledger controller records them
	// on a real cluster: what capacity's what-if replays.
	times := make([]ledger.WorkloadTime, len(m.Cluster.Workloads))
	for i, w := range m.Cluster.Workloads {
		times[i] = w.WorkloadTime
	}
	if err := o.store.WriteWorkloadTimes(ctx, times); err != nil {
		return nil, fmt.Errorf("record the workloads' times: %w", err)
	}
	return res, nil
}
