package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding/snappy"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
)

// server is a system under test running as its own process.
type server struct {
	cmd  *exec.Cmd
	base string // http://addr
	logs *os.File
	// write is the remote-write path; drained is how the server's work
	// for what it accepted up to scrape last is known to be done.
	write   string
	drained func(ctx context.Context, last int) error
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start starts sys with its data in dir.
func start(ctx context.Context, o options, sys string, f *fleet, dir string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{base: "http://" + addr}
	var args []string
	var bin, health string
	switch sys {
	case "gpuledger":
		cfg := filepath.Join(dir, "fleet.yaml")
		if err := os.WriteFile(cfg, []byte(f.config()), 0o600); err != nil {
			return nil, err
		}
		clock := f.serveClock()
		bin = o.gpuledger
		// Without tokens: a bearer token costs one SHA-256 of a few bytes a
		// request, and the benchmark needs no secret.
		args = []string{"serve", "-config", cfg, "-ledger.path", filepath.Join(dir, "ledger"), "-ingest.dir", filepath.Join(dir, "pipeline"),
			"-http.listenAddr", addr, "-auth.disabled", "-log.level", "error", "-clock.start", clock.Format(time.RFC3339),
			"-ingest.reorderWindow", fmt.Sprintf("%dms", reorderWindowMs)}
		if !o.catchUp {
			// The scrapes are all behind the clock, which serve takes for a
			// backlog; the benchmark measures the live path.
			args = append(args, "-ingest.catchUpWindow", "-1ns")
		}
		health = "/healthz"
		s.write = "/api/v1/write"
		// Drained once the reorder window holds nothing but a marker a
		// window past the last scrape, as the next scrape moves it in a
		// live feed (a tick releases the window by the clock only once
		// requests have stopped for a window's length).
		s.drained = func(ctx context.Context, last int) error {
			if o.catchUp {
				// The catch-up window holds the whole backlog (every request
				// is in it once answered), for the memory it takes; the rate
				// is that of buffering, not of attribution.
				return nil
			}
			if err := s.post(ctx, http.DefaultClient, f.marker(f.lastMs(last)+reorderWindowMs), new(atomic.Int64)); err != nil {
				return fmt.Errorf("marker: %w", err)
			}
			return s.waitMetric(ctx, "gpuledger_ingest_buffered_samples", 1)
		}
	case "victoriametrics":
		bin = filepath.Join(o.vmDir, "victoria-metrics")
		args = []string{"-storageDataPath", filepath.Join(dir, "vm"), "-httpListenAddr", addr, "-retentionPeriod", "1y", "-loggerLevel", "ERROR"}
		health = "/health"
		s.write = "/api/v1/write"
		s.drained = func(ctx context.Context, _ int) error { return s.get(ctx, "/internal/force_flush") }
	}
	s.logs, err = os.Create(filepath.Join(dir, sys+".log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.logs.Close()
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := s.get(ctx, health); err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("%s did not answer %s within a minute; see %s", sys, health, s.logs.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.logs.Close()
}

func (s *server) get(ctx context.Context, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// metric reads /metrics and sums the series of the metric name (with any
// labels).
func (s *server) metric(ctx context.Context, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for line := range strings.SplitSeq(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			if x, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
				sum += x
			}
		}
	}
	return sum, nil
}

// save writes what GET path answers to file.
func (s *server) save(ctx context.Context, path, file string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// waitMetric polls /metrics until the gauge name reads want.
func (s *server) waitMetric(ctx context.Context, name string, want float64) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		v, err := s.metric(ctx, name)
		if err != nil {
			return err
		}
		if v == want {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not reach %v in 5 minutes", name, want)
}

// send posts bodies with senders concurrent senders, each on its own
// connection, taking the next body as it is free (as vmagent's queues
// take blocks). A request answered 429 or 503 is sent again after 50 ms,
// as an agent retries; one answered 400 for out-of-order samples is
// dropped, as an agent drops it; any other answer but 2xx is an error.
func (s *server) send(ctx context.Context, bodies [][]byte, senders int) (retries int, err error) {
	next := make(chan []byte)
	var wg sync.WaitGroup
	var retried atomic.Int64
	var mu sync.Mutex
	var firstErr error
	for range senders {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range next {
				if err := s.post(ctx, client, body, &retried); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
			client.CloseIdleConnections()
		}()
	}
	for _, b := range bodies {
		next <- b
	}
	close(next)
	wg.Wait()
	return int(retried.Load()), firstErr
}

func (s *server) post(ctx context.Context, client *http.Client, body []byte, retried *atomic.Int64) error {
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+s.write, bytes.NewReader(body))
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return nil
		case resp.StatusCode == http.StatusBadRequest && bytes.Contains(msg, []byte(" out of order")):
			// Samples that came after the reorder window had passed their
			// devices: the sender drops the batch, as vmagent does, and
			// measure counts them in the rejected samples.
			return nil
		case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < 1000:
			retried.Add(1)
			time.Sleep(50 * time.Millisecond)
		default:
			return fmt.Errorf("POST %s: %s: %s", s.write, resp.Status, bytes.TrimSpace(msg))
		}
	}
}

// measure starts sys fresh, sends the untimed first scrape, then times
// the others until the server's work for them is done.
func measure(ctx context.Context, o options, sys string, f *fleet, senders, rep int) (result, error) {
	dir, err := os.MkdirTemp("", "benchingest-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	s, err := start(ctx, o, sys, f, dir)
	if err != nil {
		return result{}, err
	}
	defer s.stop()
	// Keep the log where the report can point at it.
	defer func() {
		if b, err := os.ReadFile(s.logs.Name()); err == nil && len(b) > 0 {
			os.WriteFile(filepath.Join(o.out, fmt.Sprintf("%s-%d-%d-%d.log", sys, f.gpus, senders, rep+1)), b, 0o644)
		}
	}()
	r := result{system: sys, gpus: f.gpus, senders: senders, rep: rep, series: f.series}
	if _, err := s.send(ctx, f.scrapes[0], senders); err != nil {
		return r, fmt.Errorf("untimed scrape: %w", err)
	}
	if err := s.drained(ctx, 0); err != nil {
		return r, err
	}
	var timed [][]byte
	for _, sc := range f.scrapes[1:] {
		timed = append(timed, sc...)
	}
	r.samples = f.series * (len(f.scrapes) - 1)
	cpu0, err := cpuSeconds(s.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	self0, err := cpuSeconds(os.Getpid())
	if err != nil {
		return r, err
	}
	busy0, total0, err := machineCPU()
	if err != nil {
		return r, err
	}
	var profiled chan error
	if o.profile > 0 && sys == "gpuledger" {
		profiled = make(chan error, 1)
		go func() {
			profiled <- s.save(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", o.profile),
				filepath.Join(o.out, fmt.Sprintf("cpu-%d-%d-%d.pprof", f.gpus, senders, rep+1)))
		}()
	}
	began := time.Now()
	if r.retries, err = s.send(ctx, timed, senders); err != nil {
		return r, err
	}
	if err := s.drained(ctx, len(f.scrapes)-1); err != nil {
		return r, err
	}
	r.seconds = time.Since(began).Seconds()
	cpu1, err := cpuSeconds(s.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.cpuSeconds = cpu1 - cpu0
	self1, err := cpuSeconds(os.Getpid())
	if err != nil {
		return r, err
	}
	r.senderCPU = self1 - self0
	busy1, total1, err := machineCPU()
	if err != nil {
		return r, err
	}
	if total1 > total0 {
		r.machineBusy = (busy1 - busy0) / (total1 - total0)
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return r, err
		}
	}
	if o.heapProfile && sys == "gpuledger" {
		if err := s.save(ctx, "/debug/pprof/heap", filepath.Join(o.out, fmt.Sprintf("heap-%d-%d-%d.pprof", f.gpus, senders, rep+1))); err != nil {
			return r, err
		}
	}
	if sys == "gpuledger" {
		// What attribution refused (out of order, late, too new): the
		// benchmark counts it so that a fast run that drops samples shows.
		n, err := s.metric(ctx, "gpuledger_ingest_rejected_samples_total")
		if err != nil {
			return r, err
		}
		r.rejected = int(n)
	}
	if r.peakRSS, _, err = memory(s.cmd.Process.Pid); err != nil {
		return r, err
	}
	// Settled: after a few seconds without requests (and, for gpuledger,
	// its snapshot of the open hour's state).
	time.Sleep(5 * time.Second)
	if _, r.settled, err = memory(s.cmd.Process.Pid); err != nil {
		return r, err
	}
	return r, nil
}

// reorderWindowMs is gpuledger serve's reorder window in the benchmark: its
// default.
const reorderWindowMs = 120_000

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every Linux architecture Go runs on).
const clockTicks = 100

// cpuSeconds reads a process' user and system CPU time from /proc.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: state is the
	// first, utime the 12th and stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat without a command")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has %d fields after the command", pid, len(fields))
	}
	u, err1 := strconv.ParseFloat(fields[11], 64)
	st, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (u + st) / clockTicks, nil
}

