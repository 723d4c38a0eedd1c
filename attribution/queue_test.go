package attribution

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestQueueRows: two hours of one ClusterQueue's Kueue and controller
// series, scraped every 30 s, become two queue rows: the gauges' means,
// the wait histogram's increase per hour (across a counter reset), and the
// pending ages at each hour's last scrape.
func TestQueueRows(t *testing.T) {
	a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	inf := math.Inf(1)
	bounds := []float64{1280, 2560, inf}
	// Cumulative wait counts at each scrape: two admissions in the first
	// hour (one waited ≤1280 s, one ≤2560 s), then Kueue restarts at
	// 1:30 and admits one that waited longer than 2560 s.
	waits := func(sec int) []float64 {
		switch {
		case sec < 600:
			return []float64{5, 7, 7}
		case sec < 3600:
			return []float64{6, 9, 9}
		case sec < 5400:
			return []float64{6, 9, 9}
		default:
			return []float64{0, 0, 1}
		}
	}
	for sec := 0; sec < 2*3600; sec += 30 {
		ms := t0.UnixMilli() + int64(sec)*1000
		pending := 2.0
		if sec >= 3600 {
			pending = 4
		}
		a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq-research", Metric: QueuePendingWorkloads, Series: "active,", Value: pending})
		a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq-research", Metric: QueuePendingWorkloads, Series: "inadmissible,", Value: 1})
		a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq-research", Metric: QueuePendingGPUs, Value: 8 * (pending + 1)})
		for i, b := range bounds {
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq-research", Metric: QueueAdmissionWait, Le: b, Series: ",high", Value: waits(sec)[i]})
			// The pending ages: at the end of the first hour one of the
			// three waited over 1280 s; in the second, all of them.
			age := []float64{2, 3, 3}[i]
			if sec >= 3600 {
				age = []float64{0, 0, 5}[i]
			}
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq-research", Metric: QueuePendingAge, Le: b, Value: age})
		}
	}
	a.Emit(t0.Add(2 * time.Hour).UnixMilli())
	got := a.QueueRows()
	want := []ledger.QueueRow{
		{Hour: t0, Cluster: "c1", ClusterQueue: "cq-research", PendingWorkloads: 3, PendingGPUs: 24, Admitted: 2,
			AdmittedWait: ledger.Histogram{Bounds: bounds, Counts: []float64{1, 2, 2}},
			PendingWait:  ledger.Histogram{Bounds: bounds, Counts: []float64{2, 3, 3}}},
		{Hour: t0.Add(time.Hour), Cluster: "c1", ClusterQueue: "cq-research", PendingWorkloads: 5, PendingGPUs: 40, Admitted: 1,
			AdmittedWait: ledger.Histogram{Bounds: bounds, Counts: []float64{0, 0, 1}},
			PendingWait:  ledger.Histogram{Bounds: bounds, Counts: []float64{0, 0, 5}}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("queue rows (-want +got):\n%s", diff)
	}
	if a.Stats().CounterResets != 3 {
		t.Errorf("counter resets: %d, want 3 (one per bucket)", a.Stats().CounterResets)
	}
	if got := a.QueueRows(); len(got) != 0 {
		t.Errorf("queue rows taken twice: %+v", got)
	}
	// A sample for an emitted hour is late; bad values are refused.
	late := a.Stats().Rejected[ReasonLate]
	a.AddQueue(&QueueSample{TimeMs: t0.UnixMilli(), ClusterQueue: "cq-research", Metric: QueuePendingWorkloads, Value: 1})
	if a.Stats().Rejected[ReasonLate] != late+1 {
		t.Error("a queue sample for an emitted hour was not counted late")
	}
	bad := a.Stats().Rejected[ReasonBadValue]
	for _, q := range []QueueSample{
		{TimeMs: t0.Add(3 * time.Hour).UnixMilli(), ClusterQueue: "cq-research", Metric: QueuePendingWorkloads, Value: math.NaN()},
		{TimeMs: t0.Add(3 * time.Hour).UnixMilli(), ClusterQueue: "", Metric: QueuePendingWorkloads, Value: 1},
		{TimeMs: t0.Add(3 * time.Hour).UnixMilli(), ClusterQueue: "cq-research", Metric: QueuePendingGPUs, Value: -1},
	} {
		a.AddQueue(&q)
	}
	if n := a.Stats().Rejected[ReasonBadValue] - bad; n != 3 {
		t.Errorf("%d bad queue samples refused, want 3", n)
	}
}

// TestQueueSnapshot: an Attributor restored from a snapshot taken mid-hour
// (open queue hours, counters' last values) emits the rows an
// uninterrupted one does.
func TestQueueSnapshot(t *testing.T) {
	feed := func(a *Attributor, from, to int) {
		for sec := from; sec < to; sec += 60 {
			ms := t0.UnixMilli() + int64(sec)*1000
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueueAdmissionWait, Le: math.Inf(1), Value: float64(sec / 600)})
			a.AddQueue(&QueueSample{TimeMs: ms, ClusterQueue: "cq", Metric: QueuePendingWorkloads, Value: float64(sec % 7)})
		}
	}
	whole, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	feed(whole, 0, 7200)
	whole.Emit(t0.Add(2 * time.Hour).UnixMilli())

	first, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	feed(first, 0, 2400)
	snap, err := first.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := Restore(testModel(), Options{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	feed(second, 2400, 7200)
	second.Emit(t0.Add(2 * time.Hour).UnixMilli())
	want, got := whole.QueueRows(), second.QueueRows()
	if len(want) != 2 || want[0].Admitted != 5 {
		t.Fatalf("uninterrupted run: %+v; want two hours, 5 admitted in the first", want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored run (-uninterrupted +restored):\n%s", diff)
	}
}

// TestQueueSampleStringsAreCopied: a sample's strings alias the parse
// buffer, which the next body overwrites; the hours keep their own.
func TestQueueSampleStringsAreCopied(t *testing.T) {
	a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("cq-a,status")
	q := QueueSample{TimeMs: t0.UnixMilli(), ClusterQueue: unsafe.String(&buf[0], 4), Series: unsafe.String(&buf[5], 6),
		Metric: QueuePendingAge, Le: 60, Value: 2}
	a.AddQueue(&q)
	copy(buf, "xxxxxxxxxxx")
	a.Emit(t0.Add(time.Hour).UnixMilli())
	rows := a.QueueRows()
	if len(rows) != 1 || rows[0].ClusterQueue != "cq-a" || rows[0].PendingWait.Total() != 2 {
		t.Errorf("rows after the buffer was overwritten: %+v", rows)
	}
}
