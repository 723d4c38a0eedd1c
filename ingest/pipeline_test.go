package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// clock is a settable clock for pipelines under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// live is a pipeline under test with what it needs to be restarted.
type live struct {
	t     *testing.T
	model *attribution.Model
	store ledger.Store
	dir   string
	clock *clock
	opts  PipelineOptions
	pl    *Pipeline
}

func newLive(t *testing.T, m *attribution.Model, store ledger.Store, dir string, now time.Time) *live {
	l := &live{t: t, model: m, store: store, dir: dir, clock: &clock{t: now}}
	l.opts = PipelineOptions{Dir: dir, Now: l.clock.Now}
	l.open()
	// The pipeline open at the end stops, as a killed process would,
	// before the test's directories go: its last snapshot may still be
	// under way.
	t.Cleanup(func() { l.pl.c.close() })
	return l
}

func (l *live) open() {
	l.t.Helper()
	pl, err := NewPipeline(l.model, attribution.Options{}, l.store, l.opts)
	if err != nil {
		l.t.Fatal(err)
	}
	l.pl = pl
}

// crash stops the pipeline as kill -9 would: nothing written, nothing
// saved beyond what each request made durable.
func (l *live) crash() {
	l.pl.c.close()
	l.open()
}

// restart stops the pipeline cleanly and starts it again.
func (l *live) restart() {
	l.t.Helper()
	if err := l.pl.Close(context.Background()); err != nil {
		l.t.Fatal(err)
	}
	l.open()
}

// write sends one scrape as remote write from vmagent, at its time plus a
// second by the clock.
func (l *live) write(sc simScrape) Result {
	l.t.Helper()
	l.clock.Set(sc.at.Add(time.Second))
	res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(l.t, []simScrape{sc}))
	if err != nil {
		l.t.Fatal(err)
	}
	return res
}

// flush ticks and writes the ledger, as Run does every second.
func (l *live) flush() {
	l.t.Helper()
	if err := l.pl.Flush(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// settleAt moves the clock to at and flushes.
func (l *live) settleAt(at time.Time) {
	l.clock.Set(at)
	l.flush()
}

// feedLive sends scrapes one by one, flushing every 10 minutes of them, and
// calls interrupt (when set) before scrape i.
func feedLive(l *live, scrapes []simScrape, interrupt func(i int)) {
	feed(l, scrapes, interrupt)
	last := scrapes[len(scrapes)-1].at
	l.settleAt(last.Truncate(time.Hour).Add(time.Hour + 11*time.Minute))
}

// feed is feedLive without the final settle.
func feed(l *live, scrapes []simScrape, interrupt func(i int)) {
	for i, sc := range scrapes {
		if interrupt != nil {
			interrupt(i)
		}
		if res := l.write(sc); res.Rejected() != 0 {
			l.t.Fatalf("scrape %d at %s: %+v", i, sc.at, res)
		}
		if i%40 == 39 {
			l.flush()
		}
	}
}

// TestPipelineSurvivesCrashes: 2 hours of remote write, the process killed
// (nothing saved at exit) 40 minutes in and again at 1:25, restarted each
// time, fed on: the ledger is the uninterrupted run's, bit for bit, and
// that run's is what attribution makes of the same scrapes from a file.
// (Before the write-ahead log, the first 40 minutes' team costs moved to
// _unallocated.) A clean stop and restart gives the same.
func TestPipelineSurvivesCrashes(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	end := simStart.Add(2 * time.Hour)
	ref := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feedLive(ref, scrapes, nil)
	want, wantWl := ledgertest.Dump(t, ref.store, simStart, end)
	if len(want) == 0 {
		t.Fatal("reference ledger empty")
	}
	wantLines := dumpLines(t, ref.store, simStart, end)
	if err := ledger.CheckLines(want, wantLines); err != nil || len(wantLines) == 0 {
		t.Errorf("the live path's %d lines do not explain its rows: %v", len(wantLines), err)
	}

	// The same scrapes straight through attribution.
	fileStore := openStore(t)
	a, _ := attribution.New(m, attribution.Options{StartMs: simStart.UnixMilli()})
	var p Parser
	for _, sc := range scrapes {
		if err := p.ParseExposition(sc.body, sc.at.UnixMilli(), a); err != nil {
			t.Fatal(err)
		}
	}
	rows, wls := a.Emit(end.UnixMilli())
	if err := fileStore.WriteHours(context.Background(), rows, wls); err != nil {
		t.Fatal(err)
	}
	fileRows, _ := ledgertest.Dump(t, fileStore, simStart, end)
	if diff := cmp.Diff(fileRows, want, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("live ledger differs from the file's (-file +live):\n%s", diff)
	}

	for _, stop := range []string{"crash", "restart"} {
		l := newLive(t, m, openStore(t), t.TempDir(), simStart)
		feedLive(l, scrapes, func(i int) {
			if i == 160 || i == 340 { // 0:40 and 1:25
				if stop == "crash" {
					l.crash()
				} else {
					l.restart()
				}
			}
		})
		got, gotWl := ledgertest.Dump(t, l.store, simStart, end)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: ledger differs from the uninterrupted run's (-uninterrupted +%s):\n%s", stop, stop, diff)
		}
		if diff := cmp.Diff(wantWl, gotWl); diff != "" {
			t.Errorf("%s: workload rows differ (-uninterrupted +%s):\n%s", stop, stop, diff)
		}
		if diff := cmp.Diff(wantLines, dumpLines(t, l.store, simStart, end)); diff != "" {
			t.Errorf("%s: lines differ (-uninterrupted +%s):\n%s", stop, stop, diff)
		}
	}
}

// dumpLines reads a store's lines of [from, to), hour by hour.
func dumpLines(t *testing.T, s ledger.Store, from, to time.Time) []ledger.Line {
	t.Helper()
	var out []ledger.Line
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		ls, err := s.(ledger.LineStore).Lines(context.Background(), ledger.LineQuery{From: h, To: h.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ls...)
	}
	return out
}

// TestPipelineNeverRewritesSettledHours: an hour settled and written, the
// process restarted, then one request with a sample 30 minutes old (in the
// settled hour): the sample is late, the sender is told, and the hour is
// unchanged. (Before, the correct hour was replaced by a near-empty one.)
func TestPipelineNeverRewritesSettledHours(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	l := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feed(l, scrapes[:260], nil) // 1:05 of data; the first hour settles at 1:10
	l.settleAt(simStart.Add(time.Hour + 11*time.Minute))
	before, _ := ledgertest.Dump(t, l.store, simStart, simStart.Add(time.Hour))
	if len(before) == 0 {
		t.Fatal("the first hour was not written")
	}
	l.crash()
	old := scrapes[160] // 0:40
	l.clock.Set(simStart.Add(time.Hour + 12*time.Minute))
	res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{old}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Late == 0 || res.Accepted != 0 || !res.SettledUntil.Equal(simStart.Add(time.Hour)) {
		t.Errorf("a request for a settled hour: %+v; want every sample late", res)
	}
	l.settleAt(simStart.Add(3 * time.Hour))
	after, _ := ledgertest.Dump(t, l.store, simStart, simStart.Add(time.Hour))
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the settled hour changed (-before +after):\n%s", diff)
	}
	if n := l.pl.Stats().Rejected[[2]string{"vmagent", "late"}]; n != uint64(res.Late) {
		t.Errorf("late samples counted for vmagent: %d, want %d", n, res.Late)
	}
}

