package integration_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// The chaos tests run gpuledger serve as users run it, a process fed by a
// real vmagent scraping a simulated cluster, and break things: kill -9 at
// random moments, a downtime that leaves vmagent a backlog to deliver,
// nodes whose clocks are off, a disk that fills and frees. Time runs 30
// times as fast (gpuledger's -clock flags, the exporter's scrapes, vmagent
// scraping every 500 ms): the cluster's clock starts at 0:20 and the first
// hour settles about two real minutes later. Each run compares that hour,
// row by row and bit by bit, with the ledger attribution makes of the
// scrapes vmagent was served (on a loaded machine vmagent skips some; the
// reference skips the same).

const chaosSpeed = 30

// chaosFrom is where the runs' clock starts, past the hour's start.
const chaosFrom = 20 * time.Minute

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gpuledgerBinary builds cmd/gpuledger once per test run.
func gpuledgerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuledger-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gpuledger")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/gpuledger").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// chaos is one run: the simulated cluster, its exporter, vmagent, and
// gpuledger serve (one or more replicas, each fed by vmagent), restarted at
// will. Its own serve fields and methods are the first replica's.
type chaos struct {
	*replica
	replicas []*replica
	t        *testing.T
	dir      string
	epoch    time.Time // real time at which the clock reads simStart
	scrapes  []scrape
	model    *attribution.Model
	cfgPath  string
	tokens   string
	logs     bytes.Buffer
	logMu    sync.Mutex
	mu       sync.Mutex
	served   map[int]bool
	skew     map[string]time.Duration // node → how far its clock is off
	// lastStart is the clock when a gpuledger last started: nothing is
	// settled by the clock until chaosSettle after it.
	lastStart time.Time
	// speed is how many times as fast as real time the clock runs.
	speed int
}

// replica is one gpuledger serve process of a run.
type replica struct {
	c       *chaos
	addr    string
	ledger  string // its embedded ledger's directory
	pipeDir string
	extra   []string
	proc    *exec.Cmd
}

// simNow is the replay clock: chaosStart + chaosFrom at epoch, c.speed
// times as fast.
func (c *chaos) simNow() time.Time {
	return chaosStart.Add(chaosFrom + time.Duration(float64(time.Since(c.epoch))*float64(c.speed)))
}

// chaosSettle is the runs' -ingest.settleAfter.
const chaosSettle = 20 * time.Minute

// chaosStart is an hour of the clock the runs share.
var chaosStart = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

func newChaos(t *testing.T, minutes int) *chaos { return newChaosWith(t, minutes, "", 1, chaosSpeed) }

// newChaosOn is newChaos with the pipeline directory at pipeDir (empty: in
// the test's directory).
func newChaosOn(t *testing.T, minutes int, pipeDir string) *chaos {
	return newChaosWith(t, minutes, pipeDir, 1, chaosSpeed)
}

// newChaosWith is newChaosOn with vmagent sending from queues queues, and
// the clock running speed times as fast as real time. At speed 1 vmagent
// runs with its default flush and retry intervals.
func newChaosWith(t *testing.T, minutes int, pipeDir string, queues, speed int) *chaos {
	return newChaosOpts(t, chaosOptions{minutes: minutes, pipeDir: pipeDir, queues: queues, speed: speed, replicas: 1})
}

// chaosOptions are a run's settings: the clock's minutes, where the first
// replica's pipeline lives (empty: the test's directory), vmagent's queues,
// the clock's speed, how many serve replicas vmagent feeds, and each
// replica's flags past the run's own.
type chaosOptions struct {
	minutes       int
	pipeDir       string
	queues, speed int
	replicas      int
	serveArgs     func(i int) []string
}

