package integration_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// BenchmarkCostAPIUnderWrite measures the cost API's latency as
// dashboards see it: gpuledger serve as a process (embedded ledger, then
// ClickHouse), its ledger holding the previous year of 100 teams (every
// hour, 885,000 rows); a writer
// posting remote write of a 256-GPU fleet all along, on a clock 60 times
// real time so that an hour is settled and written every real minute; and
// an open-loop reader asking 103 different questions in turn (the last
// month by day and team; by day for each team; by flavor and borrowed;
// the year by month and team) at a fixed rate for 10 s. With the answer cache (-http.cacheTTL, the default) at
// 100, 500 and 1,000 requests a second; without it at 20 and 100, what the
// store itself sustains on the machine. It reports p50, p99 and the
// slowest in ms, and the errors (a request not answered 200 in 30 s).
func BenchmarkCostAPIUnderWrite(b *testing.B) {
	for _, store := range []string{"embedded", "clickhouse"} {
		for _, cache := range []bool{true, false} {
			name := store + "/cache"
			rates := []int{100, 500, 1000}
			if !cache {
				name, rates = store+"/nocache", []int{20, 100}
			}
			b.Run(name, func(b *testing.B) {
				s := startLatencyServer(b, store, cache)
				for _, rps := range rates {
					b.Run(fmt.Sprintf("rps=%d", rps), func(b *testing.B) {
						for range b.N {
							lat, errs := s.read(b, rps, 10*time.Second)
							b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
							b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
							b.ReportMetric(ms(percentile(lat, 1)), "max-ms")
							b.ReportMetric(float64(errs), "errors")
						}
					})
				}
				s.stop(b)
			})
		}
	}
}

// latencyTeams is how many teams the benchmark's ledger holds.
const latencyTeams = 100

type latencyServer struct {
	addr     string
	proc     *exec.Cmd
	stopped  chan struct{}
	written  atomic.Int64
	writeErr atomic.Int64
	month    time.Time
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(p * float64(len(lat)-1))
	return lat[i]
}