// TestPipelineKeepsACopiedLedger: a ledger holding earlier hours (copied,
// or written by a backfill), a new pipeline, one sample dated in those
// hours and one dated now: the old one is late, nothing before the
// pipeline's first hour is written, and the old hours are unchanged.
// (Before, 1,094 settled hours of a month were rewritten by two samples.)
func TestPipelineKeepsACopiedLedger(t *testing.T) {
	testenv.Slow(t, "a month of settled hours copied and replayed")
	m, scrapes := simScrapes(t, 3)
	store := openStore(t)
	path := writeScrapesFile(t, scrapes)
	if _, err := Backfill(context.Background(), BackfillOptions{Source: &FileSource{Path: path}, Store: store, Model: m,
		Start: simStart, End: simStart.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	before, _ := ledgertest.Dump(t, store, simStart, simStart.Add(3*time.Hour))
	now := simStart.Add(72*time.Hour + 20*time.Minute)
	l := newLive(t, m, store, t.TempDir(), now)
	res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, scrapes[200:201]))
	if err != nil || res.Late == 0 || res.Accepted != 0 {
		t.Errorf("a sample from 50 hours before the start: %+v, %v; want late", res, err)
	}
	cur := scrapes[0]
	cur.at = now
	if res := l.write(cur); res.Rejected() != 0 || res.Accepted == 0 {
		t.Errorf("a sample of now: %+v", res)
	}
	l.settleAt(now.Add(2 * time.Hour))
	after, _ := ledgertest.Dump(t, store, simStart, now.Truncate(time.Hour))
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("hours before the pipeline's start changed (-before +after):\n%s", diff)
	}
	written, _ := ledgertest.Dump(t, store, now.Truncate(time.Hour), now.Add(2*time.Hour))
	if len(written) == 0 {
		t.Error("the current hour was not written")
	}
}

