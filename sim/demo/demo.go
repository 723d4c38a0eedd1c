// Package demo runs the demo's closed loop: a simulated month of the
// configured cluster through admission, its exporters' telemetry through
// ingest, into the ledger.
package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/sim"
)

// Options drive one simulated run through the whole loop.
type Options struct {
	Config         *config.Config
	Cluster        string
	Start, End     time.Time
	ScrapeInterval time.Duration
	Seed           uint64
	// Load is the offered load as a fraction of each queue's quota.
	Load  float64
	Store ledger.Store
	// Progress, when set, is called as the telemetry is ingested.
	Progress func(done, total time.Duration, samples uint64)
}

// Result is what a demo run did.
type Result struct {
	Sim     sim.Stats
	Offline ingest.OfflineStats
	Model   *attribution.Model
	// Took is the wall time of the run.
	Took time.Duration
}

// Run runs the demo's loop: the modelled cluster admits and runs a job
// mix, and its exporters' telemetry, rendered as text exposition scrape by
// scrape, goes through ingest's offline pipeline into the ledger, with the
// workloads' times in Kueue beside it (what capacity's what-if replays).
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	m, err := sim.NewModel(o.Config, o.Cluster)
	if err != nil {
		return nil, err
	}
	jobs := sim.GenerateMix(o.Config, o.Start, o.End.Sub(o.Start), o.Load, o.Seed)
	res := &Result{Model: m.Attribution}
	if res.Sim, err = m.Run(jobs, o.Start, o.End); err != nil {
		return nil, err
	}
	tel := sim.NewTelemetry(m.Cluster, o.Start, o.End, o.ScrapeInterval)
	tel.ExporterUpgrades = true
	oo := ingest.OfflineOptions{Start: o.Start, End: o.End, ScrapeInterval: o.ScrapeInterval}
	if o.Progress != nil {
		oo.Progress = func(reached time.Time, samples uint64) { o.Progress(reached.Sub(o.Start), o.End.Sub(o.Start), samples) }
	}
	if res.Offline, err = ingest.IngestScrapes(ctx, m.Attribution, o.Store, tel.Next, oo); err != nil {
		return nil, err
	}
	times := make([]ledger.WorkloadTime, len(m.Cluster.Workloads))
	for i, w := range m.Cluster.Workloads {
		times[i] = w.WorkloadTime
	}
	if err := o.Store.WriteWorkloadTimes(ctx, times); err != nil {
		return nil, fmt.Errorf("record the workloads' times: %w", err)
	}
	res.Took = time.Since(began)
	return res, nil
}

// WriteStats prints the jobs' and the telemetry's figures.
func (r *Result) WriteStats(w io.Writer) {
	fmt.Fprintf(w, "\nJobs: %d submitted, %d admitted, %d finished, %d still pending; mean wait %s.\n",
		r.Sim.Submitted, r.Sim.Admitted, r.Sim.Finished, r.Sim.Pending, r.Sim.MeanWait.Round(time.Second))
	fmt.Fprintf(w, "Telemetry: %d scrapes, %.1f MB of exposition, %d samples attributed in %s (%.1fM samples/s); %d ledger rows.\n",
		r.Offline.Scrapes, float64(r.Offline.Bytes)/1e6, r.Offline.Attribution.Accepted, r.Took.Round(100*time.Millisecond),
		float64(r.Offline.Ingest.Samples)/r.Took.Seconds()/1e6, r.Offline.Rows)
	if len(r.Offline.Attribution.Rejected) > 0 {
		var rs []string
		for reason, n := range r.Offline.Attribution.Rejected {
			rs = append(rs, fmt.Sprintf("%s=%d", reason, n))
		}
		sort.Strings(rs)
		fmt.Fprintf(w, "Rejected samples: %v\n", rs)
	}
}
