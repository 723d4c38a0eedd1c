package integration_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/golang/snappy"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// memServe is gpuledger serve as a process with a memory limit, fed by
// the test over remote write.
type memServe struct {
	t        *testing.T
	dir      string
	addr     string
	args     []string
	proc     *exec.Cmd
	log      bytes.Buffer
	clock0   time.Time // what the server's clock reads at epoch
	epoch    time.Time
	startDur time.Duration // how long the last start took to get healthy
}

// newMemServe starts serve with a memory limit, its clock reading clock0
// now.
func newMemServe(t *testing.T, limit string, clock0 time.Time) *memServe {
	t.Helper()
	m := &memServe{t: t, dir: t.TempDir(), addr: testenv.FreeAddr(t), clock0: clock0, epoch: time.Now()}
	m.args = []string{"serve", "-config", "../examples/cluster.yaml", "-ledger.path", filepath.Join(m.dir, "ledger"),
		"-ingest.dir", filepath.Join(m.dir, "pipeline"), "-http.listenAddr", m.addr, "-auth.disabled", "-log.level", "warn",
		"-ingest.memoryLimit", limit, "-remoteWrite.maxSeries", "1000000",
		"-clock.start", m.clock0.Format(time.RFC3339), "-clock.epoch", m.epoch.Format(time.RFC3339Nano)}
	m.start()
	return m
}

// now is the server's clock.
func (m *memServe) now() time.Time { return m.clock0.Add(time.Since(m.epoch)) }

func (m *memServe) start() {
	m.t.Helper()
	began := time.Now()
	cmd := exec.Command(gpuledgerBinary(m.t), m.args...)
	cmd.Stdout, cmd.Stderr = &m.log, &m.log
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.proc = cmd
	m.t.Cleanup(func() {
		if m.proc == cmd {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	if !healthy(m.addr, 2*time.Minute) {
		m.t.Fatalf("serve did not get healthy; its log:\n%s", tail(m.log.String(), 3000))
	}
	m.startDur = time.Since(began)
}

// stop sends SIGTERM and returns how long serve took to exit.
func (m *memServe) stop() time.Duration {
	began := time.Now()
	m.proc.Process.Signal(syscall.SIGTERM)
	m.proc.Wait()
	m.proc = nil
	return time.Since(began)
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func (m *memServe) peakRSS() int64 {
	m.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.proc.Process.Pid))
	if err != nil {
		m.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				m.t.Fatal(err)
			}
			return kb << 10
		}
	}
	m.t.Fatal("no VmHWM")
	return 0
}

