package clickhouse

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The spool keeps writes that could not reach ClickHouse, in order, on local
// disk: spool.log is append-only, one record after another, each
//
//	magic uint32 | length uint32 | crc32c(payload) uint32 | payload (JSON record)
//
// fsync'd before the write is acknowledged. spool.offset holds how far the
// log has been replayed, replaced atomically (write, fsync, rename) after
// each record is in ClickHouse; re-applying a record is harmless, since a
// record replaces its hours under its own version. A record cut short by a
// crash, or whose checksum fails, is skipped and counted, never applied in
// part.

const (
	spoolMagic     = 0x67706c73 // "gpls"
	spoolHeader    = 12
	spoolLogName   = "spool.log"
	spoolOffName   = "spool.offset"
	maxRecordBytes = 512 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSpoolFull is returned when the spool has reached its bound: the caller
// must hold its data until ClickHouse is back.
var ErrSpoolFull = errors.New("clickhouse spool is full")

// SpoolStats counts what the spool did.
type SpoolStats struct {
	// PendingBytes and PendingRecords are what waits to be replayed.
	PendingBytes   int64
	PendingRecords int
	// Spooled and Replayed count records since Open.
	Spooled, Replayed uint64
	// Corrupt counts records skipped because they were torn or failed
	// their checksum.
	Corrupt uint64
}

type spool struct {
	mu       sync.Mutex
	dir      string
	log      *slog.Logger
	maxBytes int64
	f        *os.File // spool.log, opened for append
	size     int64    // bytes in spool.log
	offset   int64    // replayed up to here
	records  int      // records pending
	stats    SpoolStats
}

func openSpool(dir string, maxBytes int64, log *slog.Logger) (*spool, error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, spoolLogName), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	sp := &spool{dir: dir, log: log, maxBytes: maxBytes, f: f, size: st.Size()}
	if sp.offset, err = readOffset(dir); err != nil {
		f.Close()
		return nil, err
	}
	if sp.offset > sp.size {
		sp.offset = sp.size
	}
	if err := sp.repairTail(); err != nil {
		f.Close()
		return nil, err
	}
	// Count what is pending, so that stats and pending() are right.
	if err := sp.scan(func(*record) error { sp.records++; return nil }, false); err != nil {
		f.Close()
		return nil, err
	}
	if sp.records > 0 {
		log.Warn("clickhouse spool has writes to replay", "records", sp.records, "bytes", sp.size-sp.offset)
	}
	return sp, nil
}

func readOffset(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, spoolOffName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read spool offset: %w", err)
	}
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		// A torn offset file: replaying from the start only re-applies
		// records, which is harmless.
		return 0, nil
	}
	return int64(binary.LittleEndian.Uint64(b[:8])), nil
}

func (sp *spool) writeOffset(off int64) error {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(off))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	tmp := filepath.Join(sp.dir, spoolOffName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(sp.dir, spoolOffName))
}

func (sp *spool) pending() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.offset < sp.size
}

// append writes rec durably at the end of the log.
func (sp *spool) append(rec *record) error {
	payload, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode spool record: %w", err)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.size-sp.offset+int64(len(payload)+spoolHeader) > sp.maxBytes {
		return fmt.Errorf("%w (%d bytes pending, limit %d): ClickHouse has been unreachable too long", ErrSpoolFull, sp.size-sp.offset, sp.maxBytes)
	}
	buf := make([]byte, spoolHeader+len(payload))
	binary.LittleEndian.PutUint32(buf[0:], spoolMagic)
	binary.LittleEndian.PutUint32(buf[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[8:], crc32.Checksum(payload, castagnoli))
	copy(buf[spoolHeader:], payload)
	if _, err := sp.f.Write(buf); err != nil {
		return fmt.Errorf("append to spool: %w", err)
	}
	if err := sp.f.Sync(); err != nil {
		return fmt.Errorf("sync spool: %w", err)
	}
	sp.size += int64(len(buf))
	sp.records++
	sp.stats.Spooled++
	return nil
}

