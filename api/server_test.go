package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/reports"
)

// testStore is an empty embedded ledger, closed when the test ends.
func testStore(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testServer(t *testing.T) *Server {
	t.Helper()
	s := testStore(t)
	var rows []ledger.Row
	for h := 0; h < 48; h++ {
		hour := time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC)
		rows = append(rows,
			ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: "ml", Flavor: "h100"}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 6_880_000, IdleCostMicros: 3_440_000},
			ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 6_880_000, UnallocatedCostMicros: 6_880_000},
		)
	}
	wl := []ledger.WorkloadRow{
		{Hour: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), Cluster: "c1", Team: "ml", Namespace: "ml", Kind: "Job", Name: "a", GPUSeconds: 7200, ActiveGPUSeconds: 3600, CostMicros: 2, IdleCostMicros: 1},
		{Hour: time.Date(2026, 10, 1, 1, 0, 0, 0, time.UTC), Cluster: "c1", Team: "ml", Namespace: "ml", Kind: "Job", Name: "b", GPUSeconds: 3600, CostMicros: 5, IdleCostMicros: 5},
	}
	if err := s.WriteHours(context.Background(), rows, wl); err != nil {
		t.Fatal(err)
	}
	return New(Options{Store: s, Report: reports.Options{Currency: "USD", Teams: []string{"ml"}, Budgets: map[string]int64{"ml": 1}},
		Gauges: map[string]func() float64{"gpuledger_clickhouse_spool_pending_records": func() float64 { return 7 }}})
}

func get(t *testing.T, srv *Server, url string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), string(body)
}

func TestCost(t *testing.T) {
	srv := testServer(t)
	code, _, body := get(t, srv, "/api/v1/cost?from=2026-10-01&to=2026-10-03&step=day&groupBy=team")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var resp CostResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Points) != 4 || resp.TotalCostMicros != 2*48*6_880_000 || resp.TotalCost != "660.480000" || resp.Currency != "USD" {
		t.Errorf("response %+v", resp)
	}
	p := resp.Points[1]
	if p.Team != "ml" || p.CostMicros != 24*6_880_000 || p.Cost != "165.120000" || p.GPUHours != 24 || p.ActiveGPUHours != 12 {
		t.Errorf("point %+v", p)
	}

	// Filter by team, hourly.
	_, _, body = get(t, srv, "/api/v1/cost?from=2026-10-01T00:00:00Z&to=2026-10-01T03:00:00Z&step=hour&team=ml")
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Points) != 3 || resp.TotalCostMicros != 3*6_880_000 {
		t.Errorf("hourly for ml: %+v", resp)
	}
}

// TestCostFlags: a flag on hours comes with every answer over them, and
// the points whose buckets hold a flagged hour say so; others do not.
func TestCostFlags(t *testing.T) {
	srv := testServer(t)
	f := ledger.HourFlag{Cluster: "c1", From: time.Date(2026, 10, 1, 13, 0, 0, 0, time.UTC), To: time.Date(2026, 10, 1, 15, 0, 0, 0, time.UTC),
		Reason: ledger.FlagLogLoss, Detail: "write-ahead log records 5-9 are unreadable", At: time.Date(2026, 10, 1, 16, 0, 0, 0, time.UTC)}
	if err := srv.opts.Store.FlagHours(context.Background(), []ledger.HourFlag{f}); err != nil {
		t.Fatal(err)
	}
	answer := func(query string) CostResponse {
		t.Helper()
		code, _, body := get(t, srv, "/api/v1/cost?"+query)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, code, body)
		}
		var resp CostResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	day := answer("from=2026-10-01&to=2026-10-03&step=day&groupBy=team")
	if len(day.Flags) != 1 || day.Flags[0].Detail != f.Detail || day.Flags[0].Reason != "wal_records_lost" {
		t.Errorf("flags %+v", day.Flags)
	}
	for _, p := range day.Points {
		if want := p.Start.Day() == 1; p.Flagged != want {
			t.Errorf("day %s %s: flagged %v, want %v", p.Start.Format(time.DateOnly), p.Team, p.Flagged, want)
		}
	}
	hour := answer("from=2026-10-01T12:00:00Z&to=2026-10-01T16:00:00Z&step=hour&team=ml")
	var got []int
	for _, p := range hour.Points {
		if p.Flagged {
			got = append(got, p.Start.Hour())
		}
	}
	if !slices.Equal(got, []int{13, 14}) {
		t.Errorf("flagged hours %v, want 13 and 14", got)
	}
	if other := answer("from=2026-10-02&to=2026-10-03"); len(other.Flags) != 0 {
		t.Errorf("a day with no flagged hour: %+v", other.Flags)
	}
	if other := answer("from=2026-10-01&to=2026-10-02&cluster=c2"); len(other.Flags) != 0 {
		t.Errorf("another cluster: %+v", other.Flags)
	}
}

