package ingest

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCommitterAppliesWhatIsDurable: records from 8 goroutines while the
// disk fails one write in three and snapshots start new segments between
// batches (as the pipeline's do): every record is either answered with the
// disk's error and never applied, or applied once, in sequence order; and
// the log, read back, holds exactly the applied ones.
func TestCommitterAppliesWhatIsDurable(t *testing.T) {
	dir := t.TempDir()
	c, err := newCommitter(dir, 1, 4<<10, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	c.fault = func() error {
		if writes.Add(1)%3 == 0 {
			return syscall.ENOSPC
		}
		return nil
	}
	var applied []uint64 // only the applying goroutine appends
	c.apply = func(batch []*walEntry) {
		for _, e := range batch {
			applied = append(applied, e.rec.seq)
			e.done <- walResult{}
		}
	}
	batches := 0
	c.afterBatch = func() {
		if batches++; batches%5 == 0 {
			if err := c.rotate(); err != nil {
				t.Error(err)
			}
		}
	}
	go c.run()

	var mu sync.Mutex
	ok, failed := map[uint64]bool{}, map[uint64]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				e := c.enqueue(record{kind: recTick, nowMs: int64(g*1000 + i), sender: fmt.Sprintf("sender-%d", g), body: make([]byte, 100+i)})
				r := <-e.done
				mu.Lock()
				if r.err != nil {
					failed[e.rec.seq] = true
				} else {
					ok[e.rec.seq] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.close()

	if len(failed) == 0 || len(ok) == 0 {
		t.Fatalf("%d records failed, %d taken: the test does not test a failing disk", len(failed), len(ok))
	}
	if !slices.IsSorted(applied) || len(slices.Compact(slices.Clone(applied))) != len(applied) {
		t.Errorf("applied out of sequence order or twice: %v", applied)
	}
	if len(applied) != len(ok) {
		t.Errorf("%d applied, %d answered as taken", len(applied), len(ok))
	}
	for _, seq := range applied {
		if failed[seq] {
			t.Errorf("record %d was answered with the disk's error, and applied", seq)
		}
	}
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Errorf("%d log segments: the test does not test rotation between batches", len(segs))
	}
	var logged []uint64
	rep, err := replayLog(dir, 0, slog.New(slog.DiscardHandler), func(r record) { logged = append(logged, r.seq) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged, applied) {
		t.Errorf("the log holds %d records, %d were applied:\nlogged  %v\napplied %v", len(logged), len(applied), logged, applied)
	}
	// The numbers the failed writes took are accounted for (recSkip):
	// replay sees no acknowledged record lost.
	if len(rep.Losses) != 0 {
		t.Errorf("replay reports %d losses after failed writes, none of them acknowledged: %+v", len(rep.Losses), rep.Losses)
	}
}

// TestCommitterSegmentNames: a segment started with no record numbered
// since the last one began (a snapshot's rotation right after one for
// size, a restart after a segment whose records were all queued before it
// began) gets a name of its own. Reusing the name emptied a segment of
// written records: lost after the next crash.
func TestCommitterSegmentNames(t *testing.T) {
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	c, err := newCommitter(dir, 1, 64, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c.apply = func(batch []*walEntry) {}
	var entries []*walEntry
	for i := range 3 {
		entries = append(entries, c.enqueue(record{kind: recTick, nowMs: int64(i), body: make([]byte, 100)}))
	}
	c.mu.Lock()
	c.queue = nil // committed here, not by run
	c.mu.Unlock()
	// The first record fills the segment: a new one begins after it, while
	// the other two are queued and numbered already.
	if !c.commit(entries[:1]) || !c.commit(entries[1:]) {
		t.Fatal("a write failed")
	}
	if err := c.rotate(); err != nil { // a snapshot's, before any new record
		t.Fatal(err)
	}
	logged := func() []uint64 {
		t.Helper()
		var seqs []uint64
		if _, err := replayLog(dir, 0, quiet, func(r record) { seqs = append(seqs, r.seq) }, nil); err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	want := []uint64{entries[0].rec.seq, entries[1].rec.seq, entries[2].rec.seq}
	if got := logged(); !slices.Equal(got, want) {
		t.Errorf("after a rotation for size and one for a snapshot: the log holds %v, want %v", got, want)
	}
	c.f.Close()

	// A restart numbers from the last record read; the last segment's name
	// is past it.
	c2, err := newCommitter(dir, want[2]+1, 64, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c2.f.Close()
	if got := logged(); !slices.Equal(got, want) {
		t.Errorf("after a restart: the log holds %v, want %v", got, want)
	}
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].n <= segs[i-1].n {
			t.Errorf("segments %v: names not increasing", segs)
		}
	}
}

// TestCommitterAppliesWhileNextSyncs: a batch is applied while the next is
// written and synced, not after. Applying the first record waits until the
// second one's write has begun; a committer that applies and writes on one
// goroutine never gets there.
func TestCommitterAppliesWhileNextSyncs(t *testing.T) {
	c, err := newCommitter(t.TempDir(), 1, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	applying, writing := make(chan struct{}), make(chan struct{})
	var writes atomic.Int64
	c.fault = func() error {
		if writes.Add(1) == 2 {
			close(writing)
		}
		return nil
	}
	var applied []uint64
	c.apply = func(batch []*walEntry) {
		for _, e := range batch {
			if e.rec.seq == 1 {
				close(applying)
				select {
				case <-writing:
				case <-time.After(10 * time.Second):
					t.Error("record 1 was still being applied 10 s after record 2 was queued, and record 2 was not written: applying holds up the log")
				}
			}
			applied = append(applied, e.rec.seq)
			e.done <- walResult{}
		}
	}
	go c.run()
	first := c.enqueue(record{kind: recTick, nowMs: 1})
	<-applying
	second := c.enqueue(record{kind: recTick, nowMs: 2})
	for _, e := range []*walEntry{first, second} {
		if r := <-e.done; r.err != nil {
			t.Fatal(r.err)
		}
	}
	c.close()
	if !slices.Equal(applied, []uint64{1, 2}) {
		t.Errorf("applied %v, want [1 2]", applied)
	}
}
