package attribution

import (
	"bytes"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/ledger"
)

// endpointScrape is what two vLLM pods of one endpoint report at sec, on
// the endpoint test's timeline: pod a serves one request per scrape from
// 0:00 to 0:09:30 and from 1:20 to 1:29:30 (its server restarts at 1:25,
// resetting its counters); pod b only generates a few tokens between the
// scrapes of 0:24:30 and 0:25 (no request is running at either).
func endpointScrape(sec int) []QueueSample {
	ms := t0.UnixMilli() + int64(sec)*1000
	busyA := sec < 600 || sec >= 4800 && sec < 5400
	running := 0.0
	if busyA {
		running = 1
	}
	// Pod a's counters: 100 tokens and one request per busy scrape so far.
	n := 0
	for s := 0; s <= sec; s += 30 {
		if s < 600 || s >= 4800 && s < 5400 {
			n++
		}
		if s == 5100 {
			n = 1 // restarted
		}
	}
	tokensB := 500.0
	if sec >= 1500 {
		tokensB = 550
	}
	s := func(pod string, m QueueMetric, series string, v float64) QueueSample {
		return QueueSample{TimeMs: ms, Namespace: "serve", Pod: pod, Model: "llama", Metric: m, Series: series, Value: v}
	}
	return []QueueSample{
		s("llama-a", EndpointRunning, "0,", running),
		s("llama-a", EndpointWaiting, "0,", 0),
		s("llama-a", EndpointTokens, "0,", float64(100*n)),
		s("llama-a", EndpointRequests, "0,stop", float64(n)),
		s("llama-b", EndpointRunning, "0,", 0),
		s("llama-b", EndpointWaiting, "0,", 0),
		s("llama-b", EndpointTokens, "0,", tokensB),
		s("llama-b", EndpointRequests, "0,stop", 7),
	}
}

// TestEndpointRows: three hours of an endpoint's vLLM series, scraped every
// 30 s, become three endpoint rows: the busy time, the idle gaps by the
// hour they ended in (930 s, from 0:09:30 to pod b's tokens at 0:25; then
// 3300 s to 1:20), the gap still open at each hour's end, the counters'
// increases across pod a's restart, and the pods' owner.
func TestEndpointRows(t *testing.T) {
	a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for sec := 0; sec < 3*3600; sec += 30 {
		buf := []byte("servellama-allama-b")
		a.AddPod(PodInfo{TimeMs: t0.UnixMilli() + int64(sec)*1000, Namespace: "serve", Pod: "llama-a", OwnerKind: "ReplicaSet", OwnerName: "llama-7d9f8b6c5"})
		for _, q := range endpointScrape(sec) {
			// The strings alias a buffer the next scrape overwrites, as
			// a parser's do.
			q.Namespace, q.Model, q.Pod = aliasIn(buf, q.Namespace), aliasIn(buf, q.Model), aliasIn(buf, q.Pod)
			a.AddQueue(&q)
		}
		copy(buf, bytes.Repeat([]byte{'x'}, len(buf)))
	}
	a.Emit(t0.Add(3 * time.Hour).UnixMilli())
	gaps := gapsOf
	row := func(h int, reported, busy, requests, tokens float64, g ledger.Gaps, idleSince time.Duration) ledger.EndpointRow {
		return ledger.EndpointRow{Hour: t0.Add(time.Duration(h) * time.Hour), Cluster: "c1", Namespace: "serve", Model: "llama",
			Kind: "ReplicaSet", Name: "llama-7d9f8b6c5", Pods: 2, ReportedSeconds: reported, BusySeconds: busy,
			Requests: requests, GenerationTokens: tokens, Gaps: g, IdleSince: t0.Add(idleSince)}
	}
	// The requests that came as each gap ended, within 30 s to 600 s:
	// pod b's tokens at 0:25 came with no request counted (one, the
	// least that ends a gap); pod a's from 1:20 are one a scrape, plus
	// the one running at its first scrape past the bound (none at 1:30,
	// past its last): the upper bound counts from 1:19:30.
	g0, g1 := gaps(930), gaps(3300)
	g0.AddWoken(ledger.Bucket(930), []float64{1, 1, 1, 1, 1}, 5)
	g1.AddWoken(ledger.Bucket(3300), []float64{1 + 1 + 1, 3 + 1, 5 + 1, 11 + 1, 20}, 5)
	want := []ledger.EndpointRow{
		row(0, 3600, 630, 19, 1950, g0, 25*time.Minute),
		row(1, 3600, 600, 20, 2000, g1, 89*time.Minute+30*time.Second),
		row(2, 3570, 0, 0, 0, ledger.Gaps{}, 89*time.Minute+30*time.Second),
	}
	if diff := cmp.Diff(want, a.EndpointRows()); diff != "" {
		t.Errorf("endpoint rows (-want +got):\n%s", diff)
	}
	if st := a.Stats(); st.CounterResets != 2 {
		t.Errorf("%d counter resets; want 2 (pod a's tokens and requests)", st.CounterResets)
	}
}