func TestCostBadRequests(t *testing.T) {
	srv := testServer(t)
	f := func(query, wantErr string) {
		t.Helper()
		code, _, body := get(t, srv, "/api/v1/cost?"+query)
		if code != http.StatusBadRequest || !strings.Contains(body, wantErr) {
			t.Errorf("%s: %d %s; want 400 mentioning %q", query, code, body, wantErr)
		}
	}
	f("to=2026-10-02", `from=\"\" is not a time`)
	f("from=yesterday&to=2026-10-02", `from=\"yesterday\" is not a time`)
	f("from=2026-10-02&to=2026-10-01", "is not after from")
	f("from=2026-10-01&to=2026-10-02&step=week", `step=\"week\" is not a step`)
	f("from=2026-10-01&to=2026-10-02&groupBy=team,pod", `unknown dimension \"pod\"`)
	f("from=2020-01-01&to=2026-10-02", "is longer than")
}

func TestChargebackDownload(t *testing.T) {
	srv := testServer(t)
	code, h, body := get(t, srv, "/api/v1/reports/chargeback/2026-10?format=csv")
	if code != http.StatusOK || !strings.Contains(h.Get("Content-Disposition"), "chargeback-2026-10.csv") {
		t.Fatalf("status %d, headers %v", code, h)
	}
	if !strings.Contains(body, "\nml,48.000,48.000,24.000,0.000,50.0,330.240000,165.120000,") {
		t.Errorf("csv:\n%s", body)
	}
	if !strings.Contains(body, "TOTAL,96.000,96.000,24.000,0.000,25.0,660.480000") {
		t.Errorf("csv total:\n%s", body)
	}
	code, h, body = get(t, srv, "/api/v1/reports/chargeback/2026-10")
	if code != http.StatusOK || !strings.HasPrefix(body, "PK") || !strings.Contains(h.Get("Content-Type"), "spreadsheetml") {
		t.Errorf("xlsx: status %d, type %s", code, h.Get("Content-Type"))
	}
	// FOCUS 1.3: its EffectiveCost sums to the TOTAL.
	code, h, body = get(t, srv, "/api/v1/reports/chargeback/2026-10?format=focus")
	if code != http.StatusOK || !strings.Contains(h.Get("Content-Disposition"), `filename="focus-2026-10.csv"`) {
		t.Fatalf("focus: status %d, headers %v", code, h)
	}
	if effective := csvSum(t, body, "EffectiveCost", false); effective != 660_480_000 {
		t.Errorf("focus: EffectiveCost sums to %d, want the TOTAL 660.480000:\n%s", effective, body)
	}
	if code, _, body = get(t, srv, "/api/v1/reports/chargeback/October"); code != http.StatusBadRequest || !strings.Contains(body, "want YYYY-MM") {
		t.Errorf("bad month: %d %s", code, body)
	}
	if code, _, body = get(t, srv, "/api/v1/reports/chargeback/2026-10?format=pdf"); code != http.StatusBadRequest {
		t.Errorf("bad format: %d %s", code, body)
	}
	// A month the ledger has nothing of is not a zero invoice.
	if code, _, body = get(t, srv, "/api/v1/reports/chargeback/2026-09?format=csv"); code != http.StatusNotFound || !strings.Contains(body, "holds no rows for 2026-09") {
		t.Errorf("empty month: %d %s; want 404 saying so", code, body)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	srv := testServer(t)
	if code, _, body := get(t, srv, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	get(t, srv, "/api/v1/cost?from=x")
	srv.PublishStats(ingest.PipelineStats{Ingest: ingest.Stats{Samples: 10, Invalid: 2},
		Attribution: attribution.Stats{Accepted: 8, Rejected: map[attribution.Reason]uint64{attribution.ReasonLate: 3}},
		Rejected:    map[[2]string]uint64{{"vmagent", "late"}: 4}})
	_, _, body := get(t, srv, "/metrics")
	for _, want := range []string{
		`gpuledger_http_requests_total{path="/api/v1/cost",code="400"} 1`,
		`gpuledger_http_requests_total{path="/healthz",code="200"} 1`,
		`gpuledger_ingest_samples_total 10`,
		`gpuledger_ingest_rejected_samples_total{reason="late"} 3`,
		`gpuledger_ingest_rejected_samples_total{reason="invalid_line"} 2`,
		`gpuledger_http_request_duration_seconds_bucket`,
		`gpuledger_clickhouse_spool_pending_records 7`,
		`gpuledger_remote_write_rejected_samples_total{sender="vmagent",reason="late"} 4`,
		`gpuledger_ready 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if code, _, _ := get(t, srv, "/nope"); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestWorkloads(t *testing.T) {
	srv := testServer(t)
	code, _, body := get(t, srv, "/api/v1/workloads?from=2026-10&to=2026-11&limit=1")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var resp struct {
		Workloads []WorkloadPoint `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Workloads) != 1 || resp.Workloads[0].Name != "b" || resp.Workloads[0].IdleGPUHours != 1 || resp.Workloads[0].IdleCost != "0.000005" {
		t.Errorf("workloads %+v", resp.Workloads)
	}
	if code, _, body := get(t, srv, "/api/v1/workloads?from=2026-10&to=2026-11&limit=0"); code != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Errorf("limit=0: %d %s", code, body)
	}
}

func TestIdleGPUHoursNeverNegative(t *testing.T) {
	// 0.3 - 0.1 - 0.2 is -2.8e-17 in floats: a busy workload is 0 h idle.
	busy := ledger.WorkloadRow{GPUSeconds: 0.3, ActiveGPUSeconds: 0.1, UnmeasuredGPUSeconds: 0.2}
	if h := idleGPUHours(busy); h != 0 {
		t.Errorf("a fully busy workload is %g h idle, want 0", h)
	}
	if h := idleGPUHours(ledger.WorkloadRow{GPUSeconds: 7200, ActiveGPUSeconds: 1800, UnmeasuredGPUSeconds: 1800}); h != 1 {
		t.Errorf("idle %g h, want 1", h)
	}
}

type fakeIngest struct {
	err     error
	res     ingest.Result
	got     [][]byte
	senders []string
}

func (f *fakeIngest) RemoteWrite(_ context.Context, sender string, body []byte) (ingest.Result, error) {
	f.got = append(f.got, bytes.Clone(body)) // the server reuses body
	f.senders = append(f.senders, sender)
	return f.res, f.err
}

func post(t *testing.T, srv *Server, body string, header map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestRemoteWriteBodies: over HTTP, a body sent with its length and one sent
// chunked (no length) reach ingest byte for byte; a chunked one over the
// limit is refused with 413, as one whose length says so.
func TestRemoteWriteBodies(t *testing.T) {
	store := testStore(t)
	fi := &fakeIngest{}
	hs := httptest.NewServer(New(Options{Store: store, Ingest: fi, MaxRemoteWriteBytes: 10}).Handler())
	defer hs.Close()
	send := func(body io.Reader, length int64) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/api/v1/write", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A reader of its own hides the length: the client sends it chunked.
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	for _, c := range []struct {
		name   string
		body   io.Reader
		length int64
		code   int
		want   string
	}{
		{"with its length", strings.NewReader("0123456789"), 10, http.StatusNoContent, "0123456789"},
		{"chunked", chunked("abc"), -1, http.StatusNoContent, "abc"},
		{"chunked, at the limit", chunked("9876543210"), -1, http.StatusNoContent, "9876543210"},
		{"chunked, over the limit", chunked("0123456789x"), -1, http.StatusRequestEntityTooLarge, ""},
		{"its length over the limit", strings.NewReader("0123456789x"), 11, http.StatusRequestEntityTooLarge, ""},
	} {
		fi.got = nil
		code := send(c.body, c.length)
		var got string
		if len(fi.got) == 1 {
			got = string(fi.got[0])
		}
		if code != c.code || got != c.want || len(fi.got) > 1 {
			t.Errorf("%s: %d, ingest got %q; want %d, %q", c.name, code, fi.got, c.code, c.want)
		}
	}
}

// TestRemoteWriteStatus: 204 when taken; 400 and 413 for bodies the sender
// must drop; 500 only for failures a retry can get past; 404 when off.
func TestRemoteWriteStatus(t *testing.T) {
	store := testStore(t)
	fi := &fakeIngest{}
	srv := New(Options{Store: store, Ingest: fi, MaxRemoteWriteBytes: 10})
	if code, body := post(t, srv, "ok", nil); code != http.StatusNoContent || len(fi.got) != 1 {
		t.Errorf("good body: %d %s", code, body)
	}
	if code, body := post(t, srv, "0123456789x", nil); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "10 bytes") {
		t.Errorf("big body: %d %s", code, body)
	}
	if code, body := post(t, srv, "x", map[string]string{"Content-Encoding": "zstd"}); code != http.StatusUnsupportedMediaType || !strings.Contains(body, "snappy") {
		t.Errorf("zstd: %d %s", code, body)
	}
	fi.err = &ingest.InputError{Msg: "not snappy"}
	if code, body := post(t, srv, "x", nil); code != http.StatusBadRequest || !strings.Contains(body, "not snappy") {
		t.Errorf("bad body: %d %s", code, body)
	}
	fi.err = errors.New("write-ahead log: no space left on device; retry later")
	if code, _ := post(t, srv, "x", nil); code != http.StatusServiceUnavailable {
		t.Errorf("log failure: %d, want 503 so that the sender retries", code)
	}
	fi.err = errInflight
	if code, body := post(t, srv, "x", nil); code != http.StatusTooManyRequests || !strings.Contains(body, "retry") {
		t.Errorf("busy: %d %s, want 429", code, body)
	}
	fi.err = nil
	fi.res = ingest.Result{Accepted: 10, Late: 2, TooNew: 1, SettledUntil: time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)}
	if code, body := post(t, srv, "x", nil); code != http.StatusBadRequest || !strings.Contains(body, "10 sample(s) accepted; 3 rejected: 2 for settled hours (before 2026-10-01T05:00:00Z), 1 stamped") {
		t.Errorf("late samples: %d %s, want 400 saying what was kept", code, body)
	}
	fi.res = ingest.Result{Accepted: 10, OutOfOrder: 4, SettledUntil: time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)}
	if code, body := post(t, srv, "x", nil); code != http.StatusBadRequest || !strings.Contains(body, "4 out of order") || !strings.Contains(body, "-ingest.reorderWindow") {
		t.Errorf("out-of-order samples: %d %s, want 400 saying how many and what to change", code, body)
	}
	fi.res = ingest.Result{Accepted: 3, SettledUntil: time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)}
	fi.res.Invalid[0], fi.res.Invalid[ingest.NumBadValueReasons-1] = 2, 1
	if code, body := post(t, srv, "x", nil); code != http.StatusBadRequest || !strings.Contains(body, "3 rejected") ||
		!strings.Contains(body, "3 with a value or labels no exporter sends (2 nan, 1 invalid_utf8") {
		t.Errorf("bad values: %d %s, want 400 naming each reason", code, body)
	}
	off := New(Options{Store: store})
	if code, _ := post(t, off, "x", nil); code != http.StatusNotFound {
		t.Errorf("disabled: %d", code)
	}
}

