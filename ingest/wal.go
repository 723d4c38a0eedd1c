package ingest

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The write-ahead log of the live pipeline: every request it acknowledges,
// every tick that changed its state, every start, in the order they were
// applied. With the last snapshot it rebuilds the pipeline exactly after a
// crash. It is kept in segment files named by their first record's
// sequence number; a segment whose records are all in a snapshot is
// deleted.
//
// A record on disk is its payload's length and CRC-32C (Castagnoli), then
// the payload: kind, sequence number, the server's clock when it arrived, an
// auxiliary number (the scrape time of an exposition, the end of a settle,
// how many series were cut from a remote-write body), the sender and the
// body. Records stand alone: each is checked by its own checksum, and the
// sequence numbers of the log, read in segment order, go up by one. A
// record that is short or fails its checksum does not end the segment:
// replay looks for the next intact record after it, byte by byte, and goes
// on from there. Damage that runs to a segment's end, with the next record
// (in the next segment) numbered right after the last one read, is a write
// a crash tore, never acknowledged. Any other jump in the numbers is
// acknowledged records lost (damaged bytes, a segment cut short or
// missing): replay counts them, logs the segment and the numbers, and the
// pipeline flags the hours they could have added to (restore). A write
// that fails leaves no gap: the next batch begins with a record saying
// which numbers the failed one took (recSkip). The name of the newest
// segment, and the number of the last record made durable (at most a
// second old), are kept in a file of their own (headFile), so that a
// newest segment that goes missing, or one cut short, is seen too.
//
// A cut in the newest segment that takes only records of the last second
// leaves the same bytes as a crash's torn write: those are lost without a
// word. Everything else is seen.
//
// A remote-write body that decodes is logged cut down to the series ingest
// reads (recRemoteWriteCut), snappy-compressed: about a fifth of a
// dcgm-exporter scrape's bytes (benchingest's 10,000-GPU fleet: 1.7 MB a
// scrape against 8.0 MB sent), so a fifth to write and sync, and to decode
// again in replay. It decodes as the whole body did; the series cut are
// only counted, and the count is logged with it. A body that does not
// decode is logged whole (recRemoteWrite, as every body was before), so
// that replay answers it the same way, and logs written before the cut
// replay as they were.

// recordKind says what a log record holds.
type recordKind uint8

const (
	recRemoteWrite recordKind = iota + 1
	recExposition
	recTick
	recStart
	recSettle
	recRemoteWriteCut
	// recSkip says that a batch failed to be written: its own number and
	// auxMs, the first of the batch's, are the numbers the batch took. It
	// is never applied.
	recSkip
	maxRecordKind = recSkip
)

// record is one entry of the log.
type record struct {
	kind   recordKind
	seq    uint64
	nowMs  int64
	auxMs  int64 // for recRemoteWriteCut, the series cut
	sender string
	body   []byte
	// decoded is a remote-write body decoded by the request's own
	// goroutine before it was logged, so that requests decode in parallel
	// and the committer only hands their samples on in order; nil in
	// replay, which decodes the logged body the same way
	// (DecodeRemoteWrite is a function of the body alone, and of a cut
	// body as of the whole one). Not written to the log.
	decoded *RemoteWrite
}

const recordHeader = 8                // length and CRC
const recordFixed = 1 + 8 + 8 + 8 + 2 // kind, seq, now, aux, sender length

// maxRecordBytes bounds a record read back: a length past it is corruption.
const maxRecordBytes = 256 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (r *record) appendTo(dst []byte) []byte {
	n := recordFixed + len(r.sender) + len(r.body)
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, byte(r.kind))
	dst = binary.LittleEndian.AppendUint64(dst, r.seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.nowMs))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.auxMs))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.sender)))
	dst = append(dst, r.sender...)
	dst = append(dst, r.body...)
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+recordHeader:], crcTable))
	return dst
}

