package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
	"github.com/gpuledger/gpuledger/sim"
)

var simStart = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

type simScrape struct {
	at   time.Time
	body []byte
}

// simScrapes renders hours of the example cluster's telemetry, with jobs
// started a day before so that GPUs are busy from the first scrape.
func simScrapes(t testing.TB, hours int) (*attribution.Model, []simScrape) {
	t.Helper()
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sim.NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := simStart.Add(time.Duration(hours) * time.Hour)
	if _, err := sm.Run(sim.GenerateMix(cfg, simStart.Add(-24*time.Hour), end.Sub(simStart)+24*time.Hour, 0.85, 5), simStart.Add(-24*time.Hour), end); err != nil {
		t.Fatal(err)
	}
	tel := sim.NewTelemetry(sm.Cluster, simStart, end, 15*time.Second)
	var out []simScrape
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		out = append(out, simScrape{at, body})
	}
	return sm.Attribution, out
}

// toRemoteWrite turns scrapes into one snappy-compressed WriteRequest,
// series by series (each series' samples together), as vmagent batches.
func toRemoteWrite(t testing.TB, scrapes []simScrape) []byte {
	t.Helper()
	type series struct {
		labels  []prompb.Label
		samples []prompb.Sample
	}
	bySeries := map[string]*series{}
	var order []string
	var rows prometheus.Rows
	for _, sc := range scrapes {
		rows.UnmarshalWithErrLogger(string(sc.body), func(s string) { t.Fatal(s) })
		for _, r := range rows.Rows {
			var key strings.Builder
			key.WriteString(r.Metric)
			labels := []prompb.Label{{Name: "__name__", Value: r.Metric}}
			for _, tag := range r.Tags {
				key.WriteString("," + tag.Key + "=" + tag.Value)
				labels = append(labels, prompb.Label{Name: strings.Clone(tag.Key), Value: strings.Clone(tag.Value)})
			}
			s := bySeries[key.String()]
			if s == nil {
				s = &series{labels: labels}
				bySeries[key.String()] = s
				order = append(order, key.String())
			}
			s.samples = append(s.samples, prompb.Sample{Value: r.Value, Timestamp: sc.at.UnixMilli()})
		}
	}
	var wr prompb.WriteRequest
	for _, k := range order {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: bySeries[k].labels, Samples: bySeries[k].samples})
	}
	return snappy.Encode(nil, wr.MarshalProtobuf(nil))
}

func emitAll(t testing.TB, a *attribution.Attributor, until time.Time) ([]ledger.Row, []ledger.WorkloadRow) {
	t.Helper()
	return a.Emit(until.UnixMilli())
}

// TestRemoteWriteMatchesExposition: the same telemetry, as scrapes or as
// remote-write requests of four scrapes each (series-major, as vmagent
// batches), gives the same ledger.
func TestRemoteWriteMatchesExposition(t *testing.T) {
	m, scrapes := simScrapes(t, 2)
	a, _ := attribution.New(m, attribution.Options{StartMs: simStart.UnixMilli()})
	var p Parser
	for _, sc := range scrapes {
		if err := p.ParseExposition(sc.body, sc.at.UnixMilli(), a); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := attribution.New(m, attribution.Options{StartMs: simStart.UnixMilli()})
	var q Parser
	for i := 0; i < len(scrapes); i += 4 {
		if err := q.ParseRemoteWrite(toRemoteWrite(t, scrapes[i:min(i+4, len(scrapes))]), Limits{}, b); err != nil {
			t.Fatal(err)
		}
	}
	end := simStart.Add(2 * time.Hour)
	rowsA, wlA := emitAll(t, a, end)
	rowsB, wlB := emitAll(t, b, end)
	if diff := cmp.Diff(rowsA, rowsB, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("remote write ledger differs (-scrapes +remote write):\n%s", diff)
	}
	if diff := cmp.Diff(wlA, wlB, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("remote write workloads differ:\n%s", diff)
	}
	if len(b.Stats().Rejected) != 0 || q.Stats().Samples != p.Stats().Samples {
		t.Errorf("remote write: %d samples, rejected %v; scrapes: %d samples", q.Stats().Samples, b.Stats().Rejected, p.Stats().Samples)
	}
}

func TestRemoteWriteBadBodies(t *testing.T) {
	f := func(name string, body []byte, limits Limits, want string) {
		t.Helper()
		var p Parser
		err := p.ParseRemoteWrite(body, limits, &recorder{})
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want an InputError containing %q", name, err, want)
		}
	}
	f("not snappy", []byte("plain text"), Limits{}, "not snappy-compressed")
	f("not protobuf", snappy.Encode(nil, []byte{0xff, 0xff, 0xff}), Limits{}, "not a protobuf WriteRequest")
	big := snappy.Encode(nil, bytes.Repeat([]byte{0}, 1<<20))
	f("too big decoded", big, Limits{MaxDecodedBytes: 1000}, "within 1000 bytes")
	_, scrapes := simScrapes(t, 1)
	f("too many series", toRemoteWrite(t, scrapes[:1]), Limits{MaxSeries: 10}, "the limit is 10")
}