// blockingIngest holds each body until release is closed.
type blockingIngest struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingIngest) RemoteWrite(ctx context.Context, _ string, _ []byte) (ingest.Result, error) {
	b.started <- struct{}{}
	<-b.release
	return ingest.Result{}, nil
}

// TestInflightCountsDecodedBytes: a body of a few bytes whose snappy header
// says 60 MiB counts 60 MiB in flight: with 100 MiB allowed, a second such
// body while the first is ingested is answered 429, and once the first is
// done it is taken. (Before, the limit counted the bytes sent: 32 bombs of
// 3 KB each took 2.4 GB.)
func TestInflightCountsDecodedBytes(t *testing.T) {
	store := testStore(t)
	bi := &blockingIngest{started: make(chan struct{}, 2), release: make(chan struct{})}
	srv := New(Options{Store: store, Ingest: bi, MaxInflightBytes: 100 << 20})
	bomb := string(binary.AppendUvarint(nil, 60<<20)) + "\x00\x00\x00"
	first := make(chan int)
	go func() {
		code, _ := post(t, srv, bomb, nil)
		first <- code
	}()
	<-bi.started
	if code, body := post(t, srv, bomb, nil); code != http.StatusTooManyRequests {
		t.Errorf("a second 60 MiB body while one is in flight: %d %s, want 429", code, body)
	}
	close(bi.release)
	if code := <-first; code != http.StatusNoContent {
		t.Errorf("the first: %d", code)
	}
	if code, body := post(t, srv, bomb, nil); code != http.StatusNoContent {
		t.Errorf("the second once the first is done: %d %s", code, body)
	}
}