// parseRecord reads the record at the start of b: the record and its
// length on disk; ok is false when b does not start with a whole record
// that passes its checksum. The record's body is its own copy.
func parseRecord(b []byte) (rec record, size int, ok bool) {
	if len(b) < recordHeader {
		return record{}, 0, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n < recordFixed || n > maxRecordBytes || uint64(len(b)-recordHeader) < uint64(n) {
		return record{}, 0, false
	}
	payload := b[recordHeader : recordHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return record{}, 0, false
	}
	sl := int(binary.LittleEndian.Uint16(payload[25:]))
	if recordFixed+sl > int(n) {
		return record{}, 0, false
	}
	rec = record{kind: recordKind(payload[0]), seq: binary.LittleEndian.Uint64(payload[1:]),
		nowMs: int64(binary.LittleEndian.Uint64(payload[9:])), auxMs: int64(binary.LittleEndian.Uint64(payload[17:])),
		sender: string(payload[recordFixed : recordFixed+sl]), body: slices.Clone(payload[recordFixed+sl:])}
	return rec, recordHeader + int(n), true
}

// resync returns the offset of the first intact record in b at or after
// from whose sequence number is in (lo, hi], len(b) when there is none. A
// header is checked for a plausible length, kind and number before its
// checksum is computed, so that the scan computes few.
func resync(b []byte, from int, lo, hi uint64) int {
	for p := from; p+recordHeader+recordFixed <= len(b); p++ {
		n := binary.LittleEndian.Uint32(b[p:])
		if n < recordFixed || n > maxRecordBytes || uint64(len(b)-p-recordHeader) < uint64(n) {
			continue
		}
		if k := recordKind(b[p+recordHeader]); k < recRemoteWrite || k > maxRecordKind {
			continue
		}
		if seq := binary.LittleEndian.Uint64(b[p+recordHeader+1:]); seq <= lo || seq > hi {
			continue
		}
		if _, _, ok := parseRecord(b[p:]); ok {
			return p
		}
	}
	return len(b)
}

// resyncSpan bounds how far past the last record read a number found by
// resync may be: more than a segment holds.
const resyncSpan = 1 << 24

// logLoss is a run of acknowledged records replay could not read.
type logLoss struct {
	// Segment is where they were: the damaged segment; with Missing, the
	// segment read before them (or, when none was, the name the first
	// would have).
	Segment string
	// Missing is set when no bytes of them are there: a segment missing,
	// or one cut at a record's end. Next is the segment read after them
	// ("" at the log's end).
	Missing bool
	Next    string
	// From and To are their sequence numbers, inclusive; To is 0 when
	// how many is not known (the newest segment is missing).
	From, To uint64
	// DamagedBytes is how many bytes of Segment replay passed over.
	DamagedBytes int
	// AfterMs and BeforeMs are the server's clock of the records read
	// just before and just after them; 0 where there is none.
	AfterMs, BeforeMs int64
}

// Records is how many records were lost; 0 when not known.
func (l logLoss) Records() uint64 {
	if l.To == 0 {
		return 0
	}
	return l.To - l.From + 1
}

// replayReport is what replay read, and what it found wrong.
type replayReport struct {
	// Last is the last sequence number read.
	Last uint64
	// Torn counts segments ending in a write a crash tore (nothing
	// acknowledged in it).
	Torn int
	// Losses are the runs of acknowledged records lost, in log order.
	Losses []logLoss
}

// replayLog calls apply for every record of the log in dir with a sequence
// number after from, in order, and lost (when set) for every run of
// acknowledged records it could not read, where it was found (between the
// records around it).
func replayLog(dir string, from uint64, log *slog.Logger, apply func(record), lost func(logLoss)) (replayReport, error) {
	var rep replayReport
	segs, err := listSegments(dir)
	if err != nil {
		return rep, err
	}
	head, durable, err := readHead(dir)
	if err != nil {
		log.Error("the log's head file is unreadable; a newest segment missing or cut short cannot be told", "dir", dir, "err", err)
	}
	r := replayer{from: from, expected: from + 1, log: log, apply: apply, lost: lost, rep: &rep}
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].n <= from+1 {
			continue // every record of it is in the snapshot
		}
		data, err := os.ReadFile(s.path)
		if err != nil {
			return rep, fmt.Errorf("read log segment: %w", err)
		}
		r.segment(s, data)
	}
	// Records made durable after the last one read: the log's end is
	// damaged, cut or missing.
	headMissing := head != 0 && !slices.ContainsFunc(segs, func(s numbered) bool { return s.n == head })
	switch l := (logLoss{From: r.expected, AfterMs: r.prevMs}); {
	case durable >= r.expected && r.damaged != "":
		l.To, l.Segment, l.DamagedBytes = durable, r.damaged, r.damagedBytes
		r.damaged, r.damagedBytes = "", 0
		r.loss(l)
	case headMissing:
		l.Segment, l.Missing = filepath.Join(dir, segmentName(head)), true
		if durable >= r.expected {
			l.To = durable
		}
		r.loss(l)
	case durable >= r.expected:
		l.To, l.Segment, l.Missing = durable, r.prevSegment, true
		r.loss(l)
	}
	r.endTail()
	rep.Last = max(r.lastRead, from)
	return rep, nil
}

// replayer is replayLog's reading position.
type replayer struct {
	from, expected uint64 // the snapshot's number; the next one due
	lastRead       uint64 // the last number read (0: none yet)
	prevMs         int64  // the clock of the last record read after from
	// damaged is the segment and the bytes passed over since the last
	// intact record: a gap after it is theirs.
	damaged      string
	damagedBytes int
	prevSegment  string
	log          *slog.Logger
	apply        func(record)
	lost         func(logLoss)
	rep          *replayReport
}