// post sends one remote-write body; the status.
func (m *memServe) post(body []byte) int {
	resp, err := http.Post("http://"+m.addr+"/api/v1/write", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		m.t.Errorf("post: %v", err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func writeBody(series []prompb.TimeSeries) []byte {
	wr := prompb.WriteRequest{Timeseries: series}
	return snappy.Encode(nil, wr.MarshalProtobuf(nil))
}

func labels(kv ...string) []prompb.Label {
	var out []prompb.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, prompb.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestMemoryBoundedOnOneGiB drives gpuledger serve, as a process given
// -ingest.memoryLimit=1GiB, along each path a sender can take memory by:
// bodies that decode to 63 MiB, sent 32 at a time; 2,000,000 pods never
// seen before (kube_pod_labels, 100,000 a request); 2,000,000 DCGM series
// of devices the model does not have, with labels never seen before; and
// a backlog of the cluster's own devices, sent newest first, two hours
// deep. Its peak resident memory stays under the limit on each. After the
// floods of new pods and series it is stopped (SIGTERM) and started again;
// the times are logged (they are not asserted: see the note).
func TestMemoryBoundedOnOneGiB(t *testing.T) {
	testenv.Slow(t, "floods a serve process with millions of series")
	if runtime.GOOS != "linux" {
		t.Skip("reads the peak resident memory from /proc")
	}
	const limit = 1 << 30
	check := func(m *memServe, what string) {
		t.Helper()
		peak := m.peakRSS()
		t.Logf("%s: peak RSS %.0f MiB of the 1,024 MiB limit", what, float64(peak)/(1<<20))
		if peak >= limit {
			t.Errorf("%s: peak RSS %d bytes, over the 1 GiB limit", what, peak)
		}
	}
	restart := func(m *memServe, what string) {
		t.Helper()
		stopDur := m.stop()
		var snap int64
		snaps, _ := filepath.Glob(filepath.Join(m.dir, "pipeline", "snapshot-*.gob"))
		for _, s := range snaps {
			if fi, err := os.Stat(s); err == nil {
				snap = max(snap, fi.Size())
			}
		}
		m.start()
		t.Logf("%s: SIGTERM to exit %.1f s, start to healthy %.1f s, snapshot %.0f MiB", what, stopDur.Seconds(), m.startDur.Seconds(), float64(snap)/(1<<20))
		check(m, what+", restarted")
	}

	t.Run("bombs", func(t *testing.T) {
		m := newMemServe(t, "1GiB", chaosStart)
		bomb := snappy.Encode(nil, make([]byte, 63<<20))
		var wg sync.WaitGroup
		codes := make(map[int]int)
		var mu sync.Mutex
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					code := m.post(bomb)
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("%d bodies of %d bytes decoding to 63 MiB: statuses %v", 32*8, len(bomb), codes)
		if codes[http.StatusTooManyRequests] == 0 {
			t.Error("no body was refused for the memory in flight")
		}
		check(m, "bombs")
	})

	t.Run("pod churn", func(t *testing.T) {
		m := newMemServe(t, "1GiB", chaosStart)
		for r := range 20 {
			ms := m.now().UnixMilli()
			series := make([]prompb.TimeSeries, 0, 100_000)
			for i := range 100_000 {
				series = append(series, prompb.TimeSeries{Labels: labels("__name__", "kube_pod_labels", "namespace", "flood",
					"pod", fmt.Sprintf("fake-%d-%d", r, i), "label_kueue_x_k8s_io_queue_name", "q"), Samples: []prompb.Sample{{Value: 1, Timestamp: ms}}})
			}
			if code := m.post(writeBody(series)); code != http.StatusNoContent {
				t.Fatalf("request %d: %d", r, code)
			}
		}
		check(m, "pod churn")
		restart(m, "pod churn")
	})

	t.Run("series churn", func(t *testing.T) {
		m := newMemServe(t, "1GiB", chaosStart)
		rng := rand.New(rand.NewPCG(1, 2))
		for r := range 20 {
			ms := m.now().UnixMilli()
			series := make([]prompb.TimeSeries, 0, 100_000)
			for i := range 100_000 {
				series = append(series, prompb.TimeSeries{Labels: labels("__name__", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
					"Hostname", fmt.Sprintf("ghost-%d", rng.IntN(1e6)), "gpu", strconv.Itoa(i%8), "namespace", "flood",
					"pod", fmt.Sprintf("p-%d-%d", r, i), "UUID", fmt.Sprintf("GPU-%016x", rng.Uint64())), Samples: []prompb.Sample{{Value: 0.5, Timestamp: ms}}})
			}
			if code := m.post(writeBody(series)); code != http.StatusNoContent && code != http.StatusBadRequest {
				t.Fatalf("request %d: %d", r, code)
			}
		}
		check(m, "series churn")
		restart(m, "series churn")
	})

	t.Run("backlog", func(t *testing.T) {
		// The clock at 00:50: the pipeline starts at 00:00, and takes a
		// backlog of the 50 minutes before. 3,000 nodes' 8 GPUs, two
		// fields a scrape every 15 s, sent a minute a request from the
		// oldest: the catch-up window is as deep as the backlog (49
		// minutes and 2), so all 8,640,000 samples would be held to put
		// the blocks held back by other senders in order, past what a
		// quarter of the limit holds.
		m := newMemServe(t, "1GiB", chaosStart.Add(50*time.Minute))
		codes := map[int]int{}
		for minute := range 45 {
			end := chaosStart.Add(time.Duration(minute+2) * time.Minute)
			series := make([]prompb.TimeSeries, 0, 48_000)
			for n := range 3000 {
				node := fmt.Sprintf("node-%04d", n)
				for g := range 8 {
					for _, f := range []string{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"} {
						ts := prompb.TimeSeries{Labels: labels("__name__", f, "Hostname", node, "gpu", strconv.Itoa(g))}
						for s := 60; s > 0; s -= 15 {
							ts.Samples = append(ts.Samples, prompb.Sample{Value: 0.5, Timestamp: end.Add(-time.Duration(s) * time.Second).UnixMilli()})
						}
						series = append(series, ts)
					}
				}
			}
			codes[m.post(writeBody(series))]++
		}
		t.Logf("backlog: statuses %v", codes)
		if codes[http.StatusNoContent]+codes[http.StatusBadRequest] != 45 {
			t.Errorf("statuses %v: a request was not taken", codes)
		}
		st := metricValue(t, "http://"+m.addr+"/metrics", "gpuledger_ingest_shed_samples_total")
		if st == 0 {
			t.Error("nothing was put in order early: the backlog did not reach the bound")
		}
		check(m, "backlog")
		restart(m, "backlog")
	})
}

// metricValue reads one series of /metrics (no token: auth is off).
func metricValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
