package ingest

// What a Pipeline counts, for /metrics.

import (
	"maps"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
)

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