// machineCPU reads all CPUs' busy and total time from /proc/stat's first
// line, in USER_HZ ticks: busy is all but idle and iowait (the kernel's
// own work, interrupts and other processes included).
func machineCPU() (busy, total float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat starts %q; want the cpu line", line)
	}
	// user nice system idle iowait irq softirq steal; guest and guest_nice
	// after them are already in user and nice.
	for i, f := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat cpu field %d is %q: %w", i+1, f, err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// memory reads a process' peak and current resident set from /proc, in
// bytes.
func memory(pid int) (peak, now int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmHWM":
			dst = &peak
		case "VmRSS":
			dst = &now
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		*dst = kb << 10
	}
	return peak, now, sc.Err()
}

// decodeLimit is how fast the bodies can be snappy-decoded and
// protobuf-unmarshalled (VictoriaMetrics' lib, as both servers do) and
// nothing else: the ceiling of any remote-write receiver on this machine.
type decodeLimit struct {
	one, all float64 // samples/s on one core and on procs
	procs    int
}

func measureDecode(f *fleet) decodeLimit {
	var bodies [][]byte
	for _, sc := range f.scrapes {
		bodies = append(bodies, sc...)
	}
	samples := float64(f.series * len(f.scrapes))
	rate := func(workers int) float64 {
		best := 0.0
		for range 3 {
			var wg sync.WaitGroup
			var next atomic.Int64
			began := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf []byte
					var wru prompb.WriteRequestUnmarshaler
					for {
						i := int(next.Add(1)) - 1
						if i >= len(bodies) {
							return
						}
						var err error
						buf, err = snappy.Decode(buf[:0], bodies[i], 256<<20)
						if err != nil {
							panic(err) // bodies this program made
						}
						if _, err := wru.UnmarshalProtobuf(buf); err != nil {
							panic(err)
						}
					}
				}()
			}
			wg.Wait()
			best = max(best, samples/time.Since(began).Seconds())
		}
		return best
	}
	procs := runtime.GOMAXPROCS(0)
	return decodeLimit{one: rate(1), all: rate(procs), procs: procs}
}
