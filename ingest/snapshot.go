package ingest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// Snapshots of the live pipeline's state, each named by the sequence number
// of the last log record it holds. The last two are kept and the log is cut
// up to the older one, so that a snapshot found corrupt at start (a disk
// error) is replaced by the one before it and more of the log.

// snapshotVersion 2 writes the reorder buffer after the header, in
// chunks (snapshotbuf.go); version 1, which had it in the header's
// Samples, Pods and Queues, is still read.
const snapshotVersion = 2

// keepSnapshots is how many snapshots are kept.
const keepSnapshots = 2

// pipelineSnapshot is the encoding of a pipeline's state.
type pipelineSnapshot struct {
	Version    int
	Seq        uint64
	Attributor []byte
	// Samples, Pods and Queues are the reorder buffer of a version 1
	// snapshot.
	Samples []attribution.Sample
	Pods    []attribution.PodInfo
	Queues  []attribution.QueueSample
	Ingest  Stats
	MaxMs   int64
	// ReleasedMs is zero in snapshots of older binaries: the first
	// release after them sets it.
	ReleasedMs int64
	// LastWriteMs is zero in older snapshots: the first tick takes the
	// feed for silent, and releases nothing.
	LastWriteMs int64
	// CatchUpUntilMs, zero in older snapshots, keeps the catch-up window
	// of a backlog that was coming in.
	CatchUpUntilMs int64
	// CatchUpDepthMs and CatchUpDepthAtMs, zero in older snapshots (the
	// catch-up window then holds CatchUpWindow), are the depth of that
	// backlog and when it was taken.
	CatchUpDepthMs, CatchUpDepthAtMs int64
	// Shed, zero in older snapshots, counts what the buffer's bound
	// released early.
	Shed uint64
	// SettleNotBeforeMs is kept as it was: a restart records a start of
	// its own.
	SettleNotBeforeMs int64
	Unwritten         []ledger.Row
	UnwrittenWls      []ledger.WorkloadRow
	UnwrittenQueues   []ledger.QueueRow
	UnwrittenEps      []ledger.EndpointRow
	// UnwrittenLines, empty in older snapshots, are the unwritten rows'
	// lines.
	UnwrittenLines []ledger.Line
	Rejected       map[string]uint64 // sender + "\x00" + reason
	// buffer reads a version 2 snapshot's reorder buffer, after the
	// header (not encoded: the buffer is written by encodeBuffer).
	buffer *gob.Decoder
}

func snapshotName(seq uint64) string { return fmt.Sprintf("snapshot-%020d.gob", seq) }

// encode saves the state; called with the state lock held.
func (st *state) encode() (*pipelineSnapshot, error) {
	att, err := st.att.Snapshot()
	if err != nil {
		return nil, err
	}
	s := &pipelineSnapshot{Version: snapshotVersion, Seq: st.applied, Attributor: att, Ingest: st.p.stats,
		MaxMs: st.maxMs, ReleasedMs: st.releasedMs, LastWriteMs: st.lastWriteMs, CatchUpUntilMs: st.catchUpUntilMs, CatchUpDepthMs: st.catchUpDepthMs, CatchUpDepthAtMs: st.catchUpDepthAtMs, Shed: st.shed, SettleNotBeforeMs: st.settleNotBefore,
		Unwritten: slices.Clone(st.unwritten), UnwrittenWls: slices.Clone(st.unwrittenWls), UnwrittenQueues: slices.Clone(st.unwrittenQueues),
		UnwrittenEps: slices.Clone(st.unwrittenEndpoints), UnwrittenLines: slices.Clone(st.unwrittenLines), Rejected: make(map[string]uint64)}
	for k, v := range st.rejected {
		s.Rejected[k.sender+"\x00"+k.reason] = v
	}
	return s, nil
}

// restore loads a snapshot into the state.
func (st *state) restore(s *pipelineSnapshot, model *attribution.Model, aopts attribution.Options, log *slog.Logger) error {
	att, rep, err := attribution.Restore(model, aopts, s.Attributor)
	if err != nil {
		return fmt.Errorf("restore the snapshot: %w", err)
	}
	if len(rep.DroppedDevices) > 0 {
		log.Warn("devices of the snapshot are no longer in the configuration; what they held in open hours is dropped", "devices", rep.DroppedDevices)
	}
	st.att = att
	st.sets = labelSets{}
	if s.buffer != nil {
		if err := st.decodeBuffer(s.buffer); err != nil {
			return fmt.Errorf("restore the snapshot: %w", err)
		}
	} else {
		st.samples.reset(each(s.Samples, st.sets.hold), sampleMs, sampleBytes)
		st.pods.reset(each(s.Pods, st.sets.holdPod), podMs, podBytes)
		st.queues.reset(each(s.Queues, st.sets.holdQueue), queueMs, queueBytes)
	}
	st.p = Parser{stats: s.Ingest}
	st.maxMs, st.releasedMs, st.lastWriteMs, st.settleNotBefore = s.MaxMs, s.ReleasedMs, s.LastWriteMs, s.SettleNotBeforeMs
	st.catchUpUntilMs, st.catchUpDepthMs, st.catchUpDepthAtMs, st.shed = s.CatchUpUntilMs, s.CatchUpDepthMs, s.CatchUpDepthAtMs, s.Shed
	st.unwritten, st.unwrittenWls, st.unwrittenQueues, st.unwrittenEndpoints = s.Unwritten, s.UnwrittenWls, s.UnwrittenQueues, s.UnwrittenEps
	st.unwrittenLines = s.UnwrittenLines
	st.applied = s.Seq
	st.rejected = make(map[senderReason]uint64, len(s.Rejected))
	for k, v := range s.Rejected {
		sender, reason, _ := strings.Cut(k, "\x00")
		st.rejected[senderReason{sender, reason}] = v
	}
	return nil
}

