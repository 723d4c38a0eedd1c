package ingest

// The log's writer: records queued, written and fsynced in batches by one
// goroutine, applied in order once durable; segments rotated and removed
// once a snapshot covers them.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

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

	// synced carries each batch made durable from run to applyLoop. It
	// is unbuffered: run syncs one batch while the one before is applied,
	// and no further ahead, so that what waits for applying stays small.
	synced chan []*walEntry

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
	// skipFrom and skipTo are the numbers of the batches that failed to
	// be written since the last that was (skipFrom 0: none): the next
	// write begins with a recSkip of them, so that replay sees no gap.
	skipFrom, skipTo uint64
	// durable is the number of the last record made durable; headAt when
	// the head file was last written; headEvery how often it is, after a
	// write (tests set it to 0: after every write).
	durable   uint64
	headAt    time.Time
	headEvery time.Duration
}

// errClosed answers records queued after Close.
var errClosed = errors.New("the pipeline is shutting down; retry against the restarted server")

func newCommitter(dir string, nextSeq uint64, segmentSize int64, log *slog.Logger) (*committer, error) {
	c := &committer{dir: dir, log: log, nextSeq: nextSeq, segmentSize: segmentSize, headEvery: headEvery, durable: nextSeq - 1,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), synced: make(chan []*walEntry)}
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
	if err := writeHead(c.dir, s.n, c.durable); err != nil {
		f.Close()
		return err
	}
	c.headAt = time.Now()
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
		close(c.synced)
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
				c.synced <- batch
			}
		}
	}
}

// applyLoop applies and answers the durable batches in order, each
// followed by afterBatch, until run closes synced.
func (c *committer) applyLoop(done chan<- struct{}) {
	defer close(done)
	for batch := range c.synced {
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
	if c.skipFrom != 0 {
		skip := record{kind: recSkip, seq: c.skipTo, auxMs: int64(c.skipFrom), nowMs: batch[0].rec.nowMs}
		c.buf = skip.appendTo(c.buf)
	}
	for _, e := range batch {
		c.buf = e.rec.appendTo(c.buf)
	}
	c.fileMu.Lock()
	err := c.write(batch[len(batch)-1].rec.seq)
	c.fileMu.Unlock()
	c.errMu.Lock()
	c.syncErr = err
	c.errMu.Unlock()
	if err != nil {
		if c.skipFrom == 0 {
			c.skipFrom = batch[0].rec.seq
		}
		c.skipTo = batch[len(batch)-1].rec.seq
		for _, e := range batch {
			e.done <- walResult{err: err}
		}
		return false
	}
	c.skipFrom, c.skipTo = 0, 0
	return true
}

// write writes and syncs c.buf, the records up to last; called with
// fileMu held.
func (c *committer) write(last uint64) error {
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
		c.durable = last
		if c.size >= c.segmentSize {
			if err := c.openSegment(); err != nil {
				c.log.Error("start a new log segment", "err", err)
			}
		} else if time.Since(c.headAt) >= c.headEvery {
			if err := writeHead(c.dir, c.segments[len(c.segments)-1].n, last); err != nil {
				c.log.Error("record the log's head; a newest segment cut short would go unseen until it is", "err", err)
			}
			c.headAt = time.Now()
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