func newChaosOpts(t *testing.T, o chaosOptions) *chaos {
	testenv.Slow(t, "chaos tests take minutes")
	vmagent := vmBinary(t, "vmagent")
	minutes, queues, speed := o.minutes, o.queues, o.speed
	c := &chaos{t: t, dir: t.TempDir(), served: map[int]bool{}, skew: map[string]time.Duration{}, speed: speed}
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.model, err = cfg.AttributionModel(""); err != nil {
		t.Fatal(err)
	}
	sm, err := sim.NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := chaosStart.Add(time.Duration(minutes) * time.Minute)
	if _, err := sm.Run(sim.GenerateMix(cfg, chaosStart.Add(-24*time.Hour), 26*time.Hour, 0.85, 3), chaosStart.Add(-24*time.Hour), end.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tel := sim.NewTelemetry(sm.Cluster, chaosStart.Add(chaosFrom), end, 15*time.Second)
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		c.scrapes = append(c.scrapes, scrape{at, body})
	}
	c.cfgPath = "../examples/cluster.yaml"
	sum, viewer := api.HashToken("chaos-vmagent"), api.HashToken("chaos-viewer")
	c.tokens = filepath.Join(c.dir, "tokens.yaml")
	if err := os.WriteFile(c.tokens, []byte(fmt.Sprintf("tokens:\n  - {name: vmagent, sha256: %s, scopes: [write]}\n  - {name: viewer, sha256: %s, scopes: [viewer]}\n",
		hex.EncodeToString(sum[:]), hex.EncodeToString(viewer[:]))), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range max(o.replicas, 1) {
		r := &replica{c: c, addr: testenv.FreeAddr(t), ledger: filepath.Join(c.dir, fmt.Sprint("ledger", i)), pipeDir: filepath.Join(c.dir, fmt.Sprint("pipeline", i)),
			// Settle 20 minutes after the hour: 20 real seconds for
			// the last samples to arrive on a loaded machine.
			extra: []string{"-ingest.settleAfter", chaosSettle.String()}}
		if i == 0 && o.pipeDir != "" {
			r.pipeDir = o.pipeDir
		}
		if o.serveArgs != nil {
			r.extra = append(r.extra, o.serveArgs(i)...)
		}
		c.replicas = append(c.replicas, r)
	}
	c.replica = c.replicas[0]
	// The clock reads chaosStart 3 real seconds from now: time to start.
	c.epoch = time.Now().Add(3 * time.Second)

	exporter := httptest.NewServer(http.HandlerFunc(c.serveScrape))
	t.Cleanup(exporter.Close)
	scrapeCfg := filepath.Join(c.dir, "scrape.yml")
	os.WriteFile(scrapeCfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %s
scrape_configs:
  - job_name: dcgm
    honor_timestamps: true
    static_configs:
      - targets: [%q]
`, 15*time.Second/time.Duration(speed), exporter.Listener.Addr().String())), 0o644)
	secret := filepath.Join(c.dir, "bearer")
	os.WriteFile(secret, []byte("chaos-vmagent"), 0o600)
	for _, r := range c.replicas {
		r.start()
	}
	agentAddr := testenv.FreeAddr(t)
	// One queue unless the test asks for more: blocks reach gpuledger in
	// order (the reorder window is tested with several queues in
	// TestVmagentRemoteWrite, TestChaosBacklogQueues and
	// TestChaosRestartQueues). On a
	// fast clock, retries every 100 ms at most a second apart, so a
	// restart costs seconds of the clock, not minutes.
	agentArgs := []string{"-httpListenAddr=" + agentAddr,
		"-promscrape.config=" + scrapeCfg,
		"-remoteWrite.bearerTokenFile=" + secret,
		"-remoteWrite.forcePromProto",
		fmt.Sprintf("-remoteWrite.queues=%d", queues),
		"-remoteWrite.tmpDataPath=" + filepath.Join(c.dir, "vmagent-queue"),
		"-loggerLevel=ERROR"}
	for _, r := range c.replicas {
		agentArgs = append(agentArgs, "-remoteWrite.url=http://"+r.addr+"/api/v1/write")
	}
	if speed > 1 {
		agentArgs = append(agentArgs, "-remoteWrite.flushInterval=100ms", "-remoteWrite.retryMinInterval=100ms", "-remoteWrite.retryMaxInterval=1s")
	}
	start(t, "http://"+agentAddr+"/health", vmagent, agentArgs...)
	return c
}

// serveScrape serves the scrape of the clock's present, with timestamps
// (a node with a skewed clock stamps its own lines off by its skew), and
// notes which it served.
func (c *chaos) serveScrape(w http.ResponseWriter, r *http.Request) {
	i := int(c.simNow().Sub(chaosStart.Add(chaosFrom)) / (15 * time.Second))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	if i < 0 || i >= len(c.scrapes) {
		return
	}
	c.mu.Lock()
	c.served[i] = true
	skew := c.skew
	c.mu.Unlock()
	w.Write(stamp(c.scrapes[i], skew))
}

// stamp writes a scrape with its time on every line, a skewed node's lines
// off by its skew.
func stamp(sc scrape, skew map[string]time.Duration) []byte {
	if len(skew) == 0 {
		return sim.AppendTimestamped(nil, sc.body, sc.at.UnixMilli())
	}
	var b []byte
	for _, line := range strings.SplitAfter(string(sc.body), "\n") {
		at := sc.at
		for node, d := range skew {
			if strings.Contains(line, `Hostname="`+node+`"`) {
				at = at.Add(d)
			}
		}
		b = sim.AppendTimestamped(b, []byte(line), at.UnixMilli())
	}
	return b
}

// start starts the replica's gpuledger serve and waits until it is
// healthy.
func (r *replica) start() {
	c := r.c
	c.t.Helper()
	args := []string{"serve", "-config", c.cfgPath, "-ledger.path", r.ledger, "-ingest.dir", r.pipeDir,
		"-http.listenAddr", r.addr, "-auth.tokensFile", c.tokens, "-log.level", "warn",
		"-clock.start", chaosStart.Add(chaosFrom).Format(time.RFC3339), "-clock.epoch", c.epoch.Format(time.RFC3339Nano),
		"-clock.speed", strconv.Itoa(c.speed)}
	c.lastStart = c.simNow()
	cmd := exec.Command(gpuledgerBinary(c.t), append(args, r.extra...)...)
	cmd.Stdout, cmd.Stderr = c, c
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	r.proc = cmd
	c.t.Cleanup(func() {
		if r.proc == cmd {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	if !healthy(r.addr, 30*time.Second) {
		c.t.Fatalf("gpuledger serve did not get healthy; its log:\n%s", tail(c.log(), 3000))
	}
}

// healthy waits until serve at addr answers /healthz with 200, at most
// timeout, and says whether it did.
func healthy(addr string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

func (c *chaos) Write(p []byte) (int, error) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.logs.Write(p)
}

func (c *chaos) log() string {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.logs.String()
}

// kill stops the replica's gpuledger with SIGKILL: nothing runs at exit.
func (r *replica) kill() {
	r.proc.Process.Kill()
	r.proc.Wait()
	r.proc = nil
}

// stop stops the replica's gpuledger with SIGTERM, as Kubernetes does.
func (r *replica) stop() {
	r.proc.Process.Signal(syscall.SIGTERM)
	r.proc.Wait()
	r.proc = nil
}

// until waits for the clock to reach at.
func (c *chaos) until(at time.Time) {
	if d := time.Duration(float64(at.Sub(c.simNow())) / float64(c.speed)); d > 0 {
		time.Sleep(d)
	}
}

// check stops gpuledger once the first hour is settled and compares the
// hour with the ledger the served scrapes give from a file, in which
// drop's samples are left out (a node whose samples were refused).
func (c *chaos) check(drop func(attribution.Sample) bool) {
	c.t.Helper()
	c.until(c.settled())
	c.stop()
	c.compare(c.reference(drop), c.live())
}

// live opens the ledger gpuledger serve wrote, once it has stopped.
func (c *chaos) live() ledger.Store {
	c.t.Helper()
	live, err := embedded.Open(c.ledger, embedded.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { live.Close() })
	return live
}

// settled is when the first hour is settled: chaosSettle after it ends,
// and not before chaosSettle after the last start. The runs that compare
// the hour serve 15 minutes of data past it: the data closes the hour (5
// minutes past it) and the windows after its last idle gaps whose requests
// the endpoint rows count (10 minutes), as a live feed does; the clock
// settles what the data did not.
func (c *chaos) settled() time.Time {
	settled := chaosStart.Add(time.Hour + chaosSettle + time.Minute)
	if s := c.lastStart.Add(chaosSettle + time.Minute); s.After(settled) {
		settled = s
	}
	return settled
}

// reference is the ledger of the first hour that the served scrapes give
// from a file, less drop's samples.
func (c *chaos) reference(drop func(attribution.Sample) bool) ledger.Store {
	c.mu.Lock()
	var served []int
	for i := range c.served {
		served = append(served, i)
	}
	skew := c.skew
	c.mu.Unlock()
	slices.Sort(served)
	if len(served) < len(c.scrapes)/2 {
		c.t.Fatalf("only %d of %d scrapes were served", len(served), len(c.scrapes))
	}
	// gpuledger started before its clock read chaosStart + chaosFrom, and
	// a node stamping behind has samples before that. The reference starts
	// an hour early too.
	want, _ := attribution.New(c.model, attribution.Options{StartMs: chaosStart.Add(-time.Hour).UnixMilli()})
	var p ingest.Parser
	var samples []attribution.Sample
	var pods []attribution.PodInfo
	var queues []attribution.QueueSample
	sink := &collect{samples: &samples, pods: &pods, queues: &queues}
	for _, i := range served {
		sc := c.scrapes[i]
		if err := p.ParseExposition(stamp(sc, skew), sc.at.UnixMilli(), sink); err != nil {
			c.t.Fatal(err)
		}
	}
	slices.SortStableFunc(samples, func(a, b attribution.Sample) int { return int(a.TimeMs - b.TimeMs) })
	slices.SortStableFunc(queues, func(a, b attribution.QueueSample) int { return int(a.TimeMs - b.TimeMs) })
	for i := range samples {
		if drop == nil || !drop(samples[i]) {
			for len(pods) > 0 && pods[0].TimeMs <= samples[i].TimeMs {
				want.AddPod(pods[0])
				pods = pods[1:]
			}
			for len(queues) > 0 && queues[0].TimeMs <= samples[i].TimeMs {
				want.AddQueue(&queues[0])
				queues = queues[1:]
			}
			want.Add(&samples[i])
		}
	}
	for _, pi := range pods {
		want.AddPod(pi)
	}
	for i := range queues {
		want.AddQueue(&queues[i])
	}
	rows, wls := want.Emit(chaosStart.Add(time.Hour).UnixMilli())
	ref := openStore(c.t)
	if err := ref.WriteHours(context.Background(), rows, wls); err != nil {
		c.t.Fatal(err)
	}
	if err := ref.WriteQueueHours(context.Background(), want.QueueRows()); err != nil {
		c.t.Fatal(err)
	}
	if err := ref.WriteEndpointHours(context.Background(), want.EndpointRows()); err != nil {
		c.t.Fatal(err)
	}
	return ref
}

// compare compares the live ledger's first hour with the reference's, bit
// for bit: rows, workloads, queues and endpoints.
func (c *chaos) compare(ref, live ledger.Store) {
	c.t.Helper()
	end := chaosStart.Add(time.Hour)
	wantRows, wantWls := ledgertest.Dump(c.t, ref, chaosStart, end)
	gotRows, gotWls := ledgertest.Dump(c.t, live, chaosStart, end)
	if len(wantRows) == 0 {
		c.t.Fatal("the reference ledger is empty")
	}
	if diff := cmp.Diff(wantRows, gotRows); diff != "" {
		c.t.Errorf("the first hour differs from the file's (-file +live):\n%s\ngpuledger's log:\n%s", diff, tail(c.log(), 4000))
	}
	if diff := cmp.Diff(wantWls, gotWls); diff != "" {
		c.t.Errorf("the first hour's workloads differ (-file +live):\n%s", diff)
	}
	// The queues' hour too (Kueue's series and the pending workloads'):
	// as the file gives it, bit for bit.
	wantQs, err := ref.QueueHours(context.Background(), "", chaosStart, end)
	if err != nil {
		c.t.Fatal(err)
	}
	gotQs, err := live.QueueHours(context.Background(), "", chaosStart, end)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(wantQs) == 0 {
		c.t.Fatal("the reference has no queue hours: the simulated cluster served no Kueue series")
	}
	if diff := cmp.Diff(wantQs, gotQs); diff != "" {
		c.t.Errorf("the first hour's queues differ (-file +live):\n%s", diff)
	}
	// And the inference endpoints' (vLLM's series).
	wantEps, err := ref.EndpointHours(context.Background(), "", chaosStart, end)
	if err != nil {
		c.t.Fatal(err)
	}
	gotEps, err := live.EndpointHours(context.Background(), "", chaosStart, end)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(wantEps) == 0 {
		c.t.Fatal("the reference has no endpoint hours: the simulated cluster served no vLLM series")
	}
	if diff := cmp.Diff(wantEps, gotEps); diff != "" {
		c.t.Errorf("the first hour's endpoints differ (-file +live):\n%s", diff)
	}
}

// collect gathers parsed samples, pod facts and queue samples, with their
// own strings.
type collect struct {
	samples *[]attribution.Sample
	pods    *[]attribution.PodInfo
	queues  *[]attribution.QueueSample
}

func (c *collect) Add(s *attribution.Sample) {
	x := *s
	x.Node, x.GPU, x.Profile, x.Instance = strings.Clone(x.Node), strings.Clone(x.GPU), strings.Clone(x.Profile), strings.Clone(x.Instance)
	x.Namespace, x.Pod, x.Queue = strings.Clone(x.Namespace), strings.Clone(x.Pod), strings.Clone(x.Queue)
	x.ExporterNamespace, x.ExporterPod = strings.Clone(x.ExporterNamespace), strings.Clone(x.ExporterPod)
	*c.samples = append(*c.samples, x)
}

func (c *collect) AddQueue(q *attribution.QueueSample) {
	x := *q
	x.ClusterQueue, x.Series = strings.Clone(x.ClusterQueue), strings.Clone(x.Series)
	x.Namespace, x.Pod, x.Model = strings.Clone(x.Namespace), strings.Clone(x.Pod), strings.Clone(x.Model)
	*c.queues = append(*c.queues, x)
}

func (c *collect) AddPod(p attribution.PodInfo) {
	p.Namespace, p.Pod, p.Queue, p.Node = strings.Clone(p.Namespace), strings.Clone(p.Pod), strings.Clone(p.Queue), strings.Clone(p.Node)
	p.OwnerKind, p.OwnerName, p.Container, p.Kind = strings.Clone(p.OwnerKind), strings.Clone(p.OwnerName), strings.Clone(p.Container), strings.Clone(p.Kind)
	*c.pods = append(*c.pods, p)
}

// TestChaosKill9: gpuledger serve killed with SIGKILL at ten random
// moments of 45 minutes of remote write (0:20 to 1:05 of its clock),
// restarted each time; vmagent resends what was not acknowledged. The
// hour's ledger is the file's, bit for bit.
func TestChaosKill9(t *testing.T) {
	c := newChaos(t, 75)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 10))
	var at []time.Duration
	for range 10 {
		at = append(at, chaosFrom+time.Duration(3+rng.IntN(42))*time.Minute+time.Duration(rng.IntN(60))*time.Second)
	}
	slices.Sort(at)
	t.Logf("kill -9 at %v of the clock", at)
	for _, a := range at {
		c.until(chaosStart.Add(a))
		c.kill()
		c.start()
	}
	c.check(nil)
}

// TestChaosBacklog: gpuledger down for 6 minutes of the clock at 0:40:
// vmagent keeps scraping into its queue, and delivers the backlog of old
// samples once gpuledger is back. Nothing is late, nothing lost.
func TestChaosBacklog(t *testing.T) {
	c := newChaos(t, 75)
	c.until(chaosStart.Add(40 * time.Minute))
	c.kill()
	c.until(chaosStart.Add(46 * time.Minute))
	c.start()
	c.check(nil)
}

// TestChaosBacklogQueues is TestChaosBacklog with vmagent sending from 4
// queues (its default on 2 cores), and 16 minutes down: longer than the
// catch-up window's 10. Its queues retry their blocks at their own times
// after the restart, up to a second apart: 30 s of this clock, while the
// others deliver the backlog far faster than real time, so a queue's block
// comes minutes of sample time after later samples of the same devices.
// The catch-up window, as deep as the backlog, puts them in order: nothing
// is out of order or put in order early, and the ledger is the file's bit
// for bit. (With the reorder window alone, 1,180 to 2,360 samples were
// answered 400 in each run of 6 minutes down, and teams' costs moved.)
func TestChaosBacklogQueues(t *testing.T) {
	c := newChaosWith(t, 75, "", 4, chaosSpeed)
	c.until(chaosStart.Add(38 * time.Minute))
	c.kill()
	c.until(chaosStart.Add(54 * time.Minute))
	c.start()
	c.until(c.settled())
	counted := metricSums(t, "http://"+c.addr+"/metrics", "chaos-viewer",
		`gpuledger_ingest_rejected_samples_total{reason="out_of_order"}`,
		`gpuledger_remote_write_rejected_samples_total{sender="vmagent",reason="out_of_order"}`,
		`gpuledger_ingest_shed_samples_total`)
	c.stop()
	if counted[0] != 0 || counted[1] != 0 || counted[2] != 0 {
		t.Errorf("16 minutes down with 4 queues: %v samples out of order (%v answered 400), %v put in order early", counted[0], counted[1], counted[2])
	}
	c.compare(c.reference(nil), c.live())
}

// TestChaosRestartQueues restarts gpuledger after 3 minutes down, at real
// time, with vmagent's default queues (4 here), flush and retry intervals:
// the queues' blocks from the outage come back at their own retry times (up
// to a minute apart), 3 minutes and more behind the others' newest
// samples. The catch-up window (10 minutes while a backlog comes in) takes
// them in order: once the catch-up is over and the window has moved past
// the outage, nothing was out of order. (With the reorder window alone,
// 2 minutes, the same restart had 1,180 samples answered 400.) It reads
// the counters, not the hour's ledger: at real time the hour would take an
// hour to settle.
func TestChaosRestartQueues(t *testing.T) {
	c := newChaosWith(t, 65, "", 4, 1)
	down := chaosStart.Add(chaosFrom + 90*time.Second)
	c.until(down)
	c.kill()
	back := down.Add(3 * time.Minute)
	c.until(back)
	c.start()
	metrics := "http://" + c.addr + "/metrics"
	c.until(back.Add(30 * time.Second))
	if up := metricSums(t, metrics, "chaos-viewer", `gpuledger_ingest_catching_up`); up[0] != 1 {
		t.Errorf("not catching up 30 s after the restart")
	}
	// The catch-up ends a reorder window after the last request behind the
	// clock (the queues' retries, a minute at most), and the next request
	// releases past the outage.
	c.until(back.Add(4 * time.Minute))
	counted := metricSums(t, metrics, "chaos-viewer",
		`gpuledger_ingest_rejected_samples_total{reason="out_of_order"}`,
		`gpuledger_remote_write_rejected_samples_total{sender="vmagent",reason="out_of_order"}`,
		`gpuledger_attribution_samples_total`,
		`gpuledger_ingest_shed_samples_total`,
		`gpuledger_ingest_catching_up`)
	c.stop()
	if counted[2] == 0 || counted[4] != 0 {
		t.Fatalf("%v samples attributed, catching up %v, 4 minutes after the restart; gpuledger's log:\n%s", counted[2], counted[4], tail(c.log(), 3000))
	}
	if counted[0] != 0 || counted[1] != 0 || counted[3] != 0 {
		t.Errorf("3 minutes down with 4 queues: %v samples out of order (%v answered 400) of %v attributed, %v put in order early", counted[0], counted[1], counted[2], counted[3])
	}
}

// metricSums reads url's Prometheus text with the bearer token and returns
// the value of each of series (written as the server writes them; 0 when
// absent).
func metricSums(t *testing.T, url, token string, series ...string) []float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	out := make([]float64, len(series))
	for _, line := range strings.Split(string(body), "\n") {
		for i, name := range series {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				if out[i], err = strconv.ParseFloat(v, 64); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
			}
		}
	}
	return out
}

// TestChaosSkewedClocks: one node's clock runs 5 minutes ahead, past the
// 2 minutes allowed: its samples are refused as too new (counted; the rest
// of each request is taken), and its pods' GPU time comes from
// kube-state-metrics, unmeasured. Another node's clock runs 3 minutes
// behind: its samples are taken, as stamped. The hour is the file's with
// the first node's DCGM samples left out.
func TestChaosSkewedClocks(t *testing.T) {
	c := newChaos(t, 75)
	c.mu.Lock()
	c.skew = map[string]time.Duration{"h100-a-02": 5 * time.Minute, "a100-c-01": -3 * time.Minute}
	c.mu.Unlock()
	c.check(func(s attribution.Sample) bool { return s.Node == "h100-a-02" })
}

// TestChaosDiskFull: gpuledger's pipeline directory on a 64 MiB tmpfs,
// filled to the last byte at 0:30 and freed at 0:36: writes are answered
// 503 meanwhile (vmagent retries them), /healthz says why, and once the
// disk frees everything arrives. Needs root to mount the tmpfs.
func TestChaosDiskFull(t *testing.T) {
	testenv.Slow(t, "chaos tests take minutes")
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: %s); the disk-full path is covered by TestPipelineDiskFullAndFreed in ingest", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	c := newChaosOn(t, 75, filepath.Join(mnt, "pipeline"))
	c.until(chaosStart.Add(30 * time.Minute))
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	c.until(chaosStart.Add(33 * time.Minute))
	resp, err := http.Get("http://" + c.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz with the disk full: %s; want 503", resp.Status)
	}
	c.until(chaosStart.Add(36 * time.Minute))
	os.Remove(filler)
	c.check(nil)
}
