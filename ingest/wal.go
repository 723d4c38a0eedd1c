package ingest

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// body. Reading stops at the first record that is short or fails its
// checksum: a write torn by a crash, never acknowledged.
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

// errTorn is a record cut short or failing its checksum.
var errTorn = errors.New("torn or corrupt record")

// readRecord reads the next record; io.EOF at a clean end, errTorn at a
// torn one.
func readRecord(r *bufio.Reader, buf []byte) (record, []byte, error) {
	var hdr [recordHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return record{}, buf, io.EOF
		}
		return record{}, buf, errTorn
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n < recordFixed || n > maxRecordBytes {
		return record{}, buf, errTorn
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return record{}, buf, errTorn
	}
	if crc32.Checksum(buf, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
		return record{}, buf, errTorn
	}
	rec := record{kind: recordKind(buf[0]), seq: binary.LittleEndian.Uint64(buf[1:]),
		nowMs: int64(binary.LittleEndian.Uint64(buf[9:])), auxMs: int64(binary.LittleEndian.Uint64(buf[17:]))}
	sl := int(binary.LittleEndian.Uint16(buf[25:]))
	if recordFixed+sl > int(n) {
		return record{}, buf, errTorn
	}
	rec.sender = string(buf[recordFixed : recordFixed+sl])
	rec.body = slices.Clone(buf[recordFixed+sl:])
	return rec, buf, nil
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

// replayLog calls apply for every record of the log in dir with a sequence
// number after from, in order. A torn record ends its segment (logged and
// counted in torn); the next segment is read on. It returns the last
// sequence number read.
func replayLog(dir string, from uint64, log *slog.Logger, apply func(record)) (last uint64, torn int, err error) {
	segs, err := listSegments(dir)
	if err != nil {
		return 0, 0, err
	}
	last = from
	var buf []byte
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].n <= from+1 {
			continue // every record of it is in the snapshot
		}
		f, err := os.Open(s.path)
		if err != nil {
			return last, torn, fmt.Errorf("open log segment: %w", err)
		}
		r := bufio.NewReaderSize(f, 1<<20)
		for {
			var rec record
			rec, buf, err = readRecord(r, buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				torn++
				log.Warn("log segment ends in a torn record; what follows in it was never acknowledged", "segment", s.path)
				break
			}
			if rec.seq <= from {
				continue
			}
			last = max(last, rec.seq)
			apply(rec)
		}
		f.Close()
	}
	return last, torn, nil
}

// walEntry is a record waiting to be made durable and applied.
type walEntry struct {
	rec  record
	done chan walResult // buffered: the committer never blocks on it
}

type walResult struct {
	res Result
	err error
}

// committer owns the log's current segment. Records queued with enqueue
// are written in batches by one goroutine (run), made durable with one
// fsync per batch, then handed in sequence order to another (applyLoop),
// which applies and only then answers them: what is applied is durable,
// and what is answered is applied. The two overlap: one batch is applied
// while the next is written and synced, so that neither the disk's wait
// nor applying holds up the other. Without a directory nothing is written
// and records are applied as they come.
type committer struct {
	dir   string
	log   *slog.Logger
	apply func(entries []*walEntry)
	// afterBatch runs on the applying goroutine after each batch applied:
	// the pipeline's snapshots, which must not interleave with applying.
	afterBatch func()

	mu      sync.Mutex
	queue   []*walEntry
	nextSeq uint64
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	// durable carries each batch made durable from run to applyLoop. It
	// is unbuffered: run syncs one batch while the one before is applied,
	// and no further ahead, so that what waits for applying stays small.
	durable chan []*walEntry

	// fileMu guards the segment: held by run while it writes and syncs a
	// batch, and by rotate and truncate (the snapshots, on the applying
	// goroutine).
	fileMu      sync.Mutex
	f           *os.File
	size        int64
	segments    []numbered
	segmentSize int64
	buf         []byte
	// syncErr is the last write's error, nil once a write succeeds again.
	syncErr error
	errMu   sync.Mutex
	// fault, when set (tests), is asked before each write; an error makes
	// the write fail after half the batch reached the file, as a disk
	// that fills mid-write does.
	fault func() error
}

// errClosed answers records queued after Close.
var errClosed = errors.New("the pipeline is shutting down; retry against the restarted server")

func newCommitter(dir string, nextSeq uint64, segmentSize int64, log *slog.Logger) (*committer, error) {
	c := &committer{dir: dir, log: log, nextSeq: nextSeq, segmentSize: segmentSize,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), durable: make(chan []*walEntry)}
	if dir == "" {
		return c, nil
	}
	var err error
	if c.segments, err = listSegments(dir); err != nil {
		return nil, err
	}
	if err := c.openSegment(); err != nil {
		return nil, err
	}
	return c, nil
}

