package ingest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
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
	applied            uint64 // the last record applied
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
}

func floorHourMs(ms int64) int64 { return time.UnixMilli(ms).UTC().Truncate(time.Hour).UnixMilli() }

// window is the reorder window at the clock nowMs, in milliseconds: while
// a backlog comes in, the catch-up window or, if longer, the backlog's
// depth and a reorder window more, so that a block held since the backlog
// began is still in order when it comes; else the reorder window.
func (st *state) window(nowMs int64, opts PipelineOptions) int64 {
	if st.catchingUp(nowMs) {
		return max(opts.CatchUpWindow.Milliseconds(), st.catchUpDepthMs+opts.ReorderWindow.Milliseconds())
	}
	return opts.ReorderWindow.Milliseconds()
}

// catchUp says whether a backlog gets a window of its own.
func (o PipelineOptions) catchUp() bool { return o.CatchUpWindow > o.ReorderWindow }

// catchingUp says whether a backlog is coming in at the clock nowMs.
func (st *state) catchingUp(nowMs int64) bool { return nowMs < st.catchUpUntilMs }

// bound releases the oldest of the buffer, whatever the window, until it
// holds at most limit samples and pod facts, and costs at most
// limitBytes: a backlog longer than the buffer can hold is put in order
// as far as it can be, not refused. Interned tables that cost more than
// half of limitBytes by themselves (a flood of distinct series) start a
// new generation, twice if need be: the sets still buffered stay with
// their items.
func (st *state) bound(limit int, limitBytes int64) {
	for range 2 {
		if st.sets.bytes() <= limitBytes/2 {
			break
		}
		st.sets.rotate(st.maxMs)
	}
	for n := st.buffered(); n > 0 && (n > limit || st.bufferBytes() > limitBytes); {
		st.release(st.oldestMs() + 1)
		m := st.buffered()
		st.shed += uint64(n - m)
		n = m
	}
}

// bufferBytes is what the reorder buffer costs: its items, the label sets
// they brought in, and the interned tables.
func (st *state) bufferBytes() int64 {
	return st.samples.bytes + st.pods.bytes + st.queues.bytes + st.sets.bytes()
}

// bufferSink puts a request's samples in the reorder buffer, less those
// too new (past limitMs) or late (before lateMs, in settled hours).
type bufferSink struct {
	st              *state
	limitMs, lateMs int64
	// newestMs and oldestMs are the newest and oldest sample or pod fact
	// taken (newestMs 0: none).
	newestMs, oldestMs int64
	res                Result
}

func (b *bufferSink) Add(s *attribution.Sample) {
	if b.admit(s.TimeMs) {
		b.st.samples.pending = append(b.st.samples.pending, b.st.sets.hold(s))
	}
}

// admit counts a sample stamped ms as too new, late or accepted, and says
// whether it was accepted.
func (b *bufferSink) admit(ms int64) bool {
	switch {
	case ms > b.limitMs:
		b.res.TooNew++
		return false
	case ms < b.lateMs:
		b.res.Late++
		return false
	}
	b.res.Accepted++
	b.took(ms)
	return true
}

// took notes a sample or pod fact stamped ms taken into the buffer.
func (b *bufferSink) took(ms int64) {
	if b.newestMs == 0 {
		b.oldestMs = ms
	}
	b.newestMs, b.oldestMs = max(b.newestMs, ms), min(b.oldestMs, ms)
	b.st.maxMs = max(b.st.maxMs, ms)
}

func (b *bufferSink) AddPod(p attribution.PodInfo) {
	// A pod fact past the limit or before the settled hours says nothing
	// the ledger can use; it is dropped without a word.
	if p.TimeMs > b.limitMs || p.TimeMs < b.lateMs {
		return
	}
	b.res.Accepted++
	b.took(p.TimeMs)
	b.st.pods.pending = append(b.st.pods.pending, b.st.sets.holdPod(&p))
}

func (b *bufferSink) AddQueue(q *attribution.QueueSample) {
	if b.admit(q.TimeMs) {
		b.st.queues.pending = append(b.st.queues.pending, b.st.sets.holdQueue(q))
	}
}

// order makes what a request added to the buffers a run of each (in time
// order by itself), given out oldest first across the runs.
func (st *state) order() {
	st.samples.order(sampleMs, sampleBytes)
	st.pods.order(podMs, podBytes)
	st.queues.order(queueMs, queueBytes)
	st.sets.maybeRotate(st.maxMs, st.buffered())
}