// TestMetricsExposition: /metrics is what Prometheus expects: every
// family with HELP and TYPE, the request durations as a Prometheus
// histogram (le buckets, which histogram_quantile reads), the Go runtime's
// and the process's families, and nothing promtool check metrics (its
// linter, promlint) finds wrong; each family of the server's own is
// listed with its type and help.
func TestMetricsExposition(t *testing.T) {
	srv := testServer(t)
	get(t, srv, "/healthz")
	srv.PublishStats(ingest.PipelineStats{Ingest: ingest.Stats{Samples: 10, Invalid: 2}, WALCorruptRecords: map[string]uint64{"0001": 1},
		Attribution: attribution.Stats{Accepted: 8, Rejected: map[attribution.Reason]uint64{attribution.ReasonLate: 3}},
		Rejected:    map[[2]string]uint64{{"vmagent", "late"}: 4}})
	_, _, body := get(t, srv, "/metrics")
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("/metrics does not parse as the text exposition format: %v\n%s", err, body)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	types := map[string]string{}
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(strings.TrimSpace(rest), " ")
			types[name] = typ
		}
	}
	for name, typ := range types {
		if strings.HasPrefix(name, "gpuledger_") {
			if f, ok := families[name]; !ok || f.typ != typ {
				t.Errorf("family %s of type %s: want it in api.families with that type", name, typ)
			}
		}
	}
	for _, want := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "gpuledger_http_request_duration_seconds",
		"gpuledger_ingest_buffered_samples", "gpuledger_wal_corrupt_records_total"} {
		if types[want] == "" {
			t.Errorf("/metrics has no TYPE line for %s", want)
		}
	}
	if types["gpuledger_http_request_duration_seconds"] != "histogram" || !strings.Contains(body, `gpuledger_http_request_duration_seconds_bucket{path="/healthz",le="+Inf"} 1`) ||
		strings.Contains(body, "vmrange") {
		t.Errorf("request durations are not a Prometheus histogram with le buckets:\n%s", body)
	}
	if types["gpuledger_ingest_buffered_samples"] != "gauge" || types["gpuledger_ingest_samples_total"] != "counter" {
		t.Errorf("types: buffered samples %q, samples %q; want gauge and counter", types["gpuledger_ingest_buffered_samples"], types["gpuledger_ingest_samples_total"])
	}
}

