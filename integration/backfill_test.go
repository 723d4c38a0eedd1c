package integration_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/sim"
)

// loadVM imports scrapes (and extra exposition with timestamps) into a fresh
// VictoriaMetrics, writes the same data to a file, and returns the server's
// URL and the file.
func loadVM(t *testing.T, scrapes []scrape, extra []byte) (vm, file string) {
	t.Helper()
	vm = startVictoriaMetrics(t)
	var body []byte
	for _, sc := range scrapes {
		body = sim.AppendTimestamped(body, sc.body, sc.at.UnixMilli())
	}
	body = append(body, extra...)
	file = filepath.Join(t.TempDir(), "telemetry.prom")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	post(t, vm+"/api/v1/import/prometheus", "text/plain", body)
	resp, err := http.Get(vm + "/internal/force_flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return vm, file
}

// TestPrometheusQueryRangeFallback backfills through the Prometheus HTTP
// API (VictoriaMetrics serves it too). query_range evaluates each series at
// every step with a lookback, so a pod's series lingers a little after the
// pod is gone: the ledger is close to the raw one, not equal. Every hour
// still reconciles exactly, and each team's cost stays within 2%.
func TestPrometheusQueryRangeFallback(t *testing.T) {
	cfg, scrapes := renderScrapes(t, 2*time.Hour)
	vm, file := loadVM(t, scrapes, nil)
	model, _ := cfg.AttributionModel("")
	end := simStart.Add(2 * time.Hour)
	opts := ingest.BackfillOptions{Model: model, Start: simStart, End: end}
	raw := openStore(t)
	opts.Store, opts.Source = raw, &ingest.FileSource{Path: file}
	if _, err := ingest.Backfill(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	src, err := ingest.NewSource("prometheus+"+vm, nil, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	viaProm := openStore(t)
	opts.Store, opts.Source = viaProm, src
	prog, err := ingest.Backfill(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if prog.Attribution.Accepted == 0 {
		t.Fatal("query_range gave no samples")
	}
	want, got := teamCosts(t, raw, model.HourlyCostMicros(), simStart, end), teamCosts(t, viaProm, model.HourlyCostMicros(), simStart, end)
	for team, w := range want {
		if w < 1_000_000 {
			continue
		}
		if d := float64(got[team]-w) / float64(w); d > 0.02 || d < -0.02 {
			t.Errorf("team %s: %d via query_range, %d raw (%.1f%%)", team, got[team], w, 100*d)
		}
	}
}

// teamCosts sums s's cost per team over [from, to), and checks that each
// hour sums to the cluster's hourly cost to the micro-unit.
func teamCosts(t *testing.T, s ledger.Store, hourly int64, from, to time.Time) map[string]int64 {
	t.Helper()
	rows, err := s.Query(context.Background(), ledger.Query{From: from, To: to, Step: ledger.StepHour, GroupBy: []ledger.Dimension{ledger.DimTeam}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	hours := map[time.Time]int64{}
	for _, r := range rows {
		out[r.Team] += r.CostMicros
		hours[r.Hour] += r.CostMicros
	}
	for h, c := range hours {
		if c != hourly {
			t.Errorf("hour %s sums to %d, want %d", h, c, hourly)
		}
	}
	return out
}

// TestIngestKilledAndRerun runs the gpuledger binary's ingest against a real
// VictoriaMetrics, kills it (SIGKILL) once it has checkpointed an hour, runs
// it again, and gets the ledger an uninterrupted backfill writes.
func TestIngestKilledAndRerun(t *testing.T) {
	testenv.Slow(t, "gpuledger ingest killed and rerun as processes")
	cfg, scrapes := renderScrapes(t, 6*time.Hour)
	vm, file := loadVM(t, scrapes, nil)
	model, _ := cfg.AttributionModel("")
	end := simStart.Add(6 * time.Hour)

	bin := filepath.Join(t.TempDir(), "gpuledger")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/gpuledger").CombinedOutput(); err != nil {
		t.Fatalf("build gpuledger: %v\n%s", err, out)
	}
	// Each request (an hour) is held 300 ms on its way to VictoriaMetrics,
	// so that the kill lands between checkpoints however fast the machine.
	target, _ := url.Parse(vm)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // the kill cuts a request short
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		rp.ServeHTTP(w, r)
	}))
	defer slow.Close()
	vm = slow.URL
	ledgerDir := t.TempDir()
	args := []string{"ingest", "-config", "../examples/cluster.yaml", "-from", vm,
		"-start", simStart.Format(time.RFC3339), "-end", end.Format(time.RFC3339), "-ledger.path", ledgerDir}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// ingest reports progress after each chunk (an hour; not after the
	// last), once what it wrote is checkpointed; an hour is written once the
	// data is past it, so the second report follows a checkpoint. That is
	// the moment to kill it, while the proxy holds the next hour's request.
	// The ledger is not opened meanwhile: a second writer would compete for
	// SQLite's lock.
	killed := false
	buf := make([]byte, 4096)
	var seen []byte
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	for !killed {
		n, err := stderr.Read(buf)
		seen = append(seen, buf[:n]...)
		if bytes.Count(seen, []byte("ETA")) >= 2 {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
		if err != nil {
			break
		}
	}
	deadline.Stop()
	io.Copy(io.Discard, stderr)
	cmd.Wait()
	if !killed {
		t.Fatalf("the backfill ended before it reported an hour: %s", seen)
	}
	if s, err := embedded.Open(ledgerDir, embedded.Options{}); err == nil {
		cp, _ := s.Checkpoint(context.Background(), ingest.CheckpointName(&ingest.VMExport{BaseURL: vm}))
		s.Close()
		if cp.IsZero() || !cp.Before(end) {
			t.Fatalf("killed with checkpoint %v: want one inside the range", cp)
		}
		t.Logf("killed at checkpoint %s", cp.Format(time.RFC3339))
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ingested") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	resumed, err := embedded.Open(ledgerDir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	whole := openStore(t)
	if _, err := ingest.Backfill(context.Background(), ingest.BackfillOptions{Model: model, Start: simStart, End: end,
		Store: whole, Source: &ingest.FileSource{Path: file}}); err != nil {
		t.Fatal(err)
	}
	sameLedger(t, "killed and rerun", whole, resumed, simStart, end)
}