// release passes buffered samples and pod facts older than untilMs to
// attribution, in time order, and takes the hours they close. (Requests
// and ticks release what is at least the reorder window old: without a
// window, everything, and no sample keeps a reference to its body.)
func (st *state) release(untilMs int64) {
	untilMs = max(untilMs, st.releasedMs)
	st.releasedMs = untilMs
	for {
		s, p, q := st.samples.first(), st.pods.first(), st.queues.first()
		sDue := s != nil && s.TimeMs < untilMs
		pDue := p != nil && p.TimeMs < untilMs
		qDue := q != nil && q.TimeMs < untilMs
		switch {
		case sDue && (!pDue || s.TimeMs <= p.TimeMs) && (!qDue || s.TimeMs <= q.TimeMs):
			x := s.sample()
			st.att.Add(&x)
			st.samples.pop()
		case pDue && (!qDue || p.TimeMs <= q.TimeMs):
			st.att.AddPod(p.pod())
			st.pods.pop()
		case qDue:
			x := q.queue()
			st.att.AddQueue(&x)
			st.queues.pop()
		default:
			st.collect()
			return
		}
	}
}

// tickFrontier is where a tick at nowMs releases the buffer up to. While
// requests come (one within the reorder window's length of the clock), the
// window is in sample time, as a request releases it: a sender catching up
// on a backlog, its samples far behind the clock, keeps the order the
// window gives its queues. Once they stop, nothing: silence is an outage as
// often as the end of a feed (and a restart begins with one), and the
// blocks vmagent's queues held through it come back as old as it was long,
// however long that was. What a feed that ended left buffered is released
// when its hour settles (settle), which is all the ledger waits for.
func (st *state) tickFrontier(nowMs int64, opts PipelineOptions) int64 {
	if nowMs-st.lastWriteMs < opts.ReorderWindow.Milliseconds() {
		return min(nowMs, st.maxMs) - st.window(nowMs, opts) + 1
	}
	return math.MinInt64
}

func (st *state) buffered() int { return st.samples.len() + st.pods.len() + st.queues.len() }

// oldestMs is the time of the oldest sample, pod fact or queue sample
// buffered; math.MaxInt64 when none is.
func (st *state) oldestMs() int64 {
	oldest := int64(math.MaxInt64)
	if s := st.samples.first(); s != nil {
		oldest = s.TimeMs
	}
	if p := st.pods.first(); p != nil {
		oldest = min(oldest, p.TimeMs)
	}
	if q := st.queues.first(); q != nil {
		oldest = min(oldest, q.TimeMs)
	}
	return oldest
}

func sampleMs(s *heldSample) int64 { return s.TimeMs }
func podMs(p *heldPod) int64       { return p.TimeMs }
func queueMs(q *heldQueue) int64   { return q.TimeMs }

// timeQueue is one kind of the reorder buffer: the items of each request
// are a run of their own, in time order, and the items are taken out
// oldest first across the runs (a k-way merge over a heap of runs), ties
// in the order they came: the order a stable sort of everything would give,
// without moving any item. (Requests of several vmagent queues interleave
// in time, so a sorted buffer would move most of a scrape for each one.)
type timeQueue[T any] struct {
	// pending is what the request being parsed adds; order makes it a run.
	pending []T
	heap    []*timeRun[T] // by the time of their first item, then seq
	n       int           // items waiting in the runs
	seq     uint64
	at      func(*T) int64
	// size is what an item costs in memory, bytes what the waiting ones
	// cost together.
	size  func(*T) int64
	bytes int64
	// free holds the items of runs taken out, emptied, for the next
	// requests' pending: a scrape's requests then add to the buffer
	// without growing a slice each.
	free [][]T
}

// maxFreeRuns bounds timeQueue.free: about as many as the requests a
// reorder window takes out at once, and no more held for nothing.
const maxFreeRuns = 64

// timeRun is one request's items, next from head on.
type timeRun[T any] struct {
	items []T
	head  int
	seq   uint64
}

// order makes what the last request added a run of the queue.
func (q *timeQueue[T]) order(at, size func(*T) int64) {
	q.at, q.size = at, size
	add := q.pending
	if len(add) == 0 {
		return
	}
	q.pending = nil
	if k := len(q.free); k > 0 {
		q.pending, q.free[k-1] = q.free[k-1], nil
		q.free = q.free[:k-1]
	}
	if !sortedBy(add, at) {
		slices.SortStableFunc(add, func(a, b T) int { return cmp.Compare(at(&a), at(&b)) })
	}
	q.seq++
	q.n += len(add)
	for i := range add {
		q.bytes += size(&add[i])
	}
	q.heap = append(q.heap, &timeRun[T]{items: add, seq: q.seq})
	q.up(len(q.heap) - 1)
}