// TestPipelineClockAhead: a sample stamped 9.5 minutes ahead of the clock
// is refused (the limit is 2 minutes) and the sender told; one 90 s ahead
// is taken but settles nothing early: the real samples after it are all
// accepted, and the hour is written only when the clock settles it.
// (Before, the 9.5-minute one was accepted, the open hour written at 56
// minutes, and the real samples after it dropped as late behind a 204.)
func TestPipelineClockAhead(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	l := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feed(l, scrapes[:220], nil) // up to 0:55
	at := scrapes[220].at
	l.clock.Set(at)
	ahead := func(d time.Duration) Result {
		body := []byte(`DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="a100-a-01"} 50 ` + strconv.FormatInt(at.Add(d).UnixMilli(), 10) + "\n")
		res, err := l.pl.Exposition(context.Background(), "skewed", body, at.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := ahead(9*time.Minute + 30*time.Second); res.TooNew != 1 || res.Accepted != 0 {
		t.Errorf("9.5 minutes ahead: %+v; want too new", res)
	}
	if res := ahead(90 * time.Second); res.TooNew != 0 || res.Accepted != 1 {
		t.Errorf("90 s ahead: %+v; want accepted", res)
	}
	for _, sc := range scrapes[220:260] { // 0:55 to 1:05
		if res := l.write(sc); res.Rejected() != 0 {
			t.Fatalf("a real sample after the early one was rejected: %+v", res)
		}
		l.flush()
	}
	if rows, _ := ledgertest.Dump(t, l.store, simStart, simStart.Add(time.Hour)); len(rows) != 0 {
		t.Errorf("the hour was written at %s, before it settles at 1:10", l.clock.Now().Format(time.TimeOnly))
	}
	if n := l.pl.Stats().Rejected[[2]string{"skewed", "too_new"}]; n != 1 {
		t.Errorf("too-new samples counted for the skewed sender: %d, want 1", n)
	}
}

// TestPipelineDiskFullAndFreed: the write-ahead log's disk fills in the
// middle of a write: the requests of that batch get an error (a sender
// retries them), nothing of them is applied, the torn bytes are cut out;
// the disk frees, the retries succeed, and after a crash the ledger is the
// uninterrupted one.
func TestPipelineDiskFullAndFreed(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	end := simStart.Add(2 * time.Hour)
	ref := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feedLive(ref, scrapes, nil)
	want, _ := ledgertest.Dump(t, ref.store, simStart, end)

	l := newLive(t, m, openStore(t), t.TempDir(), simStart)
	full := false
	install := func() {
		l.pl.c.fault = func() error {
			if full {
				return syscall.ENOSPC
			}
			return nil
		}
	}
	install()
	failed := 0
	for i, sc := range scrapes {
		if i == 300 {
			l.crash()
			install()
		}
		// From scrape 100 to 129 the disk is full at each first attempt,
		// and frees before the sender retries.
		for attempt := 0; ; attempt++ {
			full = i >= 100 && i < 130 && attempt == 0
			l.clock.Set(sc.at.Add(time.Second))
			_, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{sc}))
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			failed++
			if l.pl.Health() == nil {
				t.Fatal("health is fine while the log cannot be written")
			}
		}
		if i%40 == 39 {
			l.flush()
		}
	}
	if failed != 30 {
		t.Errorf("%d writes failed on the full disk, want 30", failed)
	}
	l.settleAt(end.Add(11 * time.Minute))
	got, _ := ledgertest.Dump(t, l.store, simStart, end)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ledger after a full disk, retries and a crash (-uninterrupted +got):\n%s", diff)
	}
	if err := l.pl.Health(); err != nil {
		t.Errorf("still unhealthy after the disk freed: %v", err)
	}
}

