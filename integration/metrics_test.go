package integration_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// TestVictoriaMetricsScrapesServe: a real VictoriaMetrics scrapes `gpuledger
// serve`'s /metrics (strict parsing on) and answers what a dashboard asks
// of it: histogram_quantile over the request durations' le buckets, the
// ingest counters' rates, and the Go runtime's and the process's series.
func TestVictoriaMetricsScrapesServe(t *testing.T) {
	m := newMemServe(t, "1GiB", time.Now())
	for range 5 {
		if resp, err := http.Get("http://" + m.addr + "/healthz"); err == nil {
			resp.Body.Close()
		}
	}
	cfg := filepath.Join(t.TempDir(), "scrape.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "scrape_configs:\n  - job_name: gpuledger\n    scrape_interval: 1s\n    static_configs:\n      - targets: [%q]\n", m.addr), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := vmBinary(t, "victoria-metrics")
	addr := testenv.FreeAddr(t)
	start(t, "http://"+addr+"/health", bin, "-httpListenAddr="+addr, "-storageDataPath="+t.TempDir(), "-retentionPeriod=100y",
		"-search.disableCache", "-search.latencyOffset=0s", "-loggerLevel=WARN",
		"-promscrape.config="+cfg, "-promscrape.config.strictParse")
	vm := "http://" + addr
	query := func(q string) (float64, bool) {
		resp, err := http.Get(vm + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Data struct{ Result []struct{ Value [2]any } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Data.Result) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fmt.Sprint(r.Data.Result[0].Value[1]), 64)
		return v, err == nil
	}
	checks := map[string]string{
		"p99 of /healthz":      `histogram_quantile(0.99, sum by (le) (gpuledger_http_request_duration_seconds_bucket{path="/healthz"}))`,
		"/healthz answered":    `sum(gpuledger_http_requests_total{path="/healthz",code="200"})`,
		"goroutines":           `go_goroutines{job="gpuledger"}`,
		"resident memory":      `process_resident_memory_bytes{job="gpuledger"}`,
		"the server up":        `up{job="gpuledger"} == 1`,
		"ready":                `gpuledger_ready{job="gpuledger"}`,
		"samples read counter": `gpuledger_ingest_samples_total{job="gpuledger"} >= 0`,
	}
	deadline := time.Now().Add(60 * time.Second)
	for name, q := range checks {
		for {
			v, ok := query(q)
			if ok {
				t.Logf("%s: %s = %g", name, q, v)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: VictoriaMetrics has no answer to %s after 60 s of scrapes", name, q)
			}
			time.Sleep(time.Second)
		}
	}
	if v, _ := query(`histogram_quantile(0.99, sum by (le) (gpuledger_http_request_duration_seconds_bucket{path="/healthz"}))`); !(v > 0) {
		t.Errorf("p99 of /healthz from the le buckets is %g; want a positive duration", v)
	}
}