// first returns the oldest waiting item, nil when none waits.
func (q *timeQueue[T]) first() *T {
	if len(q.heap) == 0 {
		return nil
	}
	r := q.heap[0]
	return &r.items[r.head]
}

// pop takes out the oldest waiting item.
func (q *timeQueue[T]) pop() {
	r := q.heap[0]
	q.bytes -= q.size(&r.items[r.head])
	var zero T
	r.items[r.head] = zero // no reference to request bodies kept here
	r.head++
	q.n--
	if r.head == len(r.items) {
		if len(q.free) < maxFreeRuns {
			q.free = append(q.free, r.items[:0])
		}
		last := len(q.heap) - 1
		q.heap[0] = q.heap[last]
		q.heap[last] = nil
		q.heap = q.heap[:last]
	}
	if len(q.heap) > 0 {
		q.down(0)
	}
}

// len is how many items wait.
func (q *timeQueue[T]) len() int { return q.n }

// reset makes items, in time order, the waiting ones.
func (q *timeQueue[T]) reset(items []T, at, size func(*T) int64) {
	*q = timeQueue[T]{at: at, size: size}
	q.pending = items
	q.order(at, size)
}

func (q *timeQueue[T]) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	ta, tb := q.at(&a.items[a.head]), q.at(&b.items[b.head])
	return ta < tb || ta == tb && a.seq < b.seq
}

func (q *timeQueue[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.heap[i], q.heap[p] = q.heap[p], q.heap[i]
		i = p
	}
}

func (q *timeQueue[T]) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(q.heap) && q.less(l, m) {
			m = l
		}
		if r := l + 1; r < len(q.heap) && q.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.heap[i], q.heap[m] = q.heap[m], q.heap[i]
		i = m
	}
}

// sortedBy says whether items are in time order.
func sortedBy[T any](items []T, at func(*T) int64) bool {
	for i := 1; i < len(items); i++ {
		if at(&items[i]) < at(&items[i-1]) {
			return false
		}
	}
	return true
}

// decodedPool keeps decodings for reuse (their arenas, label and sample
// lists): the reorder buffer interns the labels it keeps, so nothing
// refers to a decoding once it is parsed.
var decodedPool = sync.Pool{New: func() any { return &RemoteWrite{} }}

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

// write writes the rows of settled hours to the store, and moves the live
// checkpoint past them. Hours before the store's live checkpoint (a
// backfill settled them) are left alone. A failed write keeps the rows for
// the next one: an outage of the store loses nothing.
func (pl *Pipeline) write(ctx context.Context) error {
	pl.writeMu.Lock()
	defer pl.writeMu.Unlock()
	pl.mu.Lock()
	rows := slices.Clone(pl.st.unwritten)
	wls := slices.Clone(pl.st.unwrittenWls)
	qs := slices.Clone(pl.st.unwrittenQueues)
	eps := slices.Clone(pl.st.unwrittenEndpoints)
	pl.mu.Unlock()
	if len(rows) == 0 && len(wls) == 0 && len(qs) == 0 && len(eps) == 0 {
		return nil
	}
	err := pl.writeRows(ctx, rows, wls, qs, eps)
	pl.mu.Lock()
	if err == nil {
		pl.st.unwritten = pl.st.unwritten[len(rows):]
		pl.st.unwrittenWls = pl.st.unwrittenWls[len(wls):]
		pl.st.unwrittenQueues = pl.st.unwrittenQueues[len(qs):]
		pl.st.unwrittenEndpoints = pl.st.unwrittenEndpoints[len(eps):]
		pl.wantSnap = true
		pl.writes.Add(1)
	} else {
		pl.writeFail++
	}
	pl.writeErr = err
	pl.mu.Unlock()
	if err != nil {
		return fmt.Errorf("write %d ledger rows (kept for the next write): %w", len(rows), err)
	}
	return nil
}

