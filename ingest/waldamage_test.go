package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// logRecordAt is where a record lies in a segment.
type logRecordAt struct {
	seq        uint64
	seg        int // index in the segments
	start, end int
}

// writeTestLog writes n records through a committer whose segments hold
// about 2 KiB, its head file written every headEvery, and returns the
// segments and where each record lies.
func writeTestLog(t *testing.T, dir string, n int, headEvery time.Duration) ([]numbered, []logRecordAt) {
	t.Helper()
	c, err := newCommitter(dir, 1, 2<<10, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.headEvery = headEvery
	c.apply = func(batch []*walEntry) {
		for _, e := range batch {
			e.done <- walResult{}
		}
	}
	go c.run()
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range n {
		body := make([]byte, 20+rng.IntN(200))
		for k := range body {
			body[k] = byte(rng.IntN(256))
		}
		if r := <-c.enqueue(record{kind: recRemoteWriteCut, nowMs: int64(i+1) * 15_000, sender: "vmagent", body: body}).done; r.err != nil {
			t.Fatal(r.err)
		}
	}
	c.close()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var at []logRecordAt
	for i, s := range segs {
		data, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); {
			rec, size, ok := parseRecord(data[off:])
			if !ok {
				t.Fatalf("the log written is damaged at %s+%d", s.path, off)
			}
			at = append(at, logRecordAt{rec.seq, i, off, off + size})
			off += size
		}
	}
	if len(segs) < 6 || len(at) != n {
		t.Fatalf("%d segments, %d records: want several segments and all %d records", len(segs), len(at), n)
	}
	return segs, at
}

// copyDir copies the files of src into a new temporary folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestLogDamage is a property test of replay over damaged logs: a byte
// flipped, a segment cut short, or a segment deleted, at random points of
// a log of 300 records in about 30 segments, replayed from the start or
// from a snapshot's number. Every intact record after the snapshot is
// replayed, in order, and nothing else; the records damaged or gone are
// reported as lost, by number and segment. With the head file written
// only when a segment starts (headEvery a long time), the records of the
// newest segment are past what it says is durable: damage that takes only
// them leaves what a crash's torn write leaves, and is not reported (a
// newest segment deleted is, its count unknown). With the head written
// after every write, every loss is reported exactly.
func TestLogDamage(t *testing.T) {
	for _, every := range []time.Duration{time.Hour, 0} {
		t.Run(fmt.Sprintf("headEvery=%s", every), func(t *testing.T) { testLogDamage(t, every) })
	}
}