// TestRemoteWrite2: a Remote-Write 2.0 request (its Content-Type's proto)
// reaches ingest as the remote-write 1.0 body of its series, and the
// answer says what was written; a Content-Type that is no remote write is
// answered 415, so that a sender can fall back.
func TestRemoteWrite2(t *testing.T) {
	fi := &fakeIngest{}
	srv := New(Options{Store: testStore(t), Ingest: fi})
	// symbols "", __name__, DCGM_FI_DEV_GPU_UTIL, gpu, 0; one series
	// (1,2,3,4) with a sample of 87 at 1700000000000.
	var raw []byte
	for _, s := range []string{"", "__name__", "DCGM_FI_DEV_GPU_UTIL", "gpu", "0"} {
		raw = append(append(raw, 0x22, byte(len(s))), s...)
	}
	sample := append([]byte{0x09}, binary.LittleEndian.AppendUint64(nil, math.Float64bits(87))...)
	sample = binary.AppendUvarint(append(sample, 0x10), 1_700_000_000_000)
	series := append([]byte{0x0a, 4, 1, 2, 3, 4, 0x12, byte(len(sample))}, sample...)
	raw = append(append(raw, 0x2a, byte(len(series))), series...)
	body := snappy.Encode(nil, raw)

	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	req.Header.Set("Content-Encoding", "snappy")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent || rec.Header().Get("X-Prometheus-Remote-Write-Samples-Written") != "1" ||
		rec.Header().Get("X-Prometheus-Remote-Write-Histograms-Written") != "0" {
		t.Fatalf("2.0 request: %d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
	// A 1.0 WriteRequest: timeseries (1) of labels (1) and a sample (2).
	v1, err := snappy.Decode(nil, fi.got[0])
	label := []byte("\x0a\x08__name__\x12\x14DCGM_FI_DEV_GPU_UTIL")
	if err != nil || len(v1) == 0 || v1[0] != 0x0a || !bytes.Contains(v1, label) || !bytes.Contains(v1, []byte("\x0a\x03gpu\x12\x010")) || !bytes.HasSuffix(v1, sample) {
		t.Errorf("ingest got %x (%v), want a 1.0 request of the series", v1, err)
	}
	for _, c := range []struct{ ctype, want string }{
		{"text/plain", "not a remote-write request"},
		{"application/x-protobuf;proto=io.prometheus.write.v3.Request", "not supported"},
	} {
		if code, body := post(t, srv, "x", map[string]string{"Content-Type": c.ctype}); code != http.StatusUnsupportedMediaType || !strings.Contains(body, c.want) {
			t.Errorf("Content-Type %s: %d %s", c.ctype, code, body)
		}
	}
	if code, body := post(t, srv, "\xff", map[string]string{"Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"}); code != http.StatusBadRequest || !strings.Contains(body, "remote-write 2.0") {
		t.Errorf("a broken 2.0 body: %d %s", code, body)
	}
}