// writeRows writes the queue and endpoint rows first: the checkpoint the
// ledger rows move never passes their hours not yet written.
func (pl *Pipeline) writeRows(ctx context.Context, rows []ledger.Row, wls []ledger.WorkloadRow, qs []ledger.QueueRow, eps []ledger.EndpointRow) error {
	name := ledger.LiveCheckpoint(pl.model.Cluster)
	live, err := pl.store.Checkpoint(ctx, name)
	if err != nil {
		return err
	}
	keepQ, _ := fromLive(qs, func(q *ledger.QueueRow) time.Time { return q.Hour }, live)
	if err := pl.store.WriteQueueHours(ctx, keepQ); err != nil {
		return err
	}
	keepE, _ := fromLive(eps, func(e *ledger.EndpointRow) time.Time { return e.Hour }, live)
	if err := pl.store.WriteEndpointHours(ctx, keepE); err != nil {
		return err
	}
	keep, end := fromLive(rows, func(r *ledger.Row) time.Time { return r.Hour }, live)
	keepW, endW := fromLive(wls, func(w *ledger.WorkloadRow) time.Time { return w.Hour }, live)
	if endW.After(end) {
		end = endW
	}
	if n := len(rows) - len(keep); n > 0 {
		pl.log.Warn("hours settled by a backfill are not written again by the live path", "rows", n, "liveCheckpoint", live)
	}
	if err := pl.store.WriteHours(ctx, keep, keepW); err != nil {
		return err
	}
	if end.After(live) {
		return pl.store.SetCheckpoint(ctx, name, end)
	}
	return nil
}

// fromLive returns the items whose hour is not before live (the others a
// backfill settled), and the end of the last hour among all of them.
func fromLive[T any](items []T, hour func(*T) time.Time, live time.Time) (keep []T, end time.Time) {
	keep = items[:0:0]
	for i := range items {
		h := hour(&items[i])
		if h.Add(time.Hour).After(end) {
			end = h.Add(time.Hour)
		}
		if !h.Before(live) {
			keep = append(keep, items[i])
		}
	}
	return keep, end
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

// PipelineStats is what a Pipeline counts, for /metrics.
type PipelineStats struct {
	Ingest      Stats
	Attribution attribution.Stats
	// Rejected counts late and too-new samples per sender and reason.
	Rejected map[[2]string]uint64
	// Buffered is what waits in the reorder window, and BufferedBytes
	// what it costs (MaxBufferedBytes bounds it).
	Buffered      int
	BufferedBytes int64
	// Shed counts samples and pod facts put in order early, before their
	// window had passed, because the buffer held MaxBuffered.
	Shed uint64
	// CatchingUp is set while a backlog comes in: the window is
	// CatchUpWindow, or the backlog's depth.
	CatchingUp bool
	// Window is the reorder window in force.
	Window time.Duration
	// Unwritten is how many ledger rows wait to be written.
	Unwritten int
	// Pods is how many pods attribution remembers.
	Pods int
	// SettledUntil is where the settled hours end.
	SettledUntil time.Time
	// WriteFailures counts failed ledger writes.
	WriteFailures uint64
	// LogFailing is set while the write-ahead log cannot be written.
	LogFailing bool
	// WALCorruptRecords and WALCorruptBytes are the acknowledged records
	// and the damaged bytes replay at start could not read, by segment
	// file; WALMissingSegments counts segments it found missing.
	WALCorruptRecords, WALCorruptBytes map[string]uint64
	WALMissingSegments                 uint64
}

// Stats returns the counters.
func (pl *Pipeline) Stats() PipelineStats {
	logFailing := pl.c.failing() != nil
	now := pl.opts.Now().UnixMilli()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	s := PipelineStats{Ingest: pl.st.p.Stats(), Attribution: pl.st.att.Stats(), Rejected: make(map[[2]string]uint64, len(pl.st.rejected)),
		Buffered: pl.st.buffered(), BufferedBytes: pl.st.bufferBytes(), Shed: pl.st.shed, CatchingUp: pl.st.catchingUp(now), Window: time.Duration(pl.st.window(now, pl.opts)) * time.Millisecond, Unwritten: len(pl.st.unwritten), Pods: pl.st.att.Pods(),
		SettledUntil: time.UnixMilli(pl.st.att.EmittedUntil()).UTC(), WriteFailures: pl.writeFail, LogFailing: logFailing}
	for k, v := range pl.st.rejected {
		s.Rejected[[2]string{k.sender, k.reason}] = v
	}
	s.WALCorruptRecords, s.WALCorruptBytes, s.WALMissingSegments = maps.Clone(pl.walLost.records), maps.Clone(pl.walLost.bytes), pl.walLost.missing
	return s
}
