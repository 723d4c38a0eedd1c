package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// ScrapeSource yields text-exposition scrapes in time order, appending
// each body to buf; ok is false at the end.
type ScrapeSource func(buf []byte) (at time.Time, body []byte, ok bool)

// OfflineOptions bounds an offline run.
type OfflineOptions struct {
	// Start and End are the span the scrapes cover; the hours up to End
	// are written when the source ends.
	Start, End     time.Time
	ScrapeInterval time.Duration
	// FlushEvery is how often the hours closed so far are written.
	// Default 24 h.
	FlushEvery time.Duration
	// Progress, when set, is called after each write with how far the data
	// has reached and the samples parsed so far.
	Progress func(reached time.Time, samples uint64)
	// Provenance names the run in the restatements of hours it changes
	// (ledger.Rewrite); its Source defaults to "scrapes".
	Provenance ledger.Provenance
}

// OfflineStats says what an offline run did.
type OfflineStats struct {
	Rows, Scrapes int
	Bytes         int64
	Ingest        Stats
	Attribution   attribution.Stats
	// Restated and Adjusted count the team-hours the run changed in open
	// months, and in closed ones (adjustments), as ledger.Rewrite does.
	Restated, Adjusted int
}

// IngestScrapes is the offline pipeline: every scrape src yields is
// parsed, attributed with model and written to store, the hours closed so
// far every FlushEvery and the rest at End. The source runs in the
// caller's goroutine, one scrape at a time into one reused buffer: a
// source running ahead in a goroutine of its own (as it did) cost a
// quarter more CPU time, in handing buffers over and in the second core
// reading what the first wrote, for no shorter run, parsing being the
// longer part (BenchmarkDemoWeek in sim/demo).
func IngestScrapes(ctx context.Context, model *attribution.Model, store ledger.Store, src ScrapeSource, o OfflineOptions) (OfflineStats, error) {
	var st OfflineStats
	if o.Provenance.Source == "" {
		o.Provenance.Source = "scrapes"
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = 24 * time.Hour
	}
	_, lines := store.(ledger.LineStore)
	att, err := attribution.New(model, attribution.Options{ScrapeIntervalMs: o.ScrapeInterval.Milliseconds(), StartMs: o.Start.UnixMilli(), Lines: lines})
	if err != nil {
		return st, fmt.Errorf("cost model: %w", err)
	}
	var parser Parser
	next := o.Start.Add(o.FlushEvery)
	// Hours close as the data passes them; the last ones when it ends.
	flush := func(until time.Time) error {
		var rows []ledger.Row
		var workloads []ledger.WorkloadRow
		if until.Before(o.End) {
			rows, workloads = att.Ready()
		} else {
			att.CloseEndpoints()
			rows, workloads = att.Emit(until.UnixMilli())
		}
		st.Rows += len(rows)
		if err := writeSideHours(ctx, store, att); err != nil {
			return fmt.Errorf("write the queues' and endpoints' hours up to %s: %w", until.Format(time.RFC3339), err)
		}
		res, err := ledger.RewriteLines(ctx, store, rows, workloads, att.Lines(), o.Provenance)
		if err != nil {
			return fmt.Errorf("write ledger up to %s: %w", until.Format(time.RFC3339), err)
		}
		st.Restated += res.Restated
		st.Adjusted += res.Adjusted
		if o.Progress != nil {
			o.Progress(until, parser.Stats().Samples)
		}
		return nil
	}
	buf := make([]byte, 0, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		at, body, ok := src(buf[:0])
		if !ok {
			break
		}
		buf = body
		for !at.Before(next) {
			if err := flush(next); err != nil {
				return st, err
			}
			next = next.Add(o.FlushEvery)
		}
		if err := parser.ParseExposition(body, at.UnixMilli(), att); err != nil {
			return st, fmt.Errorf("parse scrape at %s: %w", at.Format(time.RFC3339), err)
		}
		st.Scrapes++
		st.Bytes += int64(len(body))
	}
	if err := flush(o.End); err != nil {
		return st, err
	}
	st.Ingest, st.Attribution = parser.Stats(), att.Stats()
	return st, nil
}
