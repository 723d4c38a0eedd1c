package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
	"github.com/gpuledger/gpuledger/sim"
)

// simStart is a recent hour: VictoriaMetrics keeps what is inside its
// retention, and these tests run on any day.
var simStart = time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)

type scrape struct {
	at   time.Time
	body []byte
}

// renderScrapes renders the example cluster's telemetry for a span, jobs started
// a day earlier so that GPUs are held from the first scrape.
func renderScrapes(t *testing.T, span time.Duration) (*config.Config, []scrape) {
	t.Helper()
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sim.NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := simStart.Add(span)
	if _, err := sm.Run(sim.GenerateMix(cfg, simStart.Add(-24*time.Hour), span+24*time.Hour, 0.85, 11), simStart.Add(-24*time.Hour), end); err != nil {
		t.Fatal(err)
	}
	tel := sim.NewTelemetry(sm.Cluster, simStart, end, 15*time.Second)
	var out []scrape
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			return cfg, out
		}
		out = append(out, scrape{at, body})
	}
}

// captureModel is the example cluster's model plus the nodes of the real
// dcgm-exporter capture in ../shared/data, priced as AWS T4 and A10G.
func captureModel(t *testing.T, cfg *config.Config) *attribution.Model {
	t.Helper()
	m, err := cfg.AttributionModel("")
	if err != nil {
		t.Fatal(err)
	}
	m.GPUs = append(m.GPUs,
		attribution.GPU{Node: "424773df46e0", Index: "0", Model: "Tesla T4", Flavor: "t4", RateMicrosPerHour: 526_000},
		attribution.GPU{Node: "551bdf382151", Index: "0", Model: "Tesla T4", Flavor: "t4", RateMicrosPerHour: 526_000},
		attribution.GPU{Node: "ip-11111", Index: "0", Model: "NVIDIA A10G", Flavor: "a10g", RateMicrosPerHour: 1_006_000},
	)
	return m
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

func sameLedger(t *testing.T, what string, a, b ledger.Store, from, to time.Time) {
	t.Helper()
	rowsA, wlA := ledgertest.Dump(t, a, from, to)
	rowsB, wlB := ledgertest.Dump(t, b, from, to)
	if len(rowsA) == 0 {
		t.Fatalf("%s: the reference ledger is empty", what)
	}
	if diff := cmp.Diff(rowsA, rowsB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("%s: ledgers differ (-files +other):\n%s", what, diff)
	}
	if diff := cmp.Diff(wlA, wlB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("%s: workloads differ (-files +other):\n%s", what, diff)
	}
}

// TestVictoriaMetricsBackfill imports two hours of the simulated cluster's
// telemetry and the real capture into a real VictoriaMetrics, backfills
// from its /api/v1/export, and gets the ledger the same data gives from a
// file. Then a backfill cancelled after its first hour and run again gets
// the same ledger too.
func TestVictoriaMetricsBackfill(t *testing.T) {
	cfg, scrapes := renderScrapes(t, 2*time.Hour)
	model := captureModel(t, cfg)
	vm, path := loadVM(t, scrapes, sim.AppendTimestamped(nil, testenv.ReadData(t, "dcgm-exporter/samples/t4-a10g-datadog-fixture.prom"), simStart.Add(5*time.Second).UnixMilli()))

	end := simStart.Add(2 * time.Hour)
	opts := ingest.BackfillOptions{Model: model, Start: simStart, End: end}
	files := openStore(t)
	opts.Store, opts.Source = files, &ingest.FileSource{Path: path}
	fromFile, err := ingest.Backfill(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	fromVM := openStore(t)
	src := &ingest.VMExport{BaseURL: vm, Match: ingest.DefaultMatch, Client: http.DefaultClient}
	opts.Store, opts.Source = fromVM, src
	got, err := ingest.Backfill(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attribution.Accepted != fromFile.Attribution.Accepted || got.Attribution.Accepted == 0 {
		t.Errorf("VictoriaMetrics gave %d samples, the file %d", got.Attribution.Accepted, fromFile.Attribution.Accepted)
	}
	sameLedger(t, "VictoriaMetrics export", files, fromVM, simStart, end)

	// The capture's T4s were seen (unallocated, no pod) and priced.
	rows, _ := ledgertest.Dump(t, fromVM, simStart, end)
	var t4 bool
	for _, r := range rows {
		t4 = t4 || (r.Flavor == "t4" && r.Team == ledger.TeamUnallocated && r.CostMicros == 2*526_000)
	}
	if !t4 {
		t.Error("no unallocated t4 row for the capture's two T4 GPUs")
	}

	// Interrupted after the first hour, then run again.
	resumed := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	opts.Store, opts.Chunk = resumed, time.Hour
	opts.Progress = func(ingest.BackfillProgress) { cancel() }
	_, err = ingest.Backfill(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled backfill: %v", err)
	}
	opts.Progress = nil
	if _, err := ingest.Backfill(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	sameLedger(t, "resumed VictoriaMetrics backfill", files, resumed, simStart, end)
}

// TestVmagentRemoteWrite has a real vmagent scrape a simulated exporter (each
// scrape the next 15 s of the cluster, with timestamps) and remote-write to
// gpuledger's /api/v1/write; the ledger equals the one the same scrapes give
// from a file. vmagent runs as it ships, without -remoteWrite.forcePromProto:
// its first block, in VictoriaMetrics' zstd protocol, is answered 415 and
// it sends it again, and everything after, in Prometheus' protocol.
func TestVmagentRemoteWrite(t *testing.T) {
	testenv.Slow(t, "vmagent remote-writing a day of scrapes")
	bin := vmBinary(t, "vmagent")
	cfg, scrapes := renderScrapes(t, 10*time.Minute)
	model, err := cfg.AttributionModel("")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := served.Add(1) - 1
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if int(i) < len(scrapes) {
			w.Write(sim.AppendTimestamped(nil, scrapes[i].body, scrapes[i].at.UnixMilli()))
		}
	}))
	defer exporter.Close()

	store := openStore(t)
	// The server's clock follows the scrapes served: each is 15 s of
	// simulated time, served once a second.
	clock := func() time.Time {
		i := min(int(served.Load()), len(scrapes)-1)
		return scrapes[i].at.Add(15 * time.Second)
	}
	pl, err := ingest.NewPipeline(model, attribution.Options{}, store, ingest.PipelineOptions{Dir: t.TempDir(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close(context.Background())
	gl := httptest.NewServer(api.New(api.Options{Store: store, Ingest: pl}).Handler())
	defer gl.Close()

	dir := t.TempDir()
	scrapeCfg := filepath.Join(dir, "scrape.yml")
	if err := os.WriteFile(scrapeCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: dcgm
    honor_timestamps: true
    static_configs:
      - targets: [%q]
`, exporter.Listener.Addr().String())), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	start(t, "http://"+addr+"/health", bin,
		"-httpListenAddr="+addr,
		"-promscrape.config="+scrapeCfg,
		"-remoteWrite.url="+gl.URL+"/api/v1/write",
		"-remoteWrite.queues=4", // several queues: requests may arrive out of order
		"-remoteWrite.flushInterval=200ms",
		"-remoteWrite.tmpDataPath="+filepath.Join(dir, "queue"),
		"-loggerLevel=WARN")

	// The reference: the same scrapes from a file.
	var p ingest.Parser
	want, _ := attribution.New(model, attribution.Options{StartMs: simStart.UnixMilli()})
	for _, sc := range scrapes {
		if err := p.ParseExposition(sc.body, sc.at.UnixMilli(), want); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Duration(len(scrapes))*time.Second + 60*time.Second)
	for {
		is := pl.Stats().Ingest
		if is.Samples >= p.Stats().Samples {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vmagent delivered %d of %d samples (%d scrapes served)", is.Samples, p.Stats().Samples, served.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
	end := simStart.Add(time.Hour)
	if err := pl.FlushUntil(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	rows, wls := want.Emit(end.UnixMilli())
	files := openStore(t)
	if err := files.WriteHours(context.Background(), rows, wls); err != nil {
		t.Fatal(err)
	}
	sameLedger(t, "vmagent remote write", files, store, simStart, end)
	ps := pl.Stats()
	is, as := ps.Ingest, ps.Attribution
	if len(as.Rejected) != 0 || len(ps.Rejected) != 0 {
		t.Errorf("rejected samples: %v, %v", as.Rejected, ps.Rejected)
	}
	t.Logf("vmagent: %d scrapes served, %d samples, %d stale markers, %d other series skipped", served.Load(), is.Samples, is.StaleMarkers, is.Skipped)
}

var _ = io.Discard
