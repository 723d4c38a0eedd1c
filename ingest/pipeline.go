package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// PipelineOptions configures a Pipeline.
type PipelineOptions struct {
	// Dir holds the write-ahead log and snapshots. Empty keeps everything
	// in memory: nothing survives a restart (tests, the demo).
	Dir string
	// SettleAfter is how long after an hour ends it is settled: written to
	// the ledger whatever has arrived, never rewritten by the live path
	// again; samples for it are late from then on. Data that runs on past
	// an hour settles it sooner, ReorderWindow before SettleAfter. Default
	// 10 minutes; at least the attribution's staleness bound (5 minutes)
	// plus ReorderWindow.
	SettleAfter time.Duration
	// MaxAhead rejects samples stamped more than this ahead of Now: one
	// bad clock must not settle hours early. Default 2 minutes; less than
	// SettleAfter.
	MaxAhead time.Duration
	// ReorderWindow holds samples this long (of sample time) before
	// attribution sees them, in time order: requests from several vmagent
	// queues arrive out of order, by seconds live and by the length of an
	// outage after one (each queue retries its block at its own time), and
	// attribution wants each device's samples in order. Default 2 minutes;
	// negative turns it off. While no request comes, nothing is released
	// by the clock but the hours it settles (SettleAfter): a silence is an
	// outage as often as the end of a feed.
	ReorderWindow time.Duration
	// CatchUpWindow is the least reorder window while a backlog comes in:
	// from a request whose newest sample is more than ReorderWindow behind
	// the clock until ReorderWindow after the last such request. After an
	// outage each vmagent queue holds the block it was sending when the
	// outage began and retries it at its own time, up to its
	// -remoteWrite.retryMaxInterval (1 minute) later than the others, while
	// the others deliver the backlog: those blocks are then as old as the
	// outage is long. So the window is as deep as the backlog (the clock
	// less the oldest sample taken from it, and ReorderWindow more) when
	// that is longer; MaxBuffered bounds what it holds. Default 10 minutes.
	// Negative, or no longer than ReorderWindow: no catch-up, ReorderWindow
	// always.
	CatchUpWindow time.Duration
	// Limits bound one remote-write request.
	Limits Limits
	// MaxBuffered bounds the samples and pod facts waiting in the reorder
	// window: past it, the oldest are put in order before their window has
	// passed (counted in Stats' Shed), rather than the request refused.
	// Default 5,000,000.
	MaxBuffered int
	// MaxBufferedBytes bounds what the reorder window's items, the label
	// sets they brought and the interned tables cost in memory, as
	// MaxBuffered bounds their count (a flood of distinct series costs
	// ten times what a scrape's samples do). Default 1 GiB; serve sets it
	// from -ingest.memoryLimit.
	MaxBufferedBytes int64
	// SnapshotEvery is how often the state is saved so that the log can be
	// cut; default 1 minute. It is also saved after each hour written.
	SnapshotEvery time.Duration
	// SegmentBytes is the size at which a log segment is closed. Default
	// 64 MiB.
	SegmentBytes int64
	// HeadEvery is how often, after a write, the log's head file records
	// the last record made durable: the records of the last HeadEvery
	// are what a cut in the newest segment can take without replay
	// seeing it (wal.go). Default 1 second; negative: after every write.
	HeadEvery time.Duration
	Logger    *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o PipelineOptions) withDefaults() PipelineOptions {
	if o.SettleAfter <= 0 {
		o.SettleAfter = 10 * time.Minute
	}
	if o.MaxAhead <= 0 {
		o.MaxAhead = 2 * time.Minute
	}
	if o.ReorderWindow == 0 {
		o.ReorderWindow = 2 * time.Minute
	}
	if o.ReorderWindow < 0 {
		o.ReorderWindow = 0
	}
	if o.CatchUpWindow == 0 {
		o.CatchUpWindow = 10 * time.Minute
	}
	if o.CatchUpWindow < o.ReorderWindow || o.ReorderWindow == 0 {
		o.CatchUpWindow = o.ReorderWindow // without a window, no catch-up either
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 5_000_000
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = 1 << 30
	}
	if o.SnapshotEvery <= 0 {
		o.SnapshotEvery = time.Minute
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	switch {
	case o.HeadEvery == 0:
		o.HeadEvery = headEvery
	case o.HeadEvery < 0:
		o.HeadEvery = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Result is what became of one request's samples.
type Result struct {
	// Accepted counts samples and pod facts taken.
	Accepted int
	// Late counts samples for hours already settled.
	Late int
	// TooNew counts samples stamped more than MaxAhead ahead of the clock.
	TooNew int
	// OutOfOrder counts samples older than a sample of the same device
	// that attribution had already taken: they came more than the reorder
	// window after it, and are not counted (their device's time is
	// bridged from its previous sample, so the hour is still charged).
	OutOfOrder int
	// Invalid counts samples refused for their value or labels (NaN,
	// infinite, negative, out of the field's range, not UTF-8), by
	// reason in the order of BadValueReasons.
	Invalid [NumBadValueReasons]int
	// SettledUntil is where the settled hours end.
	SettledUntil time.Time
}

// Rejected says whether some samples will never be accepted: remote write
// then answers 4xx, and the sender drops them.
func (r Result) Rejected() int { return r.Late + r.TooNew + r.OutOfOrder + r.InvalidTotal() }

// InvalidTotal is how many samples were refused for their value or labels.
func (r Result) InvalidTotal() int {
	n := 0
	for _, k := range r.Invalid {
		n += k
	}
	return n
}

// Pipeline is live ingestion: remote-write requests and scrapes go in,
// hours come out into the ledger once they are settled. Every request is
// written to a write-ahead log and fsynced (several requests share one
// fsync) before it is applied and answered, so an acknowledged sample
// survives a crash; the state is saved in snapshots, and a restart replays
// the log after the last one, which rebuilds exactly the state an
// uninterrupted run would have. Hours are settled by the data (once samples
// SettleAfter minus ReorderWindow past an hour's end arrive) or by the
// clock (SettleAfter past its end, and not before SettleAfter after a
// start); the settled boundary is in the snapshots and in the store's live
// checkpoint, and the live path never writes before it. Safe for
// concurrent use.
type Pipeline struct {
	model *attribution.Model
	aopts attribution.Options
	store ledger.Store
	opts  PipelineOptions
	log   *slog.Logger
	c     *committer

	mu sync.Mutex // guards st
	st state

	writeMu   sync.Mutex // one ledger write at a time
	writeErr  error      // the last ledger write's error
	writeFail uint64
	writes    atomic.Uint64 // successful ledger writes
	lastSnap  time.Time
	wantSnap  bool
	snapErr   error
	stopWrite chan struct{}
	wrote     chan struct{}
	closeOnce sync.Once
	// walLost is what replay at start could not read, for /metrics.
	walLost walLost
}

// walLost counts what replay could not read: records and damaged bytes by
// segment (file name), and missing segments.
type walLost struct {
	records, bytes map[string]uint64
	missing        uint64
}

// state is everything the log's records change: what a snapshot saves.
type state struct {
	att *attribution.Attributor
	p   Parser
	// The reorder buffer: samples and pod facts waiting for the window to
	// pass, their labels interned in sets (intern.go).
	samples timeQueue[heldSample]
	pods    timeQueue[heldPod]
	queues  timeQueue[heldQueue]
	sets    labelSets
	// maxMs is the newest sample time accepted.
	maxMs int64
	// releasedMs is how far the buffer has been released: never back, so
	// that what a request adds older than it is released (and, where out
	// of order, answered) with that request.
	releasedMs int64
	// lastWriteMs is the clock when the last request was applied.
	lastWriteMs int64
	// catchUpUntilMs is the clock until which the window is the catch-up
	// window: a window past the last request that came behind the clock by
	// more than the reorder window.
	catchUpUntilMs int64
	// catchUpDepthMs is how far behind the clock the oldest sample taken
	// from the deepest backlog request was, when it came (the clock
	// catchUpDepthAtMs). A request as deep, or any once a catch-up window
	// has passed since, takes its place: a held block comes within
	// vmagent's retry interval of the backlog, and one old sample must not
	// keep the window deep while a sender lags for good.
	catchUpDepthMs, catchUpDepthAtMs int64
	// shed counts samples and pod facts released before their window had
	// passed, because the buffer held MaxBuffered.
	shed uint64
	// settleNotBefore: no hour is settled by the clock before it (a start
	// plus SettleAfter), so that senders can deliver their backlog.
	settleNotBefore int64
	// Rows closed but not yet written, oldest first.
	unwritten       []ledger.Row
	unwrittenWls    []ledger.WorkloadRow
	unwrittenQueues []ledger.QueueRow
	// unwrittenEndpoints are the inference endpoints' hours, written with
	// the queues'.
	unwrittenEndpoints []ledger.EndpointRow
	// unwrittenLines are the rows' lines, written before them.
	unwrittenLines []ledger.Line
	applied        uint64 // the last record applied
	// rejected counts late and too-new samples per sender and reason.
	rejected map[senderReason]uint64
}

type senderReason struct{ sender, reason string }

// NewPipeline returns a pipeline for one cluster's model. With opts.Dir it
// restores the last snapshot and replays the log after it; without, it
// starts empty. A new state starts at the hour of now, or at the store's
// live checkpoint when that is later. Call Run to settle hours and write
// them, and Close to stop.
func NewPipeline(model *attribution.Model, aopts attribution.Options, store ledger.Store, opts PipelineOptions) (*Pipeline, error) {
	opts = opts.withDefaults()
	staleness := time.Duration(aopts.SettleDelayMs()) * time.Millisecond
	if opts.SettleAfter < staleness+opts.ReorderWindow {
		return nil, fmt.Errorf("settle after %s is less than the staleness bound %s plus the reorder window %s; want at least %s",
			opts.SettleAfter, staleness, opts.ReorderWindow, staleness+opts.ReorderWindow)
	}
	if opts.MaxAhead >= opts.SettleAfter {
		return nil, fmt.Errorf("max ahead %s must be less than settle after %s, or one sample from a clock ahead could settle hours early", opts.MaxAhead, opts.SettleAfter)
	}
	// Data closes an hour once it runs SettleAfter − ReorderWindow past
	// it: the reorder window has released it by then, and the clock would
	// settle it at SettleAfter anyway.
	aopts.CloseAfterMs = (opts.SettleAfter - opts.ReorderWindow).Milliseconds()
	_, aopts.Lines = store.(ledger.LineStore)
	pl := &Pipeline{model: model, aopts: aopts, store: store, opts: opts, log: opts.Logger,
		stopWrite: make(chan struct{}), wrote: make(chan struct{})}
	pl.st.rejected = make(map[senderReason]uint64)
	pl.walLost = walLost{records: make(map[string]uint64), bytes: make(map[string]uint64)}
	next, err := pl.restore()
	if err != nil {
		return nil, err
	}
	if pl.c, err = newCommitter(opts.Dir, next, opts.SegmentBytes, pl.log); err != nil {
		return nil, err
	}
	pl.c.headEvery = opts.HeadEvery
	pl.c.apply = pl.applyBatch
	pl.c.afterBatch = pl.maybeSnapshot
	go pl.c.run()
	// A start: no hour is settled by the clock for SettleAfter, so that
	// senders that buffered during the downtime can deliver.
	if res := <-pl.c.enqueue(record{kind: recStart, nowMs: opts.Now().UnixMilli()}).done; res.err != nil {
		pl.c.close()
		return nil, fmt.Errorf("record the start in the write-ahead log: %w", res.err)
	}
	return pl, nil
}

// restore rebuilds the state from the last good snapshot and the log after
// it, or starts a new one; it returns the next sequence number.
func (pl *Pipeline) restore() (uint64, error) {
	ctx := context.Background()
	live, err := pl.store.Checkpoint(ctx, ledger.LiveCheckpoint(pl.model.Cluster))
	if err != nil {
		return 0, fmt.Errorf("read the live checkpoint: %w", err)
	}
	var snap *pipelineSnapshot
	if pl.opts.Dir != "" {
		if snap, err = loadSnapshot(pl.opts.Dir, pl.log); err != nil {
			return 0, err
		}
	}
	if snap != nil {
		if err := pl.st.restore(snap, pl.model, pl.aopts, pl.log); err != nil {
			return 0, err
		}
	} else {
		start := time.UnixMilli(pl.opts.Now().UnixMilli()).UTC().Truncate(time.Hour)
		if live.After(start) {
			start = live
		}
		aopts := pl.aopts
		aopts.StartMs = start.UnixMilli()
		if pl.st.att, err = attribution.New(pl.model, aopts); err != nil {
			return 0, fmt.Errorf("cost model: %w", err)
		}
	}
	if pl.opts.Dir == "" {
		return 1, nil
	}
	var flags []ledger.HourFlag
	rep, err := replayLog(pl.opts.Dir, pl.st.applied, pl.log, func(rec record) {
		pl.st.apply(rec, pl.opts)
		pl.st.applied = rec.seq
	}, func(l logLoss) { flags = append(flags, pl.lost(l)) })
	if err != nil {
		return 0, fmt.Errorf("replay the write-ahead log in %s: %w", pl.opts.Dir, err)
	}
	if rep.Last > 0 || rep.Torn > 0 {
		pl.log.Info("write-ahead log replayed", "dir", pl.opts.Dir, "snapshotSeq", snapshotSeq(snap), "lastSeq", rep.Last, "tornSegments", rep.Torn,
			"losses", len(rep.Losses), "settledUntil", time.UnixMilli(pl.st.att.EmittedUntil()).UTC())
	}
	if err := pl.store.FlagHours(ctx, flags); err != nil {
		return 0, fmt.Errorf("flag the hours the write-ahead log's damage touches (%d flags); the pipeline starts once they are recorded: %w", len(flags), err)
	}
	return rep.Last + 1, nil
}

// lost counts, logs and flags a run of acknowledged records replay could
// not read. It is called where replay found it, so that the hours it
// flags start where the state had settled up to then: the records lost
// could only add to hours not yet settled, up to MaxAhead past the clock
// of the record read after them (or of now, when none was).
func (pl *Pipeline) lost(l logLoss) ledger.HourFlag {
	seg := filepath.Base(l.Segment)
	pl.walLost.records[seg] += l.Records()
	pl.walLost.bytes[seg] += uint64(l.DamagedBytes)
	if l.Missing {
		pl.walLost.missing++
	}
	fromMs := floorHourMs(pl.st.att.EmittedUntil())
	toMs := pl.opts.Now().UnixMilli()
	if l.BeforeMs != 0 {
		toMs = l.BeforeMs
	}
	toMs = max(floorHourMs(toMs+pl.opts.MaxAhead.Milliseconds())+time.Hour.Milliseconds(), fromMs+time.Hour.Milliseconds())
	var detail string
	switch {
	case l.Missing && l.To == 0:
		detail = fmt.Sprintf("the newest write-ahead log segment %s is missing: the records from %d on are lost", l.Segment, l.From)
	case l.Missing:
		detail = fmt.Sprintf("write-ahead log records %d-%d are missing between segments %s and %s (a segment deleted, or one cut short)", l.From, l.To, l.Segment, l.Next)
	default:
		detail = fmt.Sprintf("write-ahead log records %d-%d are unreadable: %d bytes of segment %s are damaged", l.From, l.To, l.DamagedBytes, l.Segment)
	}
	from, to := time.UnixMilli(fromMs).UTC(), time.UnixMilli(toMs).UTC()
	pl.log.Error("acknowledged telemetry lost from the write-ahead log; the hours it could have added to are flagged",
		"segment", l.Segment, "missing", l.Missing, "fromSeq", l.From, "toSeq", l.To, "damagedBytes", l.DamagedBytes,
		"hoursFrom", from, "hoursTo", to)
	return ledger.HourFlag{Cluster: pl.model.Cluster, From: from, To: to, Reason: ledger.FlagLogLoss, Detail: detail, At: pl.opts.Now().UTC()}
}

func snapshotSeq(s *pipelineSnapshot) uint64 {
	if s == nil {
		return 0
	}
	return s.Seq
}

// applyBatch applies durable records in order and answers them. It runs on
// the committer's applying goroutine.
func (pl *Pipeline) applyBatch(batch []*walEntry) {
	pl.mu.Lock()
	results := make([]walResult, len(batch))
	for i, e := range batch {
		results[i].res, results[i].err = pl.st.apply(e.rec, pl.opts)
		pl.st.applied = e.rec.seq
	}
	pl.mu.Unlock()
	for i, e := range batch {
		e.done <- results[i]
	}
}

// apply applies one record to the state: the one code path of live
// requests and of replay, so that replay rebuilds what was.
func (st *state) apply(rec record, opts PipelineOptions) (Result, error) {
	window := opts.ReorderWindow.Milliseconds()
	switch rec.kind {
	case recRemoteWrite, recRemoteWriteCut, recExposition:
		sink := &bufferSink{st: st, limitMs: rec.nowMs + opts.MaxAhead.Milliseconds(), lateMs: st.att.EmittedUntil()}
		bad := st.p.stats.BadValues
		var err error
		if rec.kind != recExposition {
			d := rec.decoded
			if d == nil { // replay: decode the logged body as the request did
				d = decodeForBuffer(rec.body, opts.Limits, false)
				if rec.kind == recRemoteWriteCut {
					d.skipped += uint64(rec.auxMs)
				}
			}
			err = st.p.ParseDecoded(d, sink)
			d.Release()
			decodedPool.Put(d)
		} else {
			err = st.p.ParseExposition(rec.body, rec.auxMs, sink)
		}
		st.count(rec.sender, "late", sink.res.Late)
		st.count(rec.sender, "too_new", sink.res.TooNew)
		for r := range bad {
			sink.res.Invalid[r] = int(st.p.stats.BadValues[r] - bad[r])
			st.count(rec.sender, BadValueReasons[r], sink.res.Invalid[r])
		}
		st.p.stats.TooNew += uint64(sink.res.TooNew)
		st.order()
		// Only this request's samples can be out of order here: what was
		// buffered before is not older than anything attribution has taken,
		// and is released with them in time order. Those that are were
		// acknowledged by nobody yet; the answer says so (as Prometheus
		// answers an out-of-order sample), rather than dropping them after
		// a 2xx.
		st.lastWriteMs = rec.nowMs
		if sink.newestMs != 0 && opts.catchUp() && sink.newestMs < rec.nowMs-window {
			if d := rec.nowMs - sink.oldestMs; d >= st.catchUpDepthMs || rec.nowMs-st.catchUpDepthAtMs >= opts.CatchUpWindow.Milliseconds() {
				st.catchUpDepthMs, st.catchUpDepthAtMs = d, rec.nowMs
			}
			st.catchUpUntilMs = rec.nowMs + window
		}
		window = st.window(rec.nowMs, opts)
		before := st.att.Rejections(attribution.ReasonOutOfOrder)
		st.release(min(st.maxMs, rec.nowMs) - window + 1)
		st.bound(opts.MaxBuffered, opts.MaxBufferedBytes)
		if n := int(st.att.Rejections(attribution.ReasonOutOfOrder) - before); n > 0 {
			sink.res.OutOfOrder, sink.res.Accepted = n, sink.res.Accepted-n
			st.count(rec.sender, "out_of_order", n)
		}
		sink.res.SettledUntil = time.UnixMilli(st.att.EmittedUntil()).UTC()
		return sink.res, err
	case recTick:
		st.release(st.tickFrontier(rec.nowMs, opts))
		if rec.nowMs >= st.settleNotBefore {
			st.settle(floorHourMs(rec.nowMs - opts.SettleAfter.Milliseconds()))
		}
	case recSettle:
		st.settle(rec.auxMs)
	case recStart:
		st.settleNotBefore = rec.nowMs + opts.SettleAfter.Milliseconds()
	}
	st.collect()
	return Result{SettledUntil: time.UnixMilli(st.att.EmittedUntil()).UTC()}, nil
}

func (st *state) count(sender, reason string, n int) {
	if n > 0 {
		st.rejected[senderReason{sender, reason}] += uint64(n)
	}
}

// settle releases what is buffered before untilMs and closes the hours up
// to it, whatever the data.
func (st *state) settle(untilMs int64) {
	if untilMs <= st.att.EmittedUntil() {
		return
	}
	st.release(untilMs)
	st.keep(st.att.Emit(untilMs))
}

// collect takes the rows of hours the data closed.
func (st *state) collect() { st.keep(st.att.Ready()) }

// keep adds the rows of closed hours, and their queue and endpoint rows,
// to what is to be written.
func (st *state) keep(rows []ledger.Row, wls []ledger.WorkloadRow) {
	st.unwritten = append(st.unwritten, rows...)
	st.unwrittenWls = append(st.unwrittenWls, wls...)
	st.unwrittenQueues = append(st.unwrittenQueues, st.att.QueueRows()...)
	st.unwrittenEndpoints = append(st.unwrittenEndpoints, st.att.EndpointRows()...)
	st.unwrittenLines = append(st.unwrittenLines, st.att.Lines()...)
}

// decodeForBuffer decodes a remote-write body, the body itself from the
// pool and given back once read; apply gives the decoding back once
// parsed. With cut, the decoding keeps the body cut down to the series it
// read, for the log.
func decodeForBuffer(body []byte, limits Limits, cut bool) *RemoteWrite {
	d := decodedPool.Get().(*RemoteWrite)
	d.cut = cut
	DecodeRemoteWrite(body, limits, true, d)
	return d
}

// RemoteWrite ingests one remote-write body from sender (a token's name,
// for the per-sender counters). It returns once the body is durable and
// applied. An *InputError means the body will never be accepted; a log
// error that a retry may pass. It keeps nothing of body once it returns,
// whatever the error: the caller may use it for the next request.
func (pl *Pipeline) RemoteWrite(ctx context.Context, sender string, body []byte) (Result, error) {
	return pl.submit(ctx, record{kind: recRemoteWrite, sender: sender, body: body})
}

// Exposition ingests one scrape, taken at scrapeMs, of text exposition.
func (pl *Pipeline) Exposition(ctx context.Context, sender string, body []byte, scrapeMs int64) (Result, error) {
	return pl.submit(ctx, record{kind: recExposition, sender: sender, body: body, auxMs: scrapeMs})
}

// Scrape ingests one scrape taken at scrapeMs for a replay (the
// simulator's closed loop), as the sender "replay"; samples it would
// reject are an error.
func (pl *Pipeline) Scrape(body []byte, scrapeMs int64) error {
	res, err := pl.Exposition(context.Background(), "replay", body, scrapeMs)
	if err == nil && res.Rejected() > 0 {
		err = fmt.Errorf("%d samples of the scrape at %s rejected: %d late, %d too new, %d out of order", res.Rejected(),
			time.UnixMilli(scrapeMs).UTC().Format(time.RFC3339), res.Late, res.TooNew, res.OutOfOrder)
	}
	return err
}

func (pl *Pipeline) submit(ctx context.Context, rec record) (Result, error) {
	if err := precheck(rec, pl.opts.Limits); err != nil {
		return Result{}, err
	}
	if rec.kind == recRemoteWrite {
		// Decode here, in the request's goroutine: requests decode in
		// parallel, and the committer applies them in log order. What the
		// log gets is the body cut down to what was read (wal.go).
		d := decodeForBuffer(rec.body, pl.opts.Limits, true)
		rec.decoded = d
		if d.err == nil {
			// d's own buffer: d goes back to its pool once applied, after
			// the record is written.
			rec.kind, rec.auxMs, rec.body = recRemoteWriteCut, int64(d.skipped), d.cutBody
		} else {
			// Logged whole, maybe after the request has gone (cancelled):
			// a copy, so that the caller's body is its own again once
			// RemoteWrite returns. Only bodies that do not decode.
			rec.body = bytes.Clone(rec.body)
		}
	}
	rec.nowMs = pl.opts.Now().UnixMilli()
	e := pl.c.enqueue(rec)
	select {
	case r := <-e.done:
		return r.res, r.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// precheck refuses, before the log, what can never be accepted and is cheap
// to tell: a remote-write body over the limits, or one that is not snappy.
func precheck(rec record, limits Limits) error {
	if rec.kind != recRemoteWrite {
		return nil
	}
	limits = limits.withDefaults()
	n, err := DecodedLen(rec.body)
	if err != nil {
		return err
	}
	if n > limits.MaxDecodedBytes {
		return inputErrorf("remote-write body decodes to %d bytes; the limit is %d: send smaller batches", n, limits.MaxDecodedBytes)
	}
	return nil
}

// FlushUntil settles every hour that ends at or before until, whatever the
// clock, and writes the ledger: for tests, replays and the end of a finite
// stream.
func (pl *Pipeline) FlushUntil(ctx context.Context, until time.Time) error {
	r := <-pl.c.enqueue(record{kind: recSettle, nowMs: pl.opts.Now().UnixMilli(), auxMs: until.UnixMilli()}).done
	if r.err != nil {
		return r.err
	}
	return pl.write(ctx)
}

// Flush settles what the clock says is due and writes the ledger.
func (pl *Pipeline) Flush(ctx context.Context) error {
	pl.tick()
	return pl.write(ctx)
}

// tick records a tick when it would change the state: buffered samples the
// window has passed, or an hour due to settle.
func (pl *Pipeline) tick() {
	now := pl.opts.Now().UnixMilli()
	pl.mu.Lock()
	st := &pl.st
	due := st.oldestMs() < st.tickFrontier(now, pl.opts) ||
		now >= st.settleNotBefore && floorHourMs(now-pl.opts.SettleAfter.Milliseconds()) > st.att.EmittedUntil()
	pl.mu.Unlock()
	if due {
		<-pl.c.enqueue(record{kind: recTick, nowMs: now}).done
	}
}

// Run ticks (release, settle) and writes the ledger every interval until
// ctx is done.
func (pl *Pipeline) Run(ctx context.Context, every time.Duration) {
	defer close(pl.wrote)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pl.stopWrite:
			return
		case <-t.C:
			pl.tick()
			if err := pl.write(ctx); err != nil {
				pl.log.Error("ledger write failed", "err", err)
			}
			pl.requestSnapshot()
		}
	}
}

// requestSnapshot wakes the committer for a snapshot when one is due.
func (pl *Pipeline) requestSnapshot() {
	if pl.snapshotDue() {
		<-pl.c.enqueue(record{kind: recTick, nowMs: pl.opts.Now().UnixMilli()}).done
	}
}

// Close writes what is settled, saves a snapshot (so that a restart goes on
// with the open hour exactly), and stops. It settles nothing: the open
// hour stays open.
func (pl *Pipeline) Close(ctx context.Context) error {
	var err error
	pl.closeOnce.Do(func() {
		close(pl.stopWrite)
		werr := pl.write(ctx)
		pl.c.close()
		var serr error
		if pl.opts.Dir != "" {
			serr = pl.snapshot(false)
		}
		err = errors.Join(werr, serr)
	})
	return err
}

// Writes counts the pipeline's ledger writes: what an answer cache keys
// on.
func (pl *Pipeline) Writes() uint64 { return pl.writes.Load() }

// Health says whether the pipeline can keep its promises: nil when the log
// accepts writes and the last ledger write succeeded.
func (pl *Pipeline) Health() error {
	if err := pl.c.failing(); err != nil {
		return err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.writeErr != nil {
		return fmt.Errorf("ledger write failing: %w", pl.writeErr)
	}
	if pl.snapErr != nil {
		return fmt.Errorf("snapshot failing: %w", pl.snapErr)
	}
	return nil
}