// segment reads one segment's records.
func (r *replayer) segment(s numbered, data []byte) {
	for off := 0; off < len(data); {
		rec, n, ok := parseRecord(data[off:])
		if !ok {
			lo := r.lastRead
			if lo == 0 && s.n > resyncSpan {
				lo = s.n - resyncSpan
			}
			next := resync(data, off+1, lo, max(r.lastRead, s.n)+resyncSpan)
			if r.damaged != s.path {
				r.endTail()
				r.damaged, r.damagedBytes = s.path, 0
			}
			r.damagedBytes += next - off
			off = next
			continue
		}
		off += n
		r.record(s, rec)
	}
	r.prevSegment = s.path
}

// record takes one intact record.
func (r *replayer) record(s numbered, rec record) {
	if rec.seq <= r.lastRead {
		r.log.Warn("log record out of sequence; passed over", "segment", s.path, "seq", rec.seq, "after", r.lastRead)
		return
	}
	r.lastRead = rec.seq
	if rec.seq <= r.from {
		r.damaged, r.damagedBytes = "", 0
		return
	}
	first := rec.seq
	if rec.kind == recSkip {
		first = uint64(rec.auxMs) // numbers a failed write took
	}
	if first > r.expected {
		l := logLoss{From: r.expected, To: first - 1, AfterMs: r.prevMs, BeforeMs: rec.nowMs}
		switch {
		case r.damaged != "":
			l.Segment, l.DamagedBytes = r.damaged, r.damagedBytes
		case r.prevSegment != "":
			l.Segment, l.Missing, l.Next = r.prevSegment, true, s.path
		default:
			l.Segment, l.Missing, l.Next = filepath.Join(filepath.Dir(s.path), segmentName(r.expected)), true, s.path
		}
		r.loss(l)
	} else if r.damaged != "" {
		r.endTail()
	}
	r.damaged, r.damagedBytes = "", 0
	r.expected = rec.seq + 1
	r.prevMs = rec.nowMs
	if rec.kind != recSkip {
		r.apply(rec)
	}
}

// endTail ends damage that no lost record follows: a write a crash tore.
func (r *replayer) endTail() {
	if r.damaged == "" {
		return
	}
	r.rep.Torn++
	r.log.Warn("log segment ends in a torn write (a crash mid-write); nothing acknowledged is in it", "segment", r.damaged, "bytes", r.damagedBytes)
	r.damaged, r.damagedBytes = "", 0
}

// loss reports acknowledged records lost.
func (r *replayer) loss(l logLoss) {
	r.rep.Losses = append(r.rep.Losses, l)
	if r.lost != nil {
		r.lost(l)
	}
}

// headFile holds the number of the newest segment, the number of the last
// record made durable when it was written, and their CRC-32C. It is
// written when a segment is started and at most every headEvery after a
// write: a newest segment that goes missing, or is cut short, leaves no
// gap in the numbers for replay to see.
const headFile = "wal.head"

// headEvery is how often the head file is written after a write: the
// records of the last headEvery are what a cut in the newest segment can
// take unseen.
const headEvery = time.Second

// readHead returns the newest segment's number and the last durable
// record's number from dir's head file; zeros when there is none (a log
// of an older binary).
func readHead(dir string) (segment, durable uint64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, headFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if len(b) != 20 || crc32.Checksum(b[:16], crcTable) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, 0, fmt.Errorf("%s: %d bytes failing their checksum", headFile, len(b))
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), nil
}

// writeHead records segment as the newest and durable as the last record
// made durable.
func writeHead(dir string, segment, durable uint64) error {
	b := binary.LittleEndian.AppendUint64(nil, segment)
	b = binary.LittleEndian.AppendUint64(b, durable)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	err := writeAtomic(dir, headFile, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("write the log's head: %w", err)
	}
	return nil
}

// writeAtomic writes name in dir with write: to a temporary file, synced,
// renamed over name, and the directory synced, so that name is whole, old
// or new, whatever happens.
func writeAtomic(dir, name string, write func(*os.File) error) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// numbered is a file of the pipeline's directory named by a sequence
// number: a log segment (by its first record's) or a snapshot (by its
// last).
type numbered struct {
	n    uint64
	path string
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d.wal", first) }

// listNumbered returns the files of dir named prefix, a number, suffix, in
// the numbers' order.
func listNumbered(dir, prefix, suffix string) ([]numbered, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []numbered
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || e.IsDir() {
			continue
		}
		if rest, ok = strings.CutSuffix(rest, suffix); !ok {
			continue
		}
		n, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, numbered{n, filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(out, func(a, b numbered) int { return cmp.Compare(a.n, b.n) })
	return out, nil
}

// listSegments returns the log's segments, oldest first.
func listSegments(dir string) ([]numbered, error) { return listNumbered(dir, "", ".wal") }