// openSegment starts a new segment, named by the next sequence number to
// be given: every record written before it has a smaller one (those queued
// and not yet written come into it). When no record was numbered since the
// last segment began (a snapshot's rotation right after one for size, a
// restart after a segment whose records were all queued before it began),
// that is the last segment's name, and reusing it would empty a segment of
// written records: the name is then past it. Called with fileMu held, or
// before run starts.
func (c *committer) openSegment() error {
	c.mu.Lock()
	next := c.nextSeq
	c.mu.Unlock()
	if k := len(c.segments); k > 0 && c.segments[k-1].n >= next {
		next = c.segments[k-1].n + 1
	}
	s := numbered{next, filepath.Join(c.dir, segmentName(next))}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create log segment: %w", err)
	}
	if err := syncDir(c.dir); err != nil {
		f.Close()
		return err
	}
	if c.f != nil {
		c.f.Close()
	}
	c.f, c.size = f, 0
	c.segments = append(c.segments, s)
	return nil
}

// enqueue queues a record, numbering it; its result comes on the entry's
// done channel.
func (c *committer) enqueue(rec record) *walEntry {
	e := &walEntry{rec: rec, done: make(chan walResult, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		e.done <- walResult{err: errClosed}
		return e
	}
	e.rec.seq = c.nextSeq
	c.nextSeq++
	c.queue = append(c.queue, e)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return e
}

// failing returns the last write's error, nil when the log is healthy.
func (c *committer) failing() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.syncErr
}

// run commits batches until close, then drains the queue; the durable
// ones go to applyLoop, in order.
func (c *committer) run() {
	applied := make(chan struct{})
	go c.applyLoop(applied)
	defer func() {
		close(c.durable)
		<-applied
		close(c.stopped)
	}()
	for {
		<-c.wake
		for {
			c.mu.Lock()
			batch, closed := c.queue, c.closed
			c.queue = nil
			c.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			if c.commit(batch) {
				c.durable <- batch
			}
		}
	}
}

// applyLoop applies and answers the durable batches in order, each
// followed by afterBatch, until run closes durable.
func (c *committer) applyLoop(done chan<- struct{}) {
	defer close(done)
	for batch := range c.durable {
		c.apply(batch)
		if c.afterBatch != nil {
			c.afterBatch()
		}
	}
}

// commit writes and syncs a batch, and says whether it is durable; on a
// write error it answers the batch with the error and cuts the segment
// back to where the batch began.
func (c *committer) commit(batch []*walEntry) bool {
	if c.dir == "" {
		return true
	}
	c.buf = c.buf[:0]
	for _, e := range batch {
		c.buf = e.rec.appendTo(c.buf)
	}
	c.fileMu.Lock()
	err := c.write()
	c.fileMu.Unlock()
	c.errMu.Lock()
	c.syncErr = err
	c.errMu.Unlock()
	if err != nil {
		for _, e := range batch {
			e.done <- walResult{err: err}
		}
		return false
	}
	return true
}

func (c *committer) write() error {
	start := c.size
	var n int
	var err error
	if c.fault != nil {
		if err = c.fault(); err != nil {
			c.f.Write(c.buf[:len(c.buf)/2])
		}
	}
	if err == nil {
		n, err = c.f.Write(c.buf)
	}
	if err == nil {
		err = syncData(c.f)
	}
	if err == nil {
		c.size += int64(n)
		if c.size >= c.segmentSize {
			if err := c.openSegment(); err != nil {
				c.log.Error("start a new log segment", "err", err)
			}
		}
		return nil
	}
	// Nothing of the batch was acknowledged: take it out of the segment so
	// that what comes next does not follow a torn record. If the file
	// cannot be cut, go on in a new segment: replay stops at the torn
	// record and reads the next segment.
	if terr := c.f.Truncate(start); terr != nil || c.f.Sync() != nil {
		if oerr := c.openSegment(); oerr != nil {
			c.log.Error("start a new log segment after a failed write", "err", oerr)
		}
	} else if _, serr := c.f.Seek(start, io.SeekStart); serr != nil {
		c.log.Error("rewind the log segment after a failed write", "err", serr)
	}
	return fmt.Errorf("write-ahead log: %w; retry later", err)
}

// rotate starts a new segment, so that the older ones can be deleted once
// a snapshot holds them. Called between batches applied (snapshots); it
// waits for a write in progress.
func (c *committer) rotate() error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	if c.dir == "" || c.size == 0 {
		return nil
	}
	return c.openSegment()
}

// truncate deletes the segments every record of which has a sequence
// number at most upto: the snapshot holds them. The current segment stays.
// Records written and not yet applied are past any snapshot, so their
// segments stay. Called between batches applied (snapshots).
func (c *committer) truncate(upto uint64) {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	keep := c.segments[:0]
	for i, s := range c.segments {
		last := len(c.segments) - 1
		if i < last && c.segments[i+1].n <= upto+1 {
			if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
				c.log.Warn("remove a log segment the snapshot holds", "segment", s.path, "err", err)
				keep = append(keep, s)
			}
			continue
		}
		keep = append(keep, s)
	}
	c.segments = keep
}

// close stops taking records, commits what is queued, and waits.
func (c *committer) close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	<-c.stopped
	if c.f != nil {
		c.f.Close()
	}
}

// syncDir makes a directory's entries (a new or renamed file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
