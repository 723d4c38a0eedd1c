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
	// one. Each chunk's hours are written, then the checkpoint.
	Chunk time.Duration
	// Progress, when set, is called after each chunk.
	Progress func(p BackfillProgress)
	Logger   *slog.Logger
}

// BackfillProgress reports a backfill's state after a chunk.
type BackfillProgress struct {
	Done, Total time.Duration
	// Resumed is where the run started when it continued from a checkpoint.
	Resumed     time.Time
	Rows        int
	Ingest      Stats
	Attribution attribution.Stats
}

// CheckpointName is the checkpoint a backfill of a source keeps.
func CheckpointName(s Source) string { return "backfill:" + s.Name() }

// primeWindow is how far before its first hour a backfill reads to restore
// device state (energy counters), as an uninterrupted run would have it.
const primeWindow = 5 * time.Minute

// Backfill reads [Start, End) from the source chunk by chunk, attributes it
// and writes the ledger hour by hour, recording a checkpoint after each
// chunk. Run again after an interruption, it resumes at the checkpoint; since
// hours are replaced, never added to, the ledger ends as an uninterrupted run
// would have left it.
func Backfill(ctx context.Context, o BackfillOptions) (BackfillProgress, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
	att, err := attribution.New(o.Model, aopts)
	if err != nil {
		return prog, fmt.Errorf("cost model: %w", err)
	}
	var p Parser
	if err := o.Source.Fetch(ctx, from.Add(-primeWindow), from, &p, primer{att}); err != nil {
		return prog, fmt.Errorf("read the %s before %s: %w", primeWindow, from.Format(time.RFC3339), err)
	}
	p = Parser{}
	for t := from; t.Before(end); t = t.Add(chunk) {
		next := t.Add(chunk)
		if next.After(end) {
			next = end
		}
		if err := o.Source.Fetch(ctx, t, next, &p, att); err != nil {
			return prog, fmt.Errorf("read %s to %s from %s: %w; run the same command again to resume", t.Format(time.RFC3339), next.Format(time.RFC3339), o.Source.Name(), err)
		}
		rows, wls := att.Emit(next.UnixMilli())
		if err := o.Store.WriteHours(ctx, rows, wls); err != nil {
			return prog, fmt.Errorf("write %s to %s: %w; run the same command again to resume", t.Format(time.RFC3339), next.Format(time.RFC3339), err)
		}
		if err := o.Store.SetCheckpoint(ctx, name, next); err != nil {
			return prog, err
		}
		prog.Done = next.Sub(start)
		prog.Rows += len(rows)
		prog.Ingest = p.Stats()
		prog.Attribution = att.Stats()
		if o.Progress != nil {
			o.Progress(prog)
		}
	}
	return prog, nil
}

// primer feeds samples to Attributor.Prime.
type primer struct{ a *attribution.Attributor }

func (p primer) Add(s *attribution.Sample)    { p.a.Prime(s) }
func (p primer) AddPod(i attribution.PodInfo) { p.a.AddPod(i) }