// TestPipelineBounds: what a hostile or broken sender cannot make the
// pipeline hold: more series than the limit in one request, more waiting
// samples than MaxBuffered, more pods than MaxPods (and pods gone from
// kube-state-metrics are forgotten).
func TestPipelineBounds(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	l := newLive(t, m, openStore(t), "", simStart)
	l.opts.Limits.MaxSeries = 100
	l.crash() // again with these options
	_, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, scrapes[:1]))
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "the limit is 100") {
		t.Errorf("a request over the series limit: %v", err)
	}

	// A window that would hold more than MaxBuffered: the oldest are put
	// in order early, nothing is refused, and, the scrapes coming in
	// order, the ledger is the one the whole window gives.
	ref := newLive(t, m, openStore(t), "", simStart)
	feedLive(ref, scrapes, nil)
	want, _ := ledgertest.Dump(t, ref.store, simStart, simStart.Add(time.Hour))
	const maxBuffered = 2000
	l = newLive(t, m, openStore(t), "", simStart)
	l.opts.MaxBuffered = maxBuffered
	l.crash() // again with these options
	feedLive(l, scrapes, func(int) {
		if n := l.pl.Stats().Buffered; n > maxBuffered {
			t.Fatalf("%d samples buffered, MaxBuffered is %d", n, maxBuffered)
		}
	})
	if shed := l.pl.Stats().Shed; shed == 0 {
		t.Errorf("nothing was put in order early with MaxBuffered %d: the test needs a smaller bound", maxBuffered)
	}
	got, _ := ledgertest.Dump(t, l.store, simStart, simStart.Add(time.Hour))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ledger with a bounded buffer (-whole window +bounded):\n%s", diff)
	}

	// 5,000 pods reported once; the pipeline remembers at most 1,000 of
	// them (the older ones forgotten to make room for the newer), and
	// none an hour and more after kube-state-metrics stopped.
	pm := &attribution.Model{Cluster: "c", GPUs: []attribution.GPU{{Node: "n", Index: "0", Flavor: "f", RateMicrosPerHour: 1}}}
	pl, err := NewPipeline(pm, attribution.Options{MaxPods: 1000}, openStore(t), PipelineOptions{Now: func() time.Time { return simStart }})
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for i := range 5000 {
		body = fmt.Appendf(body, "kube_pod_labels{namespace=\"x\",pod=\"p-%d\",label_kueue_x_k8s_io_queue_name=\"q\"} 1\n", i)
	}
	if _, err := pl.Exposition(context.Background(), "test", body, simStart.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := pl.FlushUntil(context.Background(), simStart.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	st := pl.Stats()
	if st.Pods > 1000 || st.Pods+int(st.Attribution.PodsForgotten) != 5000 {
		t.Errorf("%d pods remembered, %d forgotten; want at most 1000, and 5000 in all", st.Pods, st.Attribution.PodsForgotten)
	}
	if err := pl.FlushUntil(context.Background(), simStart.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := pl.Stats(); st.Pods != 0 {
		t.Errorf("%d pods remembered two hours after the last report; want 0", st.Pods)
	}
}

// TestPipelineKeepsRowsWhenTheStoreFails: a failed ledger write loses
// nothing, health says so, and the next flush writes it.
func TestPipelineKeepsRowsWhenTheStoreFails(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	store := &flakyStore{Store: openStore(t), fail: true}
	l := newLive(t, m, store, "", simStart)
	for _, sc := range scrapes {
		l.write(sc)
	}
	l.clock.Set(simStart.Add(2*time.Hour + 11*time.Minute))
	if err := l.pl.Flush(context.Background()); err == nil {
		t.Fatal("flush into a failing store reported no error")
	}
	if l.pl.Health() == nil || l.pl.Stats().WriteFailures == 0 {
		t.Errorf("health %v, write failures %d, after a failed write", l.pl.Health(), l.pl.Stats().WriteFailures)
	}
	store.fail = false
	l.flush()
	rows, _ := ledgertest.Dump(t, store, simStart, simStart.Add(2*time.Hour))
	hours := map[time.Time]bool{}
	for _, r := range rows {
		if r.Team != ledger.TeamUnallocated {
			hours[r.Hour] = true
		}
	}
	if len(hours) != 2 || l.pl.Health() != nil {
		t.Errorf("ledger holds %d hours of teams' costs, want 2; health %v", len(hours), l.pl.Health())
	}
}

// TestPipelineReorders: remote-write requests arriving out of order (each
// pair of scrapes swapped, as two vmagent queues can deliver them) give the
// in-order ledger with the reorder window, and rejections without it.
func TestPipelineReorders(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	end := simStart.Add(time.Hour)
	ledgerOf := func(window time.Duration, swap bool) ([]ledger.Row, attribution.Stats) {
		store := openStore(t)
		c := &clock{t: simStart}
		pl, err := NewPipeline(m, attribution.Options{}, store, PipelineOptions{ReorderWindow: window, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		order := make([]simScrape, len(scrapes))
		copy(order, scrapes)
		for i := 0; swap && i+1 < len(order); i += 2 {
			order[i], order[i+1] = order[i+1], order[i]
		}
		for i, sc := range order {
			// The clock is past both requests of a swapped pair: they are
			// out of order, not ahead of it.
			c.Set(scrapes[min(i|1, len(scrapes)-1)].at.Add(time.Second))
			if _, err := pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{sc})); err != nil {
				t.Fatal(err)
			}
		}
		if err := pl.FlushUntil(context.Background(), end); err != nil {
			t.Fatal(err)
		}
		rows, _ := ledgertest.Dump(t, store, simStart, end)
		return rows, pl.Stats().Attribution
	}
	inOrder, _ := ledgerOf(-1, false)
	if len(inOrder) < 3 {
		t.Fatalf("in-order ledger has %d rows", len(inOrder))
	}
	reordered, st := ledgerOf(30*time.Second, true)
	if diff := cmp.Diff(inOrder, reordered, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("swapped requests through the reorder window (-in order +swapped):\n%s", diff)
	}
	if len(st.Rejected) != 0 {
		t.Errorf("rejected with the window: %v", st.Rejected)
	}
	if _, st := ledgerOf(-1, true); st.Rejected[attribution.ReasonOutOfOrder] == 0 {
		t.Error("without the window, swapped requests were not rejected: the test does not test the window")
	}
}

// TestPipelineAnswersOutOfOrder holds one request back past the reorder
// window: its samples reach attribution after later ones of the same
// devices, so they cannot be counted, and the answer says so (remote write
// then answers 400) instead of acknowledging samples that are dropped. A
// request within the window is answered as taken.
func TestPipelineAnswersOutOfOrder(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	c := &clock{t: simStart}
	pl, err := NewPipeline(m, attribution.Options{}, openStore(t), PipelineOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int) Result {
		t.Helper()
		c.Set(scrapes[i].at.Add(time.Second))
		res, err := pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{scrapes[i]}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Scrape 10 comes after 11 (15 s later: within the window), and scrape
	// 20 after those of the window and 30 s more (past it).
	past := 20 + int(PipelineOptions{}.withDefaults().ReorderWindow/(15*time.Second)) + 2
	for i := range past + 5 {
		var res Result
		switch i {
		case 10, 20:
			continue
		case 11:
			if res = send(11); res.Rejected() == 0 {
				res = send(10)
			}
		case past:
			if res = send(past); res.Rejected() == 0 {
				res = send(20)
				if res.OutOfOrder == 0 || res.Accepted == 0 || res.Late != 0 || res.TooNew != 0 {
					t.Fatalf("scrape 20 sent after 21-%d: %+v; want some out of order, and its pod facts accepted", past, res)
				}
				st := pl.Stats()
				if got := st.Attribution.Rejected[attribution.ReasonOutOfOrder]; got != uint64(res.OutOfOrder) {
					t.Errorf("answered %d out of order, attribution rejected %d", res.OutOfOrder, got)
				}
				if got := st.Rejected[[2]string{"vmagent", "out_of_order"}]; got != uint64(res.OutOfOrder) {
					t.Errorf("counted %d out of order for vmagent, want %d", got, res.OutOfOrder)
				}
				continue
			}
		default:
			res = send(i)
		}
		if res.Rejected() != 0 {
			t.Fatalf("scrape %d: %+v", i, res)
		}
	}
}

// TestPipelineOutageHeldBlock: vmagent with several queues after an outage
// longer than the reorder window (5 minutes), and longer than the catch-up
// window (20 minutes): the queues deliver the backlog while one retries the
// block it held when the outage began, after the others. The catch-up
// window, as deep as the backlog, keeps that block in order, through the
// restart's first tick (before any request) and a crash (5 minutes: the
// log replayed) or a clean restart (20 minutes: the snapshot read) between
// the backlog and the block: nothing is refused, and the ledger is the
// uninterrupted run's. With the reorder window only, the block is out of
// order.
func TestPipelineOutageHeldBlock(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	end := simStart.Add(time.Hour)
	ref := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feedLive(ref, scrapes, nil)
	want, _ := ledgertest.Dump(t, ref.store, simStart, end)

	const held = 100 // the scrape a queue holds through the outage
	run := func(catchUp time.Duration, outage int) (*live, Result) {
		l := newLive(t, m, openStore(t), t.TempDir(), simStart)
		l.opts.CatchUpWindow = catchUp
		l.crash() // again with these options: one pipeline on a folder at a time
		feed(l, scrapes[:held], nil)
		l.crash()
		back := scrapes[held+outage].at
		l.settleAt(back) // the restart's first tick comes before any request
		for i, sc := range scrapes[held+1 : held+outage+1] {
			l.clock.Set(back.Add(time.Duration(i) * 100 * time.Millisecond))
			res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{sc}))
			if err != nil || res.Rejected() != 0 {
				t.Fatalf("backlog scrape %d: %+v, %v", held+1+i, res, err)
			}
		}
		if outage < 40 {
			l.crash()
		} else {
			l.restart()
		}
		l.clock.Set(back.Add(14 * time.Second))
		l.flush() // a tick comes before the held block, as every second
		res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{scrapes[held]}))
		if err != nil {
			t.Fatal(err)
		}
		return l, res
	}

	for _, outage := range []int{20, 80} { // scrapes 15 s apart: 5 and 20 minutes
		t.Run(fmt.Sprintf("%dmin", outage/4), func(t *testing.T) {
			if len(scrapes) <= held+outage {
				t.Fatalf("%d scrapes: not enough for the outage", len(scrapes))
			}
			l, res := run(0, outage)
			if res.Rejected() != 0 {
				t.Fatalf("the held block, after the backlog: %+v; want all of it taken", res)
			}
			if st := l.pl.Stats(); !st.CatchingUp || st.Window < time.Duration(outage)*15*time.Second {
				t.Errorf("after the backlog: catching up %v, window %s; want a window as deep as the backlog", st.CatchingUp, st.Window)
			}
			feedLive(l, scrapes[held+outage+1:], nil)
			got, _ := ledgertest.Dump(t, l.store, simStart, end)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ledger after the outage (-uninterrupted +got):\n%s", diff)
			}
			if st := l.pl.Stats(); st.CatchingUp || st.Shed != 0 || len(st.Attribution.Rejected) != 0 {
				t.Errorf("after the catch-up: catching up %v, shed %d, rejected %v", st.CatchingUp, st.Shed, st.Attribution.Rejected)
			}

			if _, res := run(-1, outage); res.OutOfOrder == 0 {
				t.Errorf("with the reorder window only, the held block: %+v; want samples out of order (the test does not test the catch-up window)", res)
			}
		})
	}
}