// aliasIn returns s as a string pointing into buf where buf holds it.
func aliasIn(buf []byte, s string) string {
	i := bytes.Index(buf, []byte(s))
	if i < 0 {
		return s
	}
	return unsafe.String(&buf[i], len(s))
}

// TestEndpointRowsSnapshot: a restart from a snapshot taken mid-stream
// gives the same endpoint rows as a run straight through; and an endpoint
// gone for 20 minutes (scaled to zero) has neither reported time nor a
// gap across its absence, but the idle stretch before it is a gap.
func TestEndpointRowsSnapshot(t *testing.T) {
	run := func(snapAt int, gone func(sec int) bool) []ledger.EndpointRow {
		a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		var rows []ledger.EndpointRow
		for sec := 0; sec < 3*3600; sec += 30 {
			if sec == snapAt {
				b, err := a.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, a.EndpointRows()...)
				if a, _, err = Restore(testModel(), Options{}, b); err != nil {
					t.Fatal(err)
				}
			}
			if gone(sec) {
				continue
			}
			for _, q := range endpointScrape(sec) {
				a.AddQueue(&q)
			}
		}
		a.Emit(t0.Add(3 * time.Hour).UnixMilli())
		return append(rows, a.EndpointRows()...)
	}
	never := func(int) bool { return false }
	if diff := cmp.Diff(run(-1, never), run(4200, never)); diff != "" {
		t.Errorf("restored at 1:10 (-straight +restored):\n%s", diff)
	}
	// Gone from 0:40 to 1:00, idle since 0:25 before it.
	got := run(-1, func(sec int) bool { return sec >= 2400 && sec < 3600 })
	g0 := gapsOf(930)
	g0.AddWoken(ledger.Bucket(930), []float64{1, 1, 1, 1, 1}, 5)
	if got[0].ReportedSeconds != 2370 || !cmp.Equal(got[0].Gaps, g0) {
		t.Errorf("hour 0: reported %g s, gaps %+v; want 2370 s (to its last report at 0:39:30), the 930 s gap", got[0].ReportedSeconds, got[0].Gaps)
	}
	g1 := gapsOf(870, 1200)
	g1.AddWoken(ledger.Bucket(1200), []float64{3, 4, 6, 12, 20}, 5)
	// Marked by its longest length: from pod b's report before its
	// tokens (0:24:30) to the return (1:00), 2130 s.
	g1.AddUnmeasured(ledger.Bucket(2130))
	if !cmp.Equal(got[1].Gaps, g1) {
		t.Errorf("hour 1: gaps %+v; want the 870 s before it went, booked when it came back (no requests counted: they came while it was away) and marked by its longest length, 2130 s, and 1200 s from its return to 1:20", got[1].Gaps)
	}
}

func gapsOf(sec ...float64) ledger.Gaps {
	var g ledger.Gaps
	for _, s := range sec {
		g.Add(s)
	}
	return g
}

