package ingest

// Writing the ledger: what attribution settled goes to the store, the
// hours written before the live start apart.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

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
	lines := slices.Clone(pl.st.unwrittenLines)
	pl.mu.Unlock()
	if len(rows) == 0 && len(wls) == 0 && len(qs) == 0 && len(eps) == 0 && len(lines) == 0 {
		return nil
	}
	err := pl.writeRows(ctx, rows, wls, qs, eps, lines)
	pl.mu.Lock()
	if err == nil {
		pl.st.unwritten = pl.st.unwritten[len(rows):]
		pl.st.unwrittenWls = pl.st.unwrittenWls[len(wls):]
		pl.st.unwrittenQueues = pl.st.unwrittenQueues[len(qs):]
		pl.st.unwrittenEndpoints = pl.st.unwrittenEndpoints[len(eps):]
		pl.st.unwrittenLines = pl.st.unwrittenLines[len(lines):]
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

// writeRows writes the queue and endpoint rows and the lines first: the
// checkpoint the ledger rows move never passes their hours not yet
// written.
func (pl *Pipeline) writeRows(ctx context.Context, rows []ledger.Row, wls []ledger.WorkloadRow, qs []ledger.QueueRow, eps []ledger.EndpointRow,
	lines []ledger.Line) error {
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
	if ls, ok := pl.store.(ledger.LineStore); ok {
		keepL, _ := fromLive(lines, func(l *ledger.Line) time.Time { return l.Hour }, live)
		if err := ls.WriteLineHours(ctx, keepL); err != nil {
			return err
		}
	}
	keep, end := fromLive(rows, func(r *ledger.Row) time.Time { return r.Hour }, live)
	keepW, endW := fromLive(wls, func(w *ledger.WorkloadRow) time.Time { return w.Hour }, live)
	if endW.After(end) {
		end = endW
	}
	if n := len(rows) - len(keep); n > 0 {
		// A backfill, or another replica writing the same store, settled
		// them: not written again, but compared where the store can.
		pl.log.Info("hours settled by a backfill or another replica are not written again by the live path", "rows", n, "liveCheckpoint", live)
		if pc, ok := pl.store.(ledger.PeerComparer); ok {
			pc.CompareHours(ctx, slices.DeleteFunc(slices.Clone(rows), func(r ledger.Row) bool { return !r.Hour.Before(live) }))
		}
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
