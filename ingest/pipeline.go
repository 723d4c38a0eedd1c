package ingest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// PipelineOptions configures a Pipeline.
type PipelineOptions struct {
	// Lag is how long after an hour ends its rows are written: samples
	// arriving later than that for the hour are rejected as late. Default
	// 5 minutes.
	Lag    time.Duration
	Limits Limits
	Logger *slog.Logger
	// MaxAhead rejects samples stamped more than this ahead of Now: one
	// bad clock must not move the watermark and make every real sample
	// late. Default 10 minutes.
	MaxAhead time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// ReorderWindow holds samples this long before attribution sees them,
	// in time order: requests from several vmagent queues may arrive out of
	// order by a few seconds, and attribution wants each device's samples
	// in order. Default 30 s; negative turns it off.
	ReorderWindow time.Duration
}

// Pipeline is live ingestion: remote-write requests and scrapes go in,
// hours come out into the ledger once they are Lag old. It is safe for
// concurrent use; requests are attributed one at a time.
type Pipeline struct {
	mu    sync.Mutex
	p     Parser
	att   *attribution.Attributor
	store ledger.Store
	opts  PipelineOptions
	log   *slog.Logger
	maxMs int64
	// The reorder buffer: samples waiting for the window to pass, oldest
	// from head on. Their strings alias the request bodies, which the
	// parser keeps (Retain) until the samples are released.
	buf    []attribution.Sample
	head   int
	sorted int // buf[head:sorted] is known to be in time order
	// Rows emitted but not yet written: a failed write keeps them for the
	// next flush, so an outage of the store loses nothing.
	unwritten    []ledger.Row
	unwrittenWls []ledger.WorkloadRow
}

// NewPipeline returns a pipeline for one cluster's model.
func NewPipeline(model *attribution.Model, aopts attribution.Options, store ledger.Store, opts PipelineOptions) (*Pipeline, error) {
	att, err := attribution.New(model, aopts)
	if err != nil {
		return nil, fmt.Errorf("cost model: %w", err)
	}
	if opts.Lag <= 0 {
		opts.Lag = 5 * time.Minute
	}
	if opts.MaxAhead <= 0 {
		opts.MaxAhead = 10 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReorderWindow == 0 {
		opts.ReorderWindow = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pl := &Pipeline{att: att, store: store, opts: opts, log: log}
	pl.p.Retain = opts.ReorderWindow > 0
	return pl, nil
}

// release passes buffered samples older than untilMs to attribution, in
// time order.
func (pl *Pipeline) release(untilMs int64) {
	for pl.head < len(pl.buf) && pl.buf[pl.head].TimeMs < untilMs {
		pl.att.Add(&pl.buf[pl.head])
		pl.head++
	}
	if pl.head > len(pl.buf)/2 {
		n := copy(pl.buf, pl.buf[pl.head:])
		clear(pl.buf[n:]) // drop the references to released requests
		pl.buf, pl.head = pl.buf[:n], 0
	}
	// Between requests everything buffered has been put in order.
	pl.sorted = len(pl.buf)
}

// watermarkSink tracks the newest sample time, drops samples stamped
// beyond limitMs (counted in tooNew), and puts the rest in the reorder
// buffer (or straight to attribution without one).
type watermarkSink struct {
	*attribution.Attributor
	max     *int64
	limitMs int64
	tooNew  *uint64
	pl      *Pipeline
}

func (w watermarkSink) Add(s *attribution.Sample) {
	if s.TimeMs > w.limitMs {
		*w.tooNew++
		return
	}
	if s.TimeMs > *w.max {
		*w.max = s.TimeMs
	}
	if w.pl == nil {
		w.Attributor.Add(s)
		return
	}
	w.pl.buf = append(w.pl.buf, *s)
}

func (pl *Pipeline) sink() watermarkSink {
	ws := watermarkSink{Attributor: pl.att, max: &pl.maxMs, limitMs: pl.opts.Now().Add(pl.opts.MaxAhead).UnixMilli(), tooNew: &pl.p.stats.TooNew}
	if pl.opts.ReorderWindow > 0 {
		ws.pl = pl
	}
	return ws
}

// afterRequest puts the buffer in time order (only when a request came out
// of order: each request is in order by itself) and releases what the
// reorder window has passed.
func (pl *Pipeline) afterRequest() {
	if pl.opts.ReorderWindow <= 0 {
		return
	}
	byTime := func(a, b attribution.Sample) int { return cmp.Compare(a.TimeMs, b.TimeMs) }
	if pl.sorted > pl.head && pl.sorted < len(pl.buf) && pl.buf[pl.sorted].TimeMs < pl.buf[pl.sorted-1].TimeMs ||
		!slices.IsSortedFunc(pl.buf[pl.sorted:], byTime) {
		slices.SortStableFunc(pl.buf[pl.head:], byTime)
	}
	pl.sorted = len(pl.buf)
	pl.release(pl.maxMs - pl.opts.ReorderWindow.Milliseconds())
}

// RemoteWrite ingests one remote-write body. An *InputError means the body
// will never be accepted.
func (pl *Pipeline) RemoteWrite(body []byte) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	defer pl.afterRequest()
	return pl.p.ParseRemoteWrite(body, pl.opts.Limits, pl.sink())
}

// Exposition ingests one scrape, taken at scrapeMs, of text exposition. The
// pipeline keeps body until its samples leave the reorder buffer: the
// caller must not reuse it.
func (pl *Pipeline) Exposition(body []byte, scrapeMs int64) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	defer pl.afterRequest()
	return pl.p.ParseExposition(body, scrapeMs, pl.sink())
}

// Flush writes every hour that ended at least Lag before the newest sample.
func (pl *Pipeline) Flush(ctx context.Context) error {
	pl.mu.Lock()
	until := pl.maxMs - pl.opts.Lag.Milliseconds()
	pl.mu.Unlock()
	return pl.FlushUntil(ctx, time.UnixMilli(until))
}

// FlushUntil writes every hour that ends at or before until, whatever the
// lag: for tests, and for the end of a finite stream.
func (pl *Pipeline) FlushUntil(ctx context.Context, until time.Time) error {
	pl.mu.Lock()
	pl.release(until.UnixMilli())
	rows, wls := pl.att.Emit(until.UnixMilli())
	rows = append(pl.unwritten, rows...)
	wls = append(pl.unwrittenWls, wls...)
	pl.unwritten, pl.unwrittenWls = nil, nil
	pl.mu.Unlock()
	if len(rows) == 0 && len(wls) == 0 {
		return nil
	}
	if err := pl.store.WriteHours(ctx, rows, wls); err != nil {
		pl.mu.Lock()
		pl.unwritten = append(rows, pl.unwritten...)
		pl.unwrittenWls = append(wls, pl.unwrittenWls...)
		pl.mu.Unlock()
		return fmt.Errorf("write %d ledger rows (kept for the next flush): %w", len(rows), err)
	}
	return nil
}

// Run flushes every interval until ctx is done.
func (pl *Pipeline) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := pl.Flush(ctx); err != nil {
				pl.log.Error("ledger flush failed", "err", err)
			}
		}
	}
}

// Stats returns the ingest and attribution counters.
func (pl *Pipeline) Stats() (Stats, attribution.Stats) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.p.Stats(), pl.att.Stats()
}