// writeSnapshot saves the state's header s and, after it, the reorder
// buffer of st in dir: written to a temporary file as it is encoded,
// fsynced, renamed, and the directory fsynced. The file is the CRC-32C of
// the rest, then the gob stream. Called with the state lock held.
func writeSnapshot(dir string, s *pipelineSnapshot, st *state) error {
	name := snapshotName(s.Seq)
	if err := writeAtomic(dir, name, func(f *os.File) error { return encodeSnapshot(f, s, st) }); err != nil {
		return fmt.Errorf("write snapshot %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// encodeSnapshot writes the checksum's place, the gob stream through a
// buffer and the checksum, then the checksum at the start.
func encodeSnapshot(f *os.File, s *pipelineSnapshot, st *state) error {
	if _, err := f.Write(make([]byte, 4)); err != nil {
		return err
	}
	w := &crcWriter{w: bufio.NewWriterSize(f, 1<<20)}
	enc := gob.NewEncoder(w)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if err := st.encodeBuffer(enc); err != nil {
		return fmt.Errorf("encode the reorder buffer: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	_, err := f.WriteAt(binary.LittleEndian.AppendUint32(nil, w.crc), 0)
	return err
}

// crcWriter writes through to w and keeps the CRC-32C of what it wrote.
type crcWriter struct {
	w   *bufio.Writer
	crc uint32
}

func (c *crcWriter) Write(b []byte) (int, error) {
	c.crc = crc32.Update(c.crc, crcTable, b)
	return c.w.Write(b)
}

func listSnapshots(dir string) ([]numbered, error) { return listNumbered(dir, "snapshot-", ".gob") }

// loadSnapshot returns the newest snapshot of dir that reads back whole,
// nil when there is none; it creates dir.
func loadSnapshot(dir string, log *slog.Logger) (*pipelineSnapshot, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the pipeline directory: %w", err)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, t := range tmps {
		os.Remove(t) // a snapshot write a crash interrupted
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		return nil, err
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		s, err := readSnapshot(snaps[i].path)
		if err == nil {
			return s, nil
		}
		log.Error("snapshot unreadable; trying the one before it", "path", snaps[i].path, "err", err)
	}
	if len(snaps) > 0 {
		return nil, fmt.Errorf("no snapshot in %s reads back; move the directory aside to start anew (the hours the log holds would be lost)", dir)
	}
	return nil, nil
}

var errCorrupt = errors.New("checksum mismatch")

func readSnapshot(path string) (*pipelineSnapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 4 || crc32.Checksum(data[4:], crcTable) != binary.LittleEndian.Uint32(data) {
		return nil, errCorrupt
	}
	var s pipelineSnapshot
	dec := gob.NewDecoder(bytes.NewReader(data[4:]))
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	switch s.Version {
	case 1:
	case snapshotVersion:
		s.buffer = dec
	default:
		return nil, fmt.Errorf("snapshot version %d; this binary reads 1 to %d", s.Version, snapshotVersion)
	}
	return &s, nil
}

// maybeSnapshot saves a snapshot when one is due: after rows were written,
// or SnapshotEvery after the last. It runs on the committer's applying
// goroutine, between batches applied.
func (pl *Pipeline) maybeSnapshot() {
	if !pl.snapshotDue() {
		return
	}
	if err := pl.snapshot(true); err != nil {
		pl.log.Error("snapshot failed; the write-ahead log keeps growing until one succeeds", "err", err)
	}
}

// snapshotDue says whether a snapshot is due: the pipeline keeps a log,
// and rows were written or SnapshotEvery passed since the last.
func (pl *Pipeline) snapshotDue() bool {
	if pl.opts.Dir == "" {
		return false
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.wantSnap || time.Since(pl.lastSnap) >= pl.opts.SnapshotEvery
}

// snapshot saves the state and, with cut, starts a new log segment and
// cuts the log up to the older of the snapshots kept. It runs on the
// committer's applying goroutine, or after it stopped (then without cut).
func (pl *Pipeline) snapshot(cut bool) error {
	// The buffer is written as it is read, under the lock: no copy of it
	// (millions of items at its bound) is made. Nothing is applied
	// meanwhile: this runs between batches, or after the last.
	pl.mu.Lock()
	s, err := pl.st.encode()
	pl.wantSnap = false
	pl.lastSnap = time.Now()
	if err == nil {
		err = writeSnapshot(pl.opts.Dir, s, &pl.st)
	}
	pl.snapErr = err
	pl.mu.Unlock()
	if err != nil || !cut {
		return err
	}
	if err := pl.c.rotate(); err != nil {
		return err
	}
	snaps, err := listSnapshots(pl.opts.Dir)
	if err != nil {
		return err
	}
	if len(snaps) == 0 {
		return fmt.Errorf("no snapshot in %s after writing one: was the directory removed?", pl.opts.Dir)
	}
	if len(snaps) > keepSnapshots {
		for _, old := range snaps[:len(snaps)-keepSnapshots] {
			os.Remove(old.path)
		}
		snaps = snaps[len(snaps)-keepSnapshots:]
	}
	pl.c.truncate(snaps[0].n)
	return nil
}

// each returns f of every item: the buffered items with their labels for
// a snapshot, and a snapshot's items buffered again, labels interned.
func each[A, B any](items []A, f func(*A) B) []B {
	out := make([]B, len(items))
	for i := range items {
		out[i] = f(&items[i])
	}
	return out
}