func testLogDamage(t *testing.T, headEvery time.Duration) {
	orig := t.TempDir()
	segs, at := writeTestLog(t, orig, 300, headEvery)
	quiet := slog.New(slog.DiscardHandler)
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"flip", "cut", "delete"}
	tried := map[string]int{}
	for trial := range 450 {
		kind := kinds[trial%len(kinds)]
		dir := copyDir(t, orig)
		si := rng.IntN(len(segs))
		path := filepath.Join(dir, filepath.Base(segs[si].path))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// damaged says whether a record's bytes were changed or removed.
		var damaged func(r logRecordAt) bool
		var where string
		switch kind {
		case "flip":
			off := rng.IntN(len(data))
			data[off] ^= byte(1 + rng.IntN(255))
			os.WriteFile(path, data, 0o644)
			damaged = func(r logRecordAt) bool { return r.seg == si && r.start <= off && off < r.end }
			where = fmt.Sprintf("byte %d of segment %d", off, si)
		case "cut":
			off := rng.IntN(len(data))
			os.Truncate(path, int64(off))
			damaged = func(r logRecordAt) bool { return r.seg == si && r.end > off }
			where = fmt.Sprintf("segment %d cut at %d", si, off)
		case "delete":
			os.Remove(path)
			damaged = func(r logRecordAt) bool { return r.seg == si }
			where = fmt.Sprintf("segment %d deleted", si)
		}
		var from uint64
		if trial%4 == 3 {
			from = uint64(1 + rng.IntN(len(at)-1)) // a snapshot's
		}
		var want, lost []uint64
		for _, r := range at {
			switch {
			case r.seq <= from:
			case damaged(r):
				lost = append(lost, r.seq)
			default:
				want = append(want, r.seq)
			}
		}
		var got []uint64
		rep, err := replayLog(dir, from, quiet, func(r record) { got = append(got, r.seq) }, nil)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s, from %d: replayed %v\nwant %v", where, from, got, want)
		}
		atEnd := len(lost) > 0 && (len(want) == 0 || lost[0] > want[len(want)-1])
		var reported []uint64
		unknown := 0
		for _, l := range rep.Losses {
			if l.To == 0 {
				unknown++
				continue
			}
			for s := l.From; s <= l.To; s++ {
				reported = append(reported, s)
			}
		}
		switch {
		case len(lost) == 0:
			if len(rep.Losses) != 0 {
				t.Fatalf("%s, from %d: nothing lost, %+v reported", where, from, rep.Losses)
			}
		case atEnd && headEvery > 0 && kind == "delete" && si == len(segs)-1:
			if unknown != 1 || len(reported) != 0 || !rep.Losses[0].Missing {
				t.Fatalf("%s (the newest): %+v; want one missing segment, its records not counted", where, rep.Losses)
			}
		case atEnd && headEvery > 0 && kind == "delete":
			// The later segments hold only records before the snapshot.
		case atEnd && headEvery > 0:
			if len(rep.Losses) != 0 {
				t.Fatalf("%s, from %d: the log's last records damaged read as a torn write; got %+v", where, from, rep.Losses)
			}
		default:
			if !slices.Equal(reported, lost) || unknown != 0 {
				t.Fatalf("%s, from %d: %+v reported lost, want records %v", where, from, rep.Losses, lost)
			}
			// The damaged segment is named, or for a gap the segments
			// around it (the missing one, at the log's end).
			l := rep.Losses[0]
			named := filepath.Base(l.Segment) == filepath.Base(path) && (kind == "flip" || kind == "cut")
			if kind == "delete" || l.Missing {
				named = l.Missing && (si == 0 || filepath.Base(l.Segment) == filepath.Base(segs[si-1].path) || kind == "cut" ||
					atEnd && filepath.Base(l.Segment) == filepath.Base(path))
			}
			if !named {
				t.Fatalf("%s: the loss names %s (missing %v, next %s)", where, l.Segment, l.Missing, l.Next)
			}
		}
		tried[kind+map[bool]string{true: " at the end", false: ""}[atEnd]]++
	}
	t.Logf("trials: %v", tried)
	for _, k := range kinds {
		if tried[k] < 40 {
			t.Errorf("only %d trials of %s with records lost mid-log", tried[k], k)
		}
	}
}

