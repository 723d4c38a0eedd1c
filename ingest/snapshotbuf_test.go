package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
)

// bufferedLive is a pipeline holding 20 minutes of scrapes in its reorder
// window (a catch-up after an outage), with no log.
func bufferedLive(t *testing.T) (*live, *attribution.Model) {
	t.Helper()
	m, scrapes := simScrapes(t, 1)
	l := &live{t: t, model: m, store: openStore(t), clock: &clock{t: simStart}}
	l.opts = PipelineOptions{Now: l.clock.Now, ReorderWindow: 25 * time.Minute, SettleAfter: 31 * time.Minute, CatchUpWindow: -1}
	l.open()
	for _, sc := range scrapes[:80] {
		l.write(sc)
	}
	if n := l.pl.st.buffered(); n < 10_000 {
		t.Fatalf("%d items buffered: the test does not test a full buffer", n)
	}
	return l, m
}

// TestSnapshotBufferRoundTrip: a snapshot of a full reorder buffer reads
// back to the same items, in the order they will be taken out, with their
// labels, and costs what they cost; it is a few bytes an item.
func TestSnapshotBufferRoundTrip(t *testing.T) {
	l, m := bufferedLive(t)
	dir := t.TempDir()
	st := &l.pl.st
	hdr, err := st.encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSnapshot(dir, hdr, st); err != nil {
		t.Fatal(err)
	}
	s, err := loadSnapshot(dir, slog.New(slog.DiscardHandler))
	if err != nil || s == nil {
		t.Fatalf("load: %v", err)
	}
	var back state
	if err := back.restore(s, m, attribution.Options{}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{
		"samples": {each(st.samples.all(), (*heldSample).sample), each(back.samples.all(), (*heldSample).sample)},
		"pods":    {each(st.pods.all(), (*heldPod).pod), each(back.pods.all(), (*heldPod).pod)},
		"queues":  {each(st.queues.all(), (*heldQueue).queue), each(back.queues.all(), (*heldQueue).queue)},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differ after the round trip", name)
		}
	}
	if back.bufferBytes() <= 0 || back.buffered() != st.buffered() {
		t.Errorf("restored: %d items, %d bytes; want %d items", back.buffered(), back.bufferBytes(), st.buffered())
	}
	fi, err := os.Stat(filepath.Join(dir, snapshotName(hdr.Seq)))
	if err != nil {
		t.Fatal(err)
	}
	perItem := float64(fi.Size()) / float64(st.buffered())
	t.Logf("%d items, %d bytes of snapshot: %.1f bytes an item", st.buffered(), fi.Size(), perItem)
	if perItem > 40 {
		t.Errorf("%.1f bytes an item in the snapshot; the buffer's labels are written once each, the items in about 20 bytes", perItem)
	}
}

// TestSnapshotVersion1: a snapshot of an older binary, the buffer in its
// header, still restores.
func TestSnapshotVersion1(t *testing.T) {
	l, m := bufferedLive(t)
	st := &l.pl.st
	hdr, err := st.encode()
	if err != nil {
		t.Fatal(err)
	}
	hdr.Version = 1
	hdr.Samples, hdr.Pods, hdr.Queues = each(st.samples.all(), (*heldSample).sample), each(st.pods.all(), (*heldPod).pod), each(st.queues.all(), (*heldQueue).queue)
	var b bytes.Buffer
	b.Write(make([]byte, 4))
	if err := gob.NewEncoder(&b).Encode(hdr); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	binary.LittleEndian.PutUint32(data, crc32.Checksum(data[4:], crcTable))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, snapshotName(hdr.Seq)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadSnapshot(dir, slog.New(slog.DiscardHandler))
	if err != nil || s == nil {
		t.Fatalf("load: %v", err)
	}
	var back state
	if err := back.restore(s, m, attribution.Options{}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(each(st.samples.all(), (*heldSample).sample), each(back.samples.all(), (*heldSample).sample)) || back.buffered() != st.buffered() {
		t.Errorf("a version 1 snapshot: %d items back, want %d", back.buffered(), st.buffered())
	}
}
