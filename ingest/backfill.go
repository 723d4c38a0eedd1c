package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// BackfillOptions drives Backfill.
type BackfillOptions struct {
	Source      Source
	Store       ledger.Store
	Model       *attribution.Model
	Attribution attribution.Options
	// Start and End bound the range; both are rounded down to an hour, since
	// the ledger is written in whole hours.
	Start, End time.Time
	// Chunk is how much one request reads; a whole number of hours, default
	// one. The ledger does not depend on it.
	Chunk time.Duration
	// Progress, when set, is called after each chunk.
	Progress func(p BackfillProgress)
	// SplitProgress, when set, is called every few seconds while a
	// Preparer source makes its one pass: the bytes read of the total.
	SplitProgress func(read, total int64)
	Logger        *slog.Logger
	// Now is the clock for audit entries; time.Now when nil.
	Now func() time.Time
	// By and Reason say who runs the backfill and why, for the
	// restatements of the hours it changes (ledger.Rewrite).
	By, Reason string
}

// BackfillProgress reports a backfill's state after a chunk.
type BackfillProgress struct {
	Done, Total time.Duration
	// Resumed is where the run started when it continued from a checkpoint.
	Resumed     time.Time
	Rows        int
	Ingest      Stats
	Attribution attribution.Stats
	// SettledRewritten counts hours written again that the live path had
	// settled: each rewrite is recorded in the ledger's audit.
	SettledRewritten int
	// Restated counts the team-hours of open months whose figures the
	// backfill changed, Adjusted those of closed months (not written;
	// billed in the first open month), and ClosedHours the cluster-hours
	// it did not write because their month is closed.
	Restated, Adjusted, ClosedHours int
}

// CheckpointName is the checkpoint a backfill of a source keeps.
func CheckpointName(s Source) string { return "backfill:" + s.Name() }