// TestPipelineCatchUpDepthPasses: one request 20 minutes behind the clock
// makes the window that deep; a sender that then lags 3 minutes for good
// keeps serve catching up, but the deep window lasts only a catch-up window
// (10 minutes of the clock) past that request, not for as long as the lag.
func TestPipelineCatchUpDepthPasses(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	l := newLive(t, m, openStore(t), t.TempDir(), simStart)
	opts := PipelineOptions{}.withDefaults()
	const deep, resume = 40, 108 // scrapes: 108 at its time and 3 minutes is 40's and 20
	feed(l, scrapes[:deep], nil)
	send := func(i int, late time.Duration) {
		t.Helper()
		l.clock.Set(scrapes[i].at.Add(late))
		res, err := l.pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{scrapes[i]}))
		if err != nil || res.Rejected() != 0 {
			t.Fatalf("scrape %d, %s behind the clock: %+v, %v", i, late, res, err)
		}
		l.flush()
	}
	send(deep, 20*time.Minute)
	deepAt := l.clock.Now()
	if w := l.pl.Stats().Window; w < 22*time.Minute {
		t.Fatalf("after a request 20 minutes behind: window %s; want at least 22m", w)
	}
	for i := resume; i < resume+60; i++ {
		send(i, 3*time.Minute)
		st := l.pl.Stats()
		if !st.CatchingUp {
			t.Fatalf("scrape %d 3 minutes behind: not catching up", i)
		}
		if since := l.clock.Now().Sub(deepAt); since < opts.CatchUpWindow && st.Window < 22*time.Minute {
			t.Errorf("%s after the deep request: window %s; want it still 22m deep", since, st.Window)
		} else if since > opts.CatchUpWindow && st.Window != opts.CatchUpWindow {
			t.Errorf("%s after the deep request, a sender 3 minutes behind: window %s; want %s", since, st.Window, opts.CatchUpWindow)
		}
	}
	if st := l.pl.Stats(); len(st.Attribution.Rejected) != 0 || st.Shed != 0 {
		t.Errorf("rejected %v, shed %d", st.Attribution.Rejected, st.Shed)
	}
}