// TestServingFromGPUActivity: a Deployment's pod without vLLM's series
// gets an endpoint timeline from its GPU's activity: busy at 5% or more.
// Its GPU is busy (40%) for the first 10 minutes of each hour and idle
// (1%) the rest, scraped every 30 s: one 50-minute gap a hour, from the
// last busy report at 0:09:30 to the next at 1:00. A Job's pod on the
// other GPU gets none.
func TestServingFromGPUActivity(t *testing.T) {
	a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for sec := 0; sec < 3*3600; sec += 30 {
		ms := t0.UnixMilli() + int64(sec)*1000
		a.AddPod(PodInfo{TimeMs: ms, Namespace: "serve", Pod: "qwen-7d9f8b6c5-abcde", Node: "n1", OwnerKind: "ReplicaSet", OwnerName: "qwen-7d9f8b6c5"})
		a.AddPod(PodInfo{TimeMs: ms, Namespace: "research", Pod: "train-0", Node: "n1", OwnerKind: "Job", OwnerName: "train"})
		act := 0.01
		if sec%3600 < 600 {
			act = 0.4
		}
		a.Add(&Sample{TimeMs: ms, Node: "n1", GPU: "0", Namespace: "serve", Pod: "qwen-7d9f8b6c5-abcde", Field: FieldGREngineActive, Value: act})
		a.Add(&Sample{TimeMs: ms, Node: "n1", GPU: "1", Profile: "3g.40gb", Instance: "1", Namespace: "research", Pod: "train-0", Field: FieldGREngineActive, Value: 0.01})
	}
	a.Emit(t0.Add(3 * time.Hour).UnixMilli())
	rows := a.EndpointRows()
	if len(rows) != 3 {
		t.Fatalf("%d endpoint rows; want 3 (the serving pod's hours only): %+v", len(rows), rows)
	}
	for i, r := range rows {
		if r.Model != "" || r.Kind != "ReplicaSet" || r.Name != "qwen-7d9f8b6c5" || r.Namespace != "serve" || r.Pods != 1 {
			t.Errorf("hour %d: %+v; want the ReplicaSet's row without a model", i, r)
		}
		if err := r.Check(); err != nil {
			t.Errorf("hour %d: %v", i, err)
		}
		// No request counts from a GPU: the gap is unmeasured.
		want := gapsOf(3030)
		want.AddUnmeasured(ledger.Bucket(3030))
		if i == 0 {
			want = ledger.Gaps{}
		}
		if !cmp.Equal(r.Gaps, want) {
			t.Errorf("hour %d: gaps %+v; want %+v", i, r.Gaps, want)
		}
		if r.BusySeconds != 600 {
			t.Errorf("hour %d: busy %g s; want 600", i, r.BusySeconds)
		}
	}
	if got := rows[2].IdleSince; !got.Equal(t0.Add(2*time.Hour + 9*time.Minute + 30*time.Second)) {
		t.Errorf("the last hour idle since %s; want 2:09:30", got)
	}
}

// TestEndpointCountsCutShort: the data ends at 1:23, three minutes after
// the gap that ended at 1:20; the hour is closed by Emit (the data's end,
// or the clock) with what the data counted: the 30 s, 1 and 2 minute
// windows covered, the 5 and 10 minute ones not (booked as such, so that
// a load that long finds the gap unmeasured).
func TestEndpointCountsCutShort(t *testing.T) {
	a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for sec := 0; sec < 4980; sec += 30 {
		for _, q := range endpointScrape(sec) {
			a.AddQueue(&q)
		}
	}
	a.Emit(t0.Add(2 * time.Hour).UnixMilli())
	rows := a.EndpointRows()
	if len(rows) != 2 || !rows[1].Hour.Equal(t0.Add(time.Hour)) {
		t.Fatalf("%d rows; want hours 0 and 1", len(rows))
	}
	rows = rows[1:]
	g := rows[0].Gaps
	b := ledger.Bucket(3300)
	w := len(ledger.WakeBounds)
	if got := g.Measured[b*w : b*w+w]; !slices.Equal(got, []int64{1, 1, 1, 0, 0}) || g.Wakes[b] != 1 {
		t.Errorf("measured windows %v of %d gaps; want the first three of one", got, g.Wakes[b])
	}
	if err := rows[0].Check(); err != nil {
		t.Error(err)
	}
	if _, un := g.WokenOver(3600, 4); un != 0 {
		// 3300 s is in the bucket up to 3600: not over it.
		t.Errorf("over 3600 s: %d unmeasured", un)
	}
	if _, un := g.WokenOver(1800, 4); un != 1 {
		t.Errorf("within 10 minutes over 1800 s: %d unmeasured; want 1", un)
	}
	if _, un := g.WokenOver(1800, 2); un != 0 {
		t.Errorf("within 2 minutes over 1800 s: %d unmeasured; want 0", un)
	}
}