func TestExportLines(t *testing.T) {
	body := `{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n1","namespace":"a","pod":"p"},"values":[10,"NaN",30],"timestamps":[3000,1000,2000]}
{"metric":{"__name__":"DCGM_FI_DEV_POWER_USAGE","gpu":"0","Hostname":"n1"},"values":[100.5],"timestamps":[1000]}
{"metric":{"__name__":"up","job":"x"},"values":[1],"timestamps":[1000]}
{"metric":{"gpu":"0"},"values":[1],"timestamps":[1000]}
not json
{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"1","Hostname":"n1"},"values":[1,2],"timestamps":[1000]}
`
	var p Parser
	var r recorder
	err := p.ParseExportLines([]byte(body), &r)
	if err == nil || !strings.Contains(err.Error(), "3 invalid export line(s)") || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("error %v: want 3 invalid lines, the first line 4", err)
	}
	var got []string
	for _, s := range r.samples {
		got = append(got, fmt.Sprintf("%d %s %v %s", s.TimeMs, s.Pod, s.Value, fieldName(s.Field)))
	}
	// In time order, each series' order kept; the NaN is refused and
	// counted.
	want := []string{"1000  100.5 power", "2000 p 30 util", "3000 p 10 util"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if n := p.Stats().BadValues[badNaN]; n != 1 {
		t.Errorf("NaN values counted: %d, want 1", n)
	}
	if p.Stats().Skipped != 1 {
		t.Errorf("skipped %d, want 1 (up)", p.Stats().Skipped)
	}
}

func fieldName(f attribution.Field) string {
	return map[attribution.Field]string{attribution.FieldGPUUtil: "util", attribution.FieldPowerUsage: "power"}[f]
}

// writeScrapesFile writes scrapes as one exposition file with timestamps.
func writeScrapesFile(t testing.TB, scrapes []simScrape) string {
	t.Helper()
	var b []byte
	for _, sc := range scrapes {
		b = sim.AppendTimestamped(b, sc.body, sc.at.UnixMilli())
	}
	path := filepath.Join(t.TempDir(), "scrapes.prom")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// failingSource fails its nth Fetch, as an interrupted backfill would.
type failingSource struct {
	Source
	n, calls int
}

func (f *failingSource) Fetch(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error {
	f.calls++
	if f.calls == f.n {
		return errors.New("connection reset")
	}
	return f.Source.Fetch(ctx, from, to, p, sink)
}

func openStore(t testing.TB) ledger.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBackfillResumes: a backfill interrupted after its first chunk and run
// again leaves the ledger an uninterrupted one leaves.
func TestBackfillResumes(t *testing.T) {
	testenv.Slow(t, "a backfill interrupted and resumed at every checkpoint")
	m, scrapes := simScrapes(t, 3)
	src := &FileSource{Path: writeScrapesFile(t, scrapes)}
	end := simStart.Add(3 * time.Hour)
	opts := BackfillOptions{Source: src, Model: m, Start: simStart, End: end}

	whole := openStore(t)
	opts.Store = whole
	if _, err := Backfill(context.Background(), opts); err != nil {
		t.Fatal(err)
	}

	resumed := openStore(t)
	opts.Store = resumed
	// Fetch 1 primes, 2 reads the first hour, 3 the second (whose data
	// closes the first), 4 the third: it fails.
	opts.Source = &failingSource{Source: src, n: 4}
	if _, err := Backfill(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
		t.Fatalf("interrupted backfill: %v", err)
	}
	cp, _ := resumed.Checkpoint(context.Background(), CheckpointName(src))
	if !cp.Equal(simStart.Add(time.Hour)) {
		t.Fatalf("checkpoint after the interruption %v, want %v", cp, simStart.Add(time.Hour))
	}
	opts.Source = src
	prog, err := Backfill(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !prog.Resumed.Equal(simStart.Add(time.Hour)) {
		t.Errorf("resumed at %v, want %v", prog.Resumed, simStart.Add(time.Hour))
	}
	rowsA, wlA := ledgertest.Dump(t, whole, simStart, end)
	rowsB, wlB := ledgertest.Dump(t, resumed, simStart, end)
	if diff := cmp.Diff(rowsA, rowsB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("resumed ledger differs (-whole +resumed):\n%s", diff)
	}
	if diff := cmp.Diff(wlA, wlB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("resumed workloads differ:\n%s", diff)
	}
	if len(rowsA) == 0 {
		t.Fatal("empty ledger")
	}
	// Done: a third run does nothing.
	if prog, err := Backfill(context.Background(), opts); err != nil || prog.Done != prog.Total || prog.Rows != 0 {
		t.Errorf("third run: %+v, %v", prog, err)
	}
}

type flakyStore struct {
	ledger.Store
	fail bool
}

func (f *flakyStore) WriteHours(ctx context.Context, rows []ledger.Row, wls []ledger.WorkloadRow) error {
	if f.fail {
		return errors.New("database is locked")
	}
	return f.Store.WriteHours(ctx, rows, wls)
}

func FuzzParseRemoteWrite(f *testing.F) {
	f.Add(snappy.Encode(nil, (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: MetricGPUUtil}, {Name: "gpu", Value: "0"}, {Name: "Hostname", Value: "n"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 2}},
	}}}).MarshalProtobuf(nil)))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Parser
		var r recorder
		err := p.ParseRemoteWrite(body, Limits{MaxDecodedBytes: 1 << 20}, &r)
		var ie *InputError
		if err != nil && !errors.As(err, &ie) {
			t.Fatalf("error %v is not an InputError", err)
		}
		for _, s := range r.samples {
			if s.Node == "" || s.GPU == "" {
				t.Fatalf("sample without device: %+v", s)
			}
		}
	})
}

func FuzzParseExportLines(f *testing.F) {
	f.Add([]byte(`{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n"},"values":[1,"NaN"],"timestamps":[1,2]}`))
	f.Add([]byte("{}\n{\"metric\":{}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Parser
		var r recorder
		_ = p.ParseExportLines(body, &r)
		for i := 1; i < len(r.samples); i++ {
			if r.samples[i].TimeMs < r.samples[i-1].TimeMs {
				t.Fatalf("samples out of time order: %+v", r.samples)
			}
		}
	})
}