// Backfill reads [Start, End) from the source chunk by chunk, attributes it
// and writes the ledger hour by hour, recording a checkpoint at the end of
// the hours written. Attribution closes an hour once the data is past it by
// the staleness bound, whatever the chunks, and the last hour is closed
// with that much data after End read too, so the ledger is the one a live
// run over the same data writes, for any Chunk. Run again after an
// interruption, it resumes at the checkpoint, first reading the window
// before it that restores what an uninterrupted run would know there; since
// hours are replaced, never added to, the ledger ends as an uninterrupted
// run would have left it.
//
// Hours the live path (gpuledger serve) has settled may be rewritten: that
// is what a backfill is for. Each such rewrite is recorded in the ledger's
// audit, and every team whose figures it changes gets a restatement;
// hours of closed months are not written, their changes are adjustments
// billed in the first open month (ledger.Rewrite). A backfill that writes hours past the live path's checkpoint
// moves it, so that the live path, which never writes before it, does not
// overwrite them.
func Backfill(ctx context.Context, o BackfillOptions) (BackfillProgress, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	chunk := o.Chunk
	if chunk <= 0 {
		chunk = time.Hour
	}
	if chunk%time.Hour != 0 {
		return BackfillProgress{}, fmt.Errorf("chunk %s is not a whole number of hours", chunk)
	}
	start, end := o.Start.UTC().Truncate(time.Hour), o.End.UTC().Truncate(time.Hour)
	if !end.After(start) {
		return BackfillProgress{}, fmt.Errorf("range %s to %s holds no whole hour; want -end at least an hour after -start", o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339))
	}
	name := CheckpointName(o.Source)
	cp, err := o.Store.Checkpoint(ctx, name)
	if err != nil {
		return BackfillProgress{}, err
	}
	liveName := ledger.LiveCheckpoint(o.Model.Cluster)
	live, err := o.Store.Checkpoint(ctx, liveName)
	if err != nil {
		return BackfillProgress{}, err
	}
	from := start
	prog := BackfillProgress{Total: end.Sub(start)}
	if cp.After(start) && cp.Before(end) {
		from = cp.Truncate(time.Hour)
		prog.Resumed = from
		log.Info("resuming backfill at checkpoint", "source", name, "at", from)
	} else if !cp.Before(end) && !cp.IsZero() {
		log.Info("backfill already done up to its checkpoint", "source", name, "checkpoint", cp)
		prog.Done = prog.Total
		return prog, nil
	}
	aopts := o.Attribution
	aopts.StartMs = from.UnixMilli()
	_, aopts.Lines = o.Store.(ledger.LineStore)
	att, err := attribution.New(o.Model, aopts)
	if err != nil {
		return prog, fmt.Errorf("cost model: %w", err)
	}
	prime := time.Duration(aopts.PrimeWindowMs()) * time.Millisecond
	// The data just after the range decides how long the last observations
	// before End lasted: the staleness window past it is read too.
	after := time.Duration(aopts.SettleDelayMs()) * time.Millisecond
	if pr, ok := o.Source.(Preparer); ok {
		if err := pr.Prepare(ctx, from.Add(-prime), end.Add(after), o.SplitProgress); err != nil {
			return prog, err
		}
		defer pr.Close()
	}
	var p Parser
	if err := o.Source.Fetch(ctx, from.Add(-prime), from, &p, primer{att}); err != nil {
		return prog, fmt.Errorf("read the %s before %s: %w", prime, from.Format(time.RFC3339), err)
	}
	p = Parser{}
	write := func(rows []ledger.Row, wls []ledger.WorkloadRow) error {
		if err := writeSideHours(ctx, o.Store, att); err != nil {
			return err
		}
		if len(rows) == 0 && len(wls) == 0 {
			return nil
		}
		res, err := ledger.RewriteLines(ctx, o.Store, rows, wls, att.Lines(), ledger.Provenance{Source: name, By: o.By, Reason: o.Reason, Now: now})
		if err != nil {
			return err
		}
		prog.Restated += res.Restated
		prog.Adjusted += res.Adjusted
		prog.ClosedHours += res.Hours - res.Written
		prog.Rows += len(rows)
		return recordRewrite(ctx, o.Store, live, rows, name, now, &prog)
	}
	until := from // the end of the hours written
	checkpoint := func() error {
		t := time.UnixMilli(att.EmittedUntil()).UTC()
		if !t.After(until) {
			return nil
		}
		until = t
		if err := o.Store.SetCheckpoint(ctx, name, until); err != nil {
			return err
		}
		if !live.IsZero() && until.After(live) {
			// Settled here, not by the live path: it must not write them.
			if err := o.Store.SetCheckpoint(ctx, liveName, until); err != nil {
				return err
			}
			live = until
		}
		return nil
	}
	for t := from; t.Before(end); t = t.Add(chunk) {
		next := t.Add(chunk)
		if next.After(end) {
			next = end
		}
		if err := o.Source.Fetch(ctx, t, next, &p, att); err != nil {
			return prog, fmt.Errorf("read %s to %s from %s: %w; run the same command again to resume", t.Format(time.RFC3339), next.Format(time.RFC3339), o.Source.Name(), err)
		}
		if err := write(att.Ready()); err != nil {
			return prog, fmt.Errorf("write %s to %s: %w; run the same command again to resume", t.Format(time.RFC3339), next.Format(time.RFC3339), err)
		}
		if err := checkpoint(); err != nil {
			return prog, err
		}
		prog.Done = next.Sub(start)
		prog.Ingest = p.Stats()
		prog.Attribution = att.Stats()
		if o.Progress != nil && next.Before(end) {
			o.Progress(prog)
		}
	}
	// Read the staleness window past End, then close.
	if err := o.Source.Fetch(ctx, end, end.Add(after), &p, att); err != nil {
		return prog, fmt.Errorf("read the %s after %s: %w; run the same command again to resume", after, end.Format(time.RFC3339), err)
	}
	// The data has ended: the gaps' requests are what it has.
	att.CloseEndpoints()
	rows, wls := att.Emit(end.UnixMilli())
	if err := write(rows, wls); err != nil {
		return prog, fmt.Errorf("write up to %s: %w; run the same command again to resume", end.Format(time.RFC3339), err)
	}
	if err := checkpoint(); err != nil {
		return prog, err
	}
	prog.Done = prog.Total
	prog.Ingest = p.Stats()
	prog.Attribution = att.Stats()
	if o.Progress != nil {
		o.Progress(prog)
	}
	return prog, nil
}

// recordRewrite records, in the store's audit, the hours among rows that
// the live path had settled (before live).
func recordRewrite(ctx context.Context, store ledger.Store, live time.Time, rows []ledger.Row, source string, now func() time.Time, prog *BackfillProgress) error {
	var first, last time.Time
	n, hours := 0, map[time.Time]bool{}
	for _, r := range rows {
		if !r.Hour.Before(live) {
			continue
		}
		if first.IsZero() || r.Hour.Before(first) {
			first = r.Hour
		}
		if r.Hour.After(last) {
			last = r.Hour
		}
		hours[r.Hour] = true
		n++
	}
	if n == 0 {
		return nil
	}
	prog.SettledRewritten += len(hours)
	return store.RecordAudit(ctx, ledger.AuditEntry{At: now().UTC(), Cluster: rows[0].Cluster, From: first, To: last.Add(time.Hour),
		Source: source, Rows: n, Note: fmt.Sprintf("backfill rewrote %d hour(s) the live path had settled", len(hours))})
}

// primer feeds samples to Attributor.Prime.
type primer struct{ a *attribution.Attributor }

func (p primer) Add(s *attribution.Sample)    { p.a.Prime(s) }
func (p primer) AddPod(i attribution.PodInfo) { p.a.PrimePod(i) }

func (p primer) AddQueue(q *attribution.QueueSample) { p.a.PrimeQueue(q) }

// writeSideHours writes the queue and endpoint rows of the hours att has
// emitted, before the ledger rows of the same hours.
func writeSideHours(ctx context.Context, store ledger.Store, att *attribution.Attributor) error {
	if err := store.WriteQueueHours(ctx, att.QueueRows()); err != nil {
		return err
	}
	return store.WriteEndpointHours(ctx, att.EndpointRows())
}
