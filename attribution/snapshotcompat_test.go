package attribution

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// compatFeed sends the queue and endpoint samples of seconds [from, to):
// every kind of series whose state a snapshot keeps per key (the wait
// histogram's counters, the gauges, the pending-age buckets, the
// endpoints' counters and timelines).
func compatFeed(a *Attributor, from, to int) {
	for sec := from; sec < to; sec += 30 {
		ms := t0.UnixMilli() + int64(sec)*1000
		for i, le := range []float64{60, 600, math.Inf(1)} {
			// Counters that rise every scrape, across the snapshot too.
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueueAdmissionWait, Le: le, Series: "p0", Value: float64((i + 1) * sec / 30)})
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueuePendingAge, Le: le, Series: "p0", Value: float64((sec / 600) % 3)})
		}
		a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueuePendingWorkloads, Series: "active", Value: float64(sec % 7)})
		a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueuePendingGPUs, Value: float64(sec % 5)})
		for _, q := range endpointScrape(sec) {
			a.AddQueue(&q)
		}
		a.AddQueue(&QueueSample{TimeMs: ms, Namespace: "serve", Model: "llama", Metric: EndpointArrivals, Series: "gw", Value: float64(sec / 30)})
	}
}

// TestSnapshotOfEarlierVersionRestores: a snapshot written before the
// queue and endpoint state kept its values behind pointers (at commit
// 266c091; testdata/snapshot-266c091.gob, 1:10 into compatFeed) restores,
// and the run goes on to the rows a run straight through gives. A serve
// upgraded across that change resumes from its last snapshot.
// GPULEDGER_WRITE_SNAPSHOT=1 writes the file instead (run at the commit
// whose snapshot it is to keep).
func TestSnapshotOfEarlierVersionRestores(t *testing.T) {
	const snapAt = 4200
	path := filepath.Join("testdata", "snapshot-266c091.gob")
	if os.Getenv("GPULEDGER_WRITE_SNAPSHOT") == "1" {
		a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		compatFeed(a, 0, snapAt)
		b, err := a.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skipf("wrote %s", path)
	}
	whole, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	compatFeed(whole, 0, 3*3600)
	whole.Emit(t0.Add(3 * time.Hour).UnixMilli())

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restored, _, err := Restore(testModel(), Options{}, b)
	if err != nil {
		t.Fatalf("restore the snapshot of an earlier version: %v", err)
	}
	compatFeed(restored, snapAt, 3*3600)
	restored.Emit(t0.Add(3 * time.Hour).UnixMilli())
	wantQ, gotQ := whole.QueueRows(), restored.QueueRows()
	wantE, gotE := whole.EndpointRows(), restored.EndpointRows()
	if len(wantQ) != 3 || len(wantE) == 0 {
		t.Fatalf("straight run: %d queue rows, %d endpoint rows; want 3 and some", len(wantQ), len(wantE))
	}
	if diff := cmp.Diff(wantQ, gotQ); diff != "" {
		t.Errorf("queue rows (-straight +restored):\n%s", diff)
	}
	if diff := cmp.Diff(wantE, gotE); diff != "" {
		t.Errorf("endpoint rows (-straight +restored):\n%s", diff)
	}
}