// TestPipelineCatchUpKeepsOrder replays a backlog, its samples far behind
// the clock, from two queues that swap neighbouring requests, with a tick
// between any two: the ticks must not release the window by the clock while
// requests come, or the later request of each pair is out of order. Once
// they stop, the clock releases nothing (a silence may be an outage, after
// which held blocks come) until the hour settles.
func TestPipelineCatchUpKeepsOrder(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	c := &clock{t: simStart.Add(55 * time.Minute)}
	pl, err := NewPipeline(m, attribution.Options{}, openStore(t), PipelineOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	order := slices.Clone(scrapes[:40])
	for i := 0; i+1 < len(order); i += 2 {
		order[i], order[i+1] = order[i+1], order[i]
	}
	for i, sc := range order {
		c.Set(c.Now().Add(100 * time.Millisecond))
		res, err := pl.RemoteWrite(context.Background(), "vmagent", toRemoteWrite(t, []simScrape{sc}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Rejected() != 0 {
			t.Fatalf("request %d (scrape at %s): %+v", i, sc.at, res)
		}
		pl.tick()
	}
	if n := pl.Stats().Buffered; n == 0 {
		t.Fatal("nothing buffered after the last request: the test does not test the window")
	}
	held := pl.Stats().Buffered
	last := c.Now()
	opts := PipelineOptions{}.withDefaults()
	for _, after := range []time.Duration{opts.ReorderWindow - time.Second, opts.ReorderWindow, opts.CatchUpWindow + time.Second} {
		c.Set(last.Add(after))
		pl.tick()
		if n := pl.Stats().Buffered; n != held {
			t.Errorf("a tick %s after the last request: %d items buffered, want the %d held (silence releases nothing)", after, n, held)
		}
	}
	settle := simStart.Add(time.Hour + opts.SettleAfter)
	if !settle.After(c.Now()) {
		t.Fatalf("the hour settles at %s, before the silence checked ended: the test does not test the silence", settle)
	}
	c.Set(settle)
	pl.tick()
	if n := pl.Stats().Buffered; n != 0 {
		t.Errorf("%d items still buffered once the hour settled", n)
	}
	if st := pl.Stats().Attribution; len(st.Rejected) != 0 {
		t.Errorf("rejected: %v", st.Rejected)
	}
}

// TestScraper scrapes a fake exporter into a pipeline with a fixed clock,
// and counts a failing target.
func TestScraper(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(scrapes[0].body)
	}))
	defer exporter.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	now := simStart
	pl, err := NewPipeline(m, attribution.Options{}, openStore(t), PipelineOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s := NewScraper(pl, ScrapeOptions{Targets: []string{exporter.URL, broken.URL}, Now: func() time.Time { return now }})
	s.ScrapeOnce(context.Background())
	now = now.Add(15 * time.Second)
	s.ScrapeOnce(context.Background())
	st := pl.Stats()
	if want := 2 * uint64(56*5+32*4); st.Ingest.Samples != want || len(st.Attribution.Rejected) != 0 {
		t.Errorf("%d samples (want %d), rejected %v", st.Ingest.Samples, want, st.Attribution.Rejected)
	}
	if f := s.Failures(); f[broken.URL] != 2 || f[exporter.URL] != 0 {
		t.Errorf("failures %v", f)
	}
}

// TestBackfillAndLiveAgreeOnGaps: the live pipeline fed the gap file's
// scrapes writes the hand-computed ledger TestBackfillChunksAndLiveAgree
// expects of every chunking.
func TestBackfillAndLiveAgreeOnGaps(t *testing.T) {
	m := gapModel()
	body, err := os.ReadFile(gapFile(t))
	if err != nil {
		t.Fatal(err)
	}
	start, end := simStart.Add(time.Hour), simStart.Add(5*time.Hour)
	l := newLive(t, m, openStore(t), t.TempDir(), start)
	var p Parser
	var rec recorder
	if err := p.ParseExposition(body, 0, &rec); err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.samples {
		l.clock.Set(time.UnixMilli(s.TimeMs).Add(time.Second))
		line := fmt.Appendf(nil, "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",Hostname=\"n1\",namespace=\"research\",pod=\"train-0\"} 1 %d\n", s.TimeMs)
		if res, err := l.pl.Exposition(context.Background(), "scrape", line, s.TimeMs); err != nil || res.Rejected() != 0 {
			t.Fatalf("%+v, %v", res, err)
		}
		l.flush()
	}
	l.settleAt(end.Add(11 * time.Minute))
	rows, _ := ledgertest.Dump(t, l.store, start, end)
	for _, r := range rows {
		if r.Team != "ml" || r.GPUSeconds != 3600 || r.CostMicros != 3_600_000 {
			t.Errorf("hour %s: %+v; want all of it ml's", r.Hour.Format(time.TimeOnly), r)
		}
	}
	if len(rows) != 4 {
		t.Errorf("%d rows, want 4 hours of ml", len(rows))
	}
}

// TestLogTornTail: a log segment ending in a record cut short (a crash in
// mid-write) replays up to it.
func TestLogTornTail(t *testing.T) {
	dir := t.TempDir()
	var b []byte
	for i := uint64(1); i <= 3; i++ {
		r := record{kind: recTick, seq: i, nowMs: int64(i) * 1000}
		b = r.appendTo(b)
	}
	full := len(b)
	b = (&record{kind: recRemoteWrite, seq: 4, body: []byte("torn")}).appendTo(b)
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), b[:full+10], 0o644); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	rep, err := replayLog(dir, 0, slog.New(slog.DiscardHandler), func(r record) { got = append(got, r.seq) }, nil)
	if err != nil || rep.Last != 3 || rep.Torn != 1 || len(got) != 3 || len(rep.Losses) != 0 {
		t.Errorf("replay: %+v, records %v, %v", rep, got, err)
	}
}