// scan reads the records from the replay offset on, calling fn for each in
// order. With advance, the offset moves past each record fn accepts (and
// past torn ones); it stops at fn's first error.
func (sp *spool) scan(fn func(*record) error, advance bool) error {
	sp.mu.Lock()
	start, end := sp.offset, sp.size
	sp.mu.Unlock()
	r, err := os.Open(filepath.Join(sp.dir, spoolLogName))
	if err != nil {
		return fmt.Errorf("read spool: %w", err)
	}
	defer r.Close()
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(io.LimitReader(r, end-start), 1<<20)
	off := start
	var hdr [spoolHeader]byte
	for off < end {
		next, rec, bad := readRecord(br, hdr[:], off, end)
		if bad != "" && advance {
			sp.mu.Lock()
			sp.stats.Corrupt++
			sp.mu.Unlock()
			sp.log.Error("skipping a bad spool record", "offset", off, "why", bad)
		}
		if rec != nil {
			if err := fn(rec); err != nil {
				return err
			}
		}
		off = next
		if advance {
			if err := sp.writeOffset(off); err != nil {
				return fmt.Errorf("write spool offset: %w", err)
			}
			sp.mu.Lock()
			sp.offset = off
			if rec != nil {
				sp.records--
				sp.stats.Replayed++
			}
			sp.mu.Unlock()
		}
	}
	return nil
}

// repairTail cuts off a record torn by a crash at the end of the log, so
// that records appended later are not read as its remains. It is counted as
// corrupt; it was never acknowledged, since a record is acknowledged only
// once it is whole on disk.
func (sp *spool) repairTail() error {
	r, err := os.Open(filepath.Join(sp.dir, spoolLogName))
	if err != nil {
		return fmt.Errorf("read spool: %w", err)
	}
	defer r.Close()
	if _, err := r.Seek(sp.offset, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	off := sp.offset
	var hdr [spoolHeader]byte
	for off < sp.size {
		next, _, bad := readRecord(br, hdr[:], off, sp.size)
		if bad != "" && next == sp.size {
			sp.log.Error("cutting a torn record off the spool", "offset", off, "bytes", sp.size-off, "why", bad)
			sp.stats.Corrupt++
			if err := sp.f.Truncate(off); err != nil {
				return fmt.Errorf("truncate spool: %w", err)
			}
			sp.size = off
			return sp.f.Sync()
		}
		off = next
	}
	return nil
}

// readRecord reads the record at off. It returns where the next record
// starts, the record, or why it is bad (then rec is nil): a record cut
// short ends the log, a checksum failure skips just that record.
func readRecord(br *bufio.Reader, hdr []byte, off, end int64) (int64, *record, string) {
	if _, err := io.ReadFull(br, hdr); err != nil {
		return end, nil, fmt.Sprintf("torn header at the end of the log (%d bytes)", end-off)
	}
	if binary.LittleEndian.Uint32(hdr[0:]) != spoolMagic {
		return end, nil, "bad magic: the rest of the log is unreadable"
	}
	n := int64(binary.LittleEndian.Uint32(hdr[4:]))
	if n > maxRecordBytes || off+spoolHeader+n > end {
		return end, nil, fmt.Sprintf("torn record: %d payload bytes announced, %d left", n, end-off-spoolHeader)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		return end, nil, "torn payload"
	}
	next := off + spoolHeader + n
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[8:]) {
		return next, nil, "checksum mismatch"
	}
	var rec record
	if err := json.Unmarshal(payload, &rec); err != nil {
		return next, nil, "undecodable payload: " + err.Error()
	}
	return next, &rec, ""
}

// compact empties the log once everything in it is replayed.
func (sp *spool) compact() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.offset < sp.size || sp.size == 0 {
		return nil
	}
	if err := sp.f.Truncate(0); err != nil {
		return err
	}
	if err := sp.f.Sync(); err != nil {
		return err
	}
	sp.size, sp.offset, sp.records = 0, 0, 0
	return sp.writeOffset(0)
}

func (sp *spool) snapshot() SpoolStats {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	st := sp.stats
	st.PendingBytes, st.PendingRecords = sp.size-sp.offset, sp.records
	return st
}

func (sp *spool) close() error { return sp.f.Close() }

// replayLoop retries the spool every ReplayEvery until Close.
func (s *Store) replayLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.ReplayEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if err := s.Replay(); err != nil {
			s.log.Warn("clickhouse spool replay stopped; will retry", "err", err)
		}
	}
}

// Replay applies the spooled writes in order, as far as the server lets it.
func (s *Store) Replay() error {
	if s.spool == nil || !s.spool.pending() {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	ctx, cancel := contextWithStop(s.stop)
	defer cancel()
	if err := s.spool.scan(func(rec *record) error { return s.apply(ctx, rec) }, true); err != nil {
		return err
	}
	return s.spool.compact()
}

// SpoolStats returns the spool's counters; zero without a spool.
func (s *Store) SpoolStats() SpoolStats {
	if s.spool == nil {
		return SpoolStats{}
	}
	return s.spool.snapshot()
}