// TestEndpointArrivals: a gateway's counter of arriving requests keeps an
// endpoint's timeline while its model server is away (scaled to zero) and
// counts the requests that end a gap. One request comes at 0:00:05; the
// server goes at 0:10; five come at 0:40:05, and the server is back at
// 0:42 (its load) to serve them. vLLM scraped every 30 s, the gateway 10 s
// after it.
func TestEndpointArrivals(t *testing.T) {
	run := func(gateway bool) ledger.EndpointRow {
		a, err := New(testModel(), Options{StartMs: t0.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		for sec := 0; sec < 3600; sec += 30 {
			ms := t0.UnixMilli() + int64(sec)*1000
			if sec < 600 || sec >= 2520 {
				running, done := 0.0, 0.0
				switch {
				case sec >= 30 && sec < 2520:
					done = 1
				case sec == 2520 || sec == 2550:
					running, done = 5, 1
				case sec >= 2580:
					done = 6
				}
				for _, q := range []QueueSample{
					{Metric: EndpointRunning, Series: "0,", Value: running},
					{Metric: EndpointRequests, Series: "0,stop", Value: done},
				} {
					q.TimeMs, q.Namespace, q.Pod, q.Model = ms, "serve", "llama-a", "llama"
					a.AddQueue(&q)
				}
			}
			if gateway {
				n := 0.0
				if sec+10 >= 5 {
					n = 1
				}
				if sec+10 >= 2405 {
					n = 6
				}
				a.AddQueue(&QueueSample{TimeMs: ms + 10_000, Namespace: "serve", Model: "llama", Metric: EndpointArrivals, Series: "pod=epp-0,", Value: n})
			}
		}
		a.CloseEndpoints()
		a.Emit(t0.Add(time.Hour).UnixMilli())
		rows := a.EndpointRows()
		if len(rows) != 1 {
			t.Fatalf("gateway %v: %d rows; want 1", gateway, len(rows))
		}
		return rows[0]
	}
	// With the gateway: the 30 s from the first report to the first
	// request's; then one gap, from the server's last busy report
	// (0:00:30, its counter's increase) to the gateway's report of the
	// five (0:40:10), 2380 s, filed by its longest length (from the
	// server's report before, 0:00:00: 2410 s), all five counted in every
	// window; busy while the five wait for the server's load (no gap
	// there); the time away is reported (the gateway reported it).
	r := run(true)
	want := gapsOf(30, 2380)
	want.AddWoken(ledger.Bucket(2410), []float64{5, 5, 5, 5, 5}, 5)
	if !cmp.Equal(r.Gaps, want) || r.Pods != 1 || r.ReportedSeconds < 3550 || r.Requests != 6 {
		t.Errorf("with the gateway: gaps %+v, %d pods, reported %g s, %g requests; want %+v, 1 pod (the gateway is none), about 3580 s, 6", r.Gaps, r.Pods, r.ReportedSeconds, r.Requests, want)
	}
	// Without it: the 540 s idle before the server went, its requests not
	// known, marked by the longest length it may have had, to the
	// server's return (2520 s); the time away is not reported.
	r = run(false)
	want = gapsOf(30, 540)
	want.AddUnmeasured(ledger.Bucket(2520))
	if !cmp.Equal(r.Gaps, want) || r.ReportedSeconds > 3600-1800 {
		t.Errorf("without the gateway: gaps %+v, reported %g s; want %+v and under 1800 s", r.Gaps, r.ReportedSeconds, want)
	}
}