// TestPipelineLogsWhatItReads: the log holds each remote-write body cut
// down to the series ingest reads, with how many series were cut, in fewer
// bytes than were sent; a crash replays it to the counters and ledger of
// the uninterrupted run; and a log of whole bodies, as servers before the
// cut wrote them, replays to the same.
func TestPipelineLogsWhatItReads(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	scrapes = scrapes[:60]
	const extra = 40 // skipped series a body
	bodies := make([][]byte, len(scrapes))
	sent := 0
	for i, sc := range scrapes {
		bodies[i] = withSkipped(t, toRemoteWrite(t, []simScrape{sc}), extra)
		sent += len(bodies[i])
	}
	open := func(dir string) *live {
		l := &live{t: t, model: m, store: openStore(t), dir: dir, clock: &clock{t: simStart}}
		// No snapshot: the whole log stays.
		l.opts = PipelineOptions{Dir: dir, Now: l.clock.Now, SnapshotEvery: 24 * time.Hour}
		l.open()
		return l
	}
	run := func(l *live, crashAt int) {
		for i, sc := range scrapes {
			if i == crashAt {
				l.crash()
			}
			l.clock.Set(sc.at.Add(time.Second))
			if res, err := l.pl.RemoteWrite(context.Background(), "vmagent", bodies[i]); err != nil || res.Rejected() != 0 {
				t.Fatalf("scrape %d: %+v, %v", i, res, err)
			}
		}
	}
	end := scrapes[len(scrapes)-1].at.Truncate(time.Hour).Add(time.Hour)
	settled := func(l *live) ([]ledger.Row, []ledger.WorkloadRow) {
		t.Helper()
		if err := l.pl.FlushUntil(context.Background(), end); err != nil {
			t.Fatal(err)
		}
		return ledgertest.Dump(t, l.store, simStart, end)
	}

	ref := open(t.TempDir())
	run(ref, -1)
	want := ref.pl.Stats().Ingest
	if want.Skipped < extra*uint64(len(scrapes)) {
		t.Fatalf("%d series skipped; want at least the %d added", want.Skipped, extra*len(scrapes))
	}

	// The log: every body cut, the cut counted, and smaller than sent.
	var recs []record
	if _, err := replayLog(ref.dir, 0, slog.New(slog.DiscardHandler), func(r record) { recs = append(recs, r) }, nil); err != nil {
		t.Fatal(err)
	}
	var cut, logged int
	var counted int64
	for _, r := range recs {
		switch r.kind {
		case recRemoteWriteCut:
			cut++
			logged += len(r.body)
			counted += r.auxMs
		case recRemoteWrite:
			t.Errorf("record %d holds a whole body", r.seq)
		}
	}
	if cut != len(scrapes) || counted != int64(want.Skipped) || logged >= sent {
		t.Errorf("log: %d cut bodies of %d bytes, %d series cut; want %d bodies, fewer bytes than the %d sent, %d cut",
			cut, logged, counted, len(scrapes), sent, want.Skipped)
	}

	// A crash halfway, and the restart after the last body: the same
	// counters.
	crashed := open(t.TempDir())
	run(crashed, len(scrapes)/2)
	crashed.crash()
	if got := crashed.pl.Stats().Ingest; got != want {
		t.Errorf("counters after crashes (-uninterrupted +crashed):\n%s", cmp.Diff(want, got))
	}

	// The same log with the whole bodies, as earlier servers wrote it.
	old := t.TempDir()
	var seg []byte
	next := 0
	for _, r := range recs {
		if r.kind == recRemoteWriteCut {
			r.kind, r.auxMs, r.body = recRemoteWrite, 0, bodies[next]
			next++
		}
		seg = r.appendTo(seg)
	}
	if err := os.WriteFile(filepath.Join(old, segmentName(recs[0].seq)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	whole := open(old)
	if got := whole.pl.Stats().Ingest; got != want {
		t.Errorf("counters from a log of whole bodies (-cut +whole):\n%s", cmp.Diff(want, got))
	}

	wantRows, wantWl := settled(ref)
	if len(wantRows) == 0 {
		t.Fatal("nothing settled")
	}
	for name, l := range map[string]*live{"crashed": crashed, "whole bodies": whole} {
		rows, wls := settled(l)
		if diff := cmp.Diff(wantRows, rows); diff != "" {
			t.Errorf("%s: ledger (-uninterrupted +%s):\n%s", name, name, diff)
		}
		if diff := cmp.Diff(wantWl, wls); diff != "" {
			t.Errorf("%s: workload rows (-uninterrupted +%s):\n%s", name, name, diff)
		}
	}
}

// TestRemoteWriteKeepsNoBody: RemoteWrite keeps nothing of the body it is
// given once it returns, even when the request is gone (cancelled) before
// its record is written: the server reads the next request into that body.
// Both records are written after their bodies are overwritten, and the log
// holds what was sent: the body that does not decode whole, the other cut.
func TestRemoteWriteKeepsNoBody(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	dir := t.TempDir()
	l := newLive(t, m, openStore(t), dir, scrapes[0].at)
	good := toRemoteWrite(t, scrapes[:1])
	bad := snappy.Encode(nil, []byte{0x0a, 0xff}) // a series whose length runs past the end
	release := make(chan struct{})
	l.pl.c.fault = func() error { <-release; return nil }
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sent := range [][]byte{bad, good} {
		body := slices.Clone(sent)
		if _, err := l.pl.RemoteWrite(gone, "vmagent", body); !errors.Is(err, context.Canceled) {
			t.Fatalf("RemoteWrite of a cancelled request returned %v before its record was written", err)
		}
		for i := range body {
			body[i] = 0xAA
		}
	}
	close(release)
	if err := l.pl.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var logged []record
	if _, err := replayLog(dir, 0, slog.New(slog.DiscardHandler), func(r record) {
		if r.kind == recRemoteWrite || r.kind == recRemoteWriteCut {
			r.body = slices.Clone(r.body)
			logged = append(logged, r)
		}
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(logged) != 2 {
		t.Fatalf("the log holds %d remote-write records, want 2", len(logged))
	}
	if logged[0].kind != recRemoteWrite || !slices.Equal(logged[0].body, bad) {
		t.Errorf("the body that does not decode is logged as kind %d, %x; want it whole, %x", logged[0].kind, logged[0].body, bad)
	}
	want := decodeForBuffer(good, Limits{}, false)
	got := decodeForBuffer(logged[1].body, Limits{}, false)
	if logged[1].kind != recRemoteWriteCut || got.err != nil || len(got.batch) != len(want.batch) || len(want.batch) == 0 {
		t.Errorf("the decoded body is logged as kind %d, decoding to %d samples (%v); want it cut, %d samples", logged[1].kind, len(got.batch), got.err, len(want.batch))
	}
}