// startLatencyServer writes the fleet's config and a month of ledger rows,
// starts gpuledger serve on them, and starts the writer.
func startLatencyServer(b *testing.B, kind string, cache bool) *latencyServer {
	b.Helper()
	const gpus = 256
	dir := b.TempDir()
	f := makeFleet(gpus, 300) // 75 s of the writer at 60x
	var cfg strings.Builder
	cfg.WriteString("currency: USD\nclusters:\n  - name: fleet\n    nodes:\n")
	for n := range gpus / 8 {
		fmt.Fprintf(&cfg, "      - {name: gpu-node-%05d, gpuModel: NVIDIA H100 80GB HBM3, gpus: 8, flavor: h100}\n", n)
	}
	cfg.WriteString("resourceFlavors:\n  - name: h100\nteams:\n")
	for i := range latencyTeams {
		fmt.Fprintf(&cfg, "  - {name: team-%02d, namespaces: [team-%02d]}\n", i, i)
	}
	cfg.WriteString("prices:\n  - {flavor: h100, perGPUHour: 6.88}\n")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
		return p
	}
	cfgPath := write("fleet.yaml", cfg.String())
	w, v := api.HashToken("bench-writer"), api.HashToken("bench-viewer")
	tokens := write("tokens.yaml", fmt.Sprintf("tokens:\n  - {name: writer, sha256: %s, scopes: [write]}\n  - {name: viewer, sha256: %s, scopes: [viewer]}\n",
		hex.EncodeToString(w[:]), hex.EncodeToString(v[:])))

	// The previous year: every hour, each team's row and the unallocated.
	s := &latencyServer{addr: testenv.FreeAddr(b), stopped: make(chan struct{})}
	s.month = simStart.AddDate(0, -1, 0)
	s.month = time.Date(s.month.Year(), s.month.Month(), 1, 0, 0, 0, 0, time.UTC)
	var rows []ledger.Row
	for h := s.month.AddDate(-1, 1, 0); h.Before(s.month.AddDate(0, 1, 0)); h = h.Add(time.Hour) {
		// Each team two of the 256 H100s, 56 held by nobody: the hour
		// reconciles to the fleet's 256 × 6.88.
		for i := range latencyTeams {
			rows = append(rows, ledger.Row{Key: ledger.Key{Hour: h, Cluster: "fleet", Team: fmt.Sprintf("team-%02d", i), Namespace: fmt.Sprintf("team-%02d", i), Flavor: "h100"},
				GPUSeconds: 7200, ActiveGPUSeconds: 4500, CostMicros: 13_760_000, IdleCostMicros: 5_160_000})
		}
		rows = append(rows, ledger.Row{Key: ledger.Key{Hour: h, Cluster: "fleet", Team: ledger.TeamUnallocated, Flavor: "h100"},
			GPUSeconds: 201600, CostMicros: 385_280_000, UnallocatedCostMicros: 385_280_000})
	}
	var storeArgs []string
	switch kind {
	case "embedded":
		st, err := embedded.Open(filepath.Join(dir, "ledger"), embedded.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.WriteHours(context.Background(), rows, nil); err != nil {
			b.Fatal(err)
		}
		st.Close()
		storeArgs = []string{"-ledger.path", filepath.Join(dir, "ledger")}
	case "clickhouse":
		dsn := chtest.Database(b, chtest.DSN())
		st, err := clickhouse.Open(context.Background(), clickhouse.Options{DSN: dsn})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.WriteHours(context.Background(), rows, nil); err != nil {
			b.Fatal(err)
		}
		st.Close()
		storeArgs = []string{"-ledger.store", "clickhouse", "-clickhouse.dsn", dsn}
	}
	if !cache {
		storeArgs = append(storeArgs, "-http.cacheTTL", "0")
	}
	epoch := time.Now().Add(2 * time.Second)
	args := append([]string{"serve", "-config", cfgPath, "-ingest.dir", filepath.Join(dir, "pipeline"), "-http.listenAddr", s.addr,
		"-auth.tokensFile", tokens, "-log.level", "error",
		"-clock.start", simStart.Format(time.RFC3339), "-clock.epoch", epoch.Format(time.RFC3339Nano), "-clock.speed", "60"}, storeArgs...)
	s.proc = exec.Command(gpuledgerBinary(b), args...)
	var logs bytes.Buffer
	s.proc.Stdout, s.proc.Stderr = &logs, &logs
	if err := s.proc.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.proc.Process.Kill(); s.proc.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("gpuledger serve did not start:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The writer: scrape i at its time on the clock, one request at a time
	// as one vmagent queue sends.
	go func() {
		defer close(s.stopped)
		client := &http.Client{}
		for i, reqs := range f.requests {
			at := epoch.Add(time.Duration(i) * 15 * time.Second / 60)
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			for _, body := range reqs {
				req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/api/v1/write", bytes.NewReader(body))
				req.Header.Set("Content-Encoding", "snappy")
				req.Header.Set("Authorization", "Bearer bench-writer")
				resp, err := client.Do(req)
				if err != nil {
					s.writeErr.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					s.writeErr.Add(1)
				}
				s.written.Add(1)
			}
		}
	}()
	time.Sleep(3 * time.Second)
	return s
}

// read sends rps requests a second for d, each on its own schedule (open
// loop: a slow answer does not slow the sending), and returns the
// latencies and the count of failures.
func (s *latencyServer) read(b *testing.B, rps int, d time.Duration) ([]time.Duration, int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	base := fmt.Sprintf("http://%s/api/v1/cost?from=%s&to=%s", s.addr, s.month.Format("2006-01"), s.month.AddDate(0, 1, 0).Format("2006-01"))
	urls := []string{base + "&step=day&groupBy=team", base + "&step=month&groupBy=flavor,borrowed",
		fmt.Sprintf("http://%s/api/v1/cost?from=%s&to=%s&step=month&groupBy=team", s.addr, s.month.AddDate(-1, 1, 0).Format("2006-01"), s.month.AddDate(0, 1, 0).Format("2006-01"))}
	for i := range latencyTeams {
		urls = append(urls, fmt.Sprintf("%s&step=day&groupBy=team&team=team-%02d", base, i))
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	n := int(float64(rps) * d.Seconds())
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second / time.Duration(rps))
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		url := urls[i%len(urls)]
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer bench-viewer")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				errs.Add(1)
				return
			}
			resp.Body.Close()
			took := time.Since(t0)
			if resp.StatusCode != 200 {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, int(errs.Load())
}

func (s *latencyServer) stop(b *testing.B) {
	s.proc.Process.Signal(os.Interrupt)
	s.proc.Wait()
	b.Logf("writer: %d requests, %d failed", s.written.Load(), s.writeErr.Load())
}