// TestPipelineRecoversDamagedLog: 40 acknowledged minutes of remote write,
// the process killed (-9), the newest log segment damaged, a restart, the
// rest of the hour. For a byte flipped a third into the segment, the
// segment cut in half, and the segment deleted: the hour holds every
// request whose record is intact (it equals the ledger of a run fed all
// the requests but the lost ones, bit for bit), it is flagged in the
// ledger with the records lost, and the loss is counted. (Before, replay
// stopped at a damaged record and passed over the rest of its segment,
// which held most of the hour: 30.27 billed instead of 55.04; a segment
// deleted was not even logged.)
func TestPipelineRecoversDamagedLog(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	// Each damages the newest segment and returns the bytes of it that it
	// changed or took away, [from, to).
	cases := []struct {
		name   string
		damage func(path string, size int) (from, to int)
	}{
		{"flip", func(path string, size int) (int, int) {
			data, _ := os.ReadFile(path)
			data[size/3] ^= 0x5a
			os.WriteFile(path, data, 0o644)
			return size / 3, size/3 + 1
		}},
		{"cut", func(path string, size int) (int, int) {
			os.Truncate(path, int64(size/2))
			return size / 2, size
		}},
		{"delete", func(path string, size int) (int, int) {
			os.Remove(path)
			return 0, size
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLive(t, m, openStore(t), t.TempDir(), simStart)
			l.opts.HeadEvery = -1 // the head after every write: a cut is seen
			l.pl.c.close()
			l.open()
			feed(l, scrapes[:160], nil) // 0:40
			l.pl.c.close()              // kill -9: nothing saved at exit
			segs, err := listSegments(l.dir)
			if err != nil {
				t.Fatal(err)
			}
			newest := segs[len(segs)-1].path
			data, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			from, to := tc.damage(newest, len(data))
			// The requests whose records the damage touched, by their
			// clock (a scrape's time and a second), read off the bytes as
			// they were.
			lostAt := map[int64]bool{}
			for off := 0; off < len(data); {
				rec, size, ok := parseRecord(data[off:])
				if !ok {
					t.Fatalf("the newest segment was damaged before the test damaged it, at %d", off)
				}
				if off < to && from < off+size {
					lostAt[rec.nowMs] = true
				}
				off += size
			}
			if len(lostAt) == 0 {
				t.Fatal("the damage lost no record: the test does not test damage")
			}
			t.Logf("%s: %d records of %d bytes lost", tc.name, len(lostAt), len(data))
			l.open()
			feedLive(l, scrapes[160:240], nil)

			var kept []simScrape
			for _, sc := range scrapes[:240] {
				if !lostAt[sc.at.Add(time.Second).UnixMilli()] {
					kept = append(kept, sc)
				}
			}
			ref := newLive(t, m, openStore(t), t.TempDir(), simStart)
			feedLive(ref, kept, nil)
			end := simStart.Add(time.Hour)
			want, wantWl := ledgertest.Dump(t, ref.store, simStart, end)
			got, gotWl := ledgertest.Dump(t, l.store, simStart, end)
			if len(want) == 0 {
				t.Fatal("reference ledger empty")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%d requests lost: the ledger differs from a run fed the others (-others +damaged):\n%s", len(lostAt), diff)
			}
			if diff := cmp.Diff(wantWl, gotWl); diff != "" {
				t.Errorf("workload rows differ (-others +damaged):\n%s", diff)
			}
			flags, err := l.store.HourFlags(context.Background(), m.Cluster, simStart, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(flags) != 1 || flags[0].Reason != ledger.FlagLogLoss || !flags[0].From.Equal(simStart) || !strings.Contains(flags[0].Detail, filepath.Base(newest)) {
				t.Errorf("flags %+v; want the hour flagged for records lost from %s", flags, filepath.Base(newest))
			}
			st := l.pl.Stats()
			var counted uint64
			for _, n := range st.WALCorruptRecords {
				counted += n
			}
			if counted < uint64(len(lostAt)) || (tc.name == "delete") != (st.WALMissingSegments == 1) {
				t.Errorf("counted %d records lost (%v), %d segments missing; want at least the %d requests lost", counted, st.WALCorruptRecords, st.WALMissingSegments, len(lostAt))
			}
		})
	}
}

// FuzzLogSegment: replay of any bytes as a log segment (and a head file)
// never panics, gives records in increasing order once each, and reports
// losses with their numbers in order.
func FuzzLogSegment(f *testing.F) {
	var b []byte
	for i := uint64(1); i <= 5; i++ {
		b = (&record{kind: recRemoteWriteCut, seq: i, nowMs: int64(i) * 1000, sender: "v", body: []byte{byte(i), 2, 3}}).appendTo(b)
	}
	f.Add(b, []byte{})
	damaged := slices.Clone(b)
	damaged[len(b)/2] ^= 0xff
	f.Add(damaged, []byte{})
	f.Add(b[:len(b)-7], binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1), 5), 0))
	f.Fuzz(func(t *testing.T, seg, head []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(head) > 0 {
			if err := os.WriteFile(filepath.Join(dir, headFile), head, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var last uint64
		rep, err := replayLog(dir, 0, slog.New(slog.DiscardHandler), func(r record) {
			if r.seq <= last {
				t.Fatalf("record %d after %d", r.seq, last)
			}
			last = r.seq
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range rep.Losses {
			if l.To != 0 && l.To < l.From {
				t.Fatalf("loss %d: %d-%d", i, l.From, l.To)
			}
		}
	})
}
