// Command benchingest measures gpuledger serve's remote-write ingest
// against VictoriaMetrics single-node the way users run them: each system
// is its own process, started fresh for every measurement, fed over
// loopback by this load generator with the same pre-built bodies (a
// dcgm-exporter and kube-state-metrics fleet as vmagent sends it, see
// fleet.go), with 1 and several concurrent senders, the two systems
// alternating within every repetition. It reports, per fleet size and
// sender count, the min/median/max over the repetitions of: samples
// accepted per second, samples per CPU-second of the server process,
// peak and settled resident memory per active series, and the ratios
// gpuledger / VictoriaMetrics; and, measured before each repetition, the
// decode-only limit (snappy and protobuf decoding of the same bodies, on
// one core and on all of GOMAXPROCS) with each system's share of it.
//
// What is timed: from the first timed request to the moment the server
// has done all the work for them. For gpuledger that is every request
// answered 2xx (each fsynced in its write-ahead log before the answer)
// and nothing left in its reorder window but a one-sample marker sent a
// window after the last scrape, as the next scrape would be (every sample
// attributed); for
// VictoriaMetrics, every request answered 2xx and /internal/force_flush
// returned (the samples are searchable). One scrape is sent untimed first
// so that both have seen every series.
//
//	go run ./tools/benchingest -gpuledger bin/gpuledger -victoriametrics ~/.cache/gpuledger/victoriametrics-v1.151.0
//
// (make bench-ingest builds both and runs it.)
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchingest:", err)
		os.Exit(1)
	}
}

type options struct {
	gpuledger, vmDir string
	gpus, senders    []int
	reps, scrapes    int
	seed             uint64
	out              string
	systems          []string
	profile          int  // seconds of gpuledger's CPU profile to take while timed; 0 for none
	heapProfile      bool // save gpuledger's heap profile once the timed phase is drained
	catchUp          bool // keep serve's catch-up window
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: benchingest [flags]

Measures gpuledger serve's remote-write ingest against VictoriaMetrics
single-node, each as its own process fed over loopback with the same bodies,
alternating the two in every repetition, and prints samples/s, samples per
CPU-second, peak and settled RSS per series and the ratios, with the
decode-only limit measured before each repetition.

Flags:`)
		fs.PrintDefaults()
	}
	var o options
	fs.StringVar(&o.gpuledger, "gpuledger", "bin/gpuledger", "gpuledger binary (make build)")
	fs.StringVar(&o.vmDir, "victoriametrics", os.Getenv("GPULEDGER_VICTORIAMETRICS"), "folder with the victoria-metrics binary (tools/build-victoriametrics.sh prints it)")
	gpus := fs.String("gpus", "1000,10000,50000", "fleet sizes, comma-separated")
	senders := fs.String("senders", "1,4", "concurrent senders, comma-separated (vmagent sends with -remoteWrite.queues, 4 on 2 cores)")
	systems := fs.String("systems", "gpuledger,victoriametrics", "systems to measure, comma-separated")
	fs.IntVar(&o.reps, "reps", 3, "repetitions of each measurement (the systems alternate within each, the first one changing from one to the next)")
	fs.IntVar(&o.scrapes, "scrapes", 8, "timed scrapes (15 s apart) after the untimed first one; use 32 at 10,000 GPUs or fewer, so that a run lasts seconds")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the fleet: which nodes run pods, the values")
	fs.BoolVar(&o.catchUp, "catchUp", false, "keep gpuledger serve's catch-up window (as deep as the backlog, at least 10 minutes, within 5,000,000 samples): the fleet's scrapes are all behind the server's clock, a backlog, so it holds them all: for the memory that takes; the rate is then of buffering, not attribution (without it, the window is the reorder window, as in a live feed)")
	fs.BoolVar(&o.heapProfile, "heapProfile", false, "save gpuledger's heap profile (/debug/pprof/heap, what is in use once the timed phase is drained) into -out")
	fs.IntVar(&o.profile, "profileSeconds", 0, "take a CPU profile of gpuledger for this many seconds from the start of each timed phase, into -out (/debug/pprof/profile)")
	fs.StringVar(&o.out, "out", "gpuledger-bench/ingest", "folder for runs.csv and the servers' logs")
	exportFile := fs.String("exportFile", "", "instead of measuring: write the first -gpus fleet's -days of telemetry, a scrape every -interval, to this file as VictoriaMetrics export JSON lines (gpuledger's series only, series by series), and its configuration to the file's name + .yaml, for gpuledger ingest -from file://")
	days := fs.Int("days", 31, "with -exportFile: days of telemetry, from 2026-10-01")
	interval := fs.Duration("interval", 15*time.Second, "with -exportFile: the scrape interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *exportFile != "" {
		g, err := intList("-gpus", *gpus)
		if err != nil {
			return err
		}
		if *days < 1 || *interval < time.Second {
			return fmt.Errorf("-days=%d -interval=%s: want at least a day and a second", *days, *interval)
		}
		n, err := writeExportFile(*exportFile, g[0], *days, *interval, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), o.seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: %d GPUs, %d days every %s, %d samples; configuration %s.yaml\n", *exportFile, g[0], *days, *interval, n, *exportFile)
		return nil
	}
	var err error
	if o.gpus, err = intList("-gpus", *gpus); err != nil {
		return err
	}
	if o.senders, err = intList("-senders", *senders); err != nil {
		return err
	}
	o.systems = strings.Split(*systems, ",")
	for _, s := range o.systems {
		if s != "gpuledger" && s != "victoriametrics" {
			return fmt.Errorf("-systems=%q: %q is neither gpuledger nor victoriametrics", *systems, s)
		}
	}
	if o.reps < 1 || o.scrapes < 1 || o.scrapes > 80 {
		return fmt.Errorf("-reps=%d -scrapes=%d: want at least 1 repetition and 1-80 scrapes (20 minutes: the fleet's samples stay in one hour)", o.reps, o.scrapes)
	}
	if _, err := os.Stat(o.gpuledger); err != nil {
		return fmt.Errorf("-gpuledger: %w; run make build first", err)
	}
	if slices.Contains(o.systems, "victoriametrics") {
		if _, err := os.Stat(filepath.Join(o.vmDir, "victoria-metrics")); err != nil {
			return fmt.Errorf("-victoriametrics=%q: %w; build it with tools/build-victoriametrics.sh, which prints the folder", o.vmDir, err)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var all []result
	for _, g := range o.gpus {
		// Stamped two hours ago, 20 minutes into the hour: inside
		// VictoriaMetrics' retention, and one hour gpuledger does not settle
		// while the measurement runs (its clock is set just past the last
		// scrape, see startGpuledger).
		start := time.Now().Add(-2 * time.Hour).Truncate(time.Hour).Add(20 * time.Minute)
		fmt.Fprintf(stderr, "building %d scrapes of %d GPUs...\n", o.scrapes+1, g)
		f := makeFleet(g, o.scrapes+1, start, o.seed)
		fmt.Fprintf(stderr, "%d GPUs: %d series a scrape (%d dcgm-exporter), %d requests, %.1f MB compressed\n",
			g, f.series, f.gpu, len(f.scrapes[0]), float64(f.bytes)/1e6)
		for _, c := range o.senders {
			for rep := range o.reps {
				// The limit is measured again before each repetition: on a
				// shared machine it moves by a fifth and more from minute to
				// minute, and a share is of the limit of its own minutes.
				lim := measureDecode(f)
				fmt.Fprintf(stderr, "decode-only limit: %.2fM samples/s on 1 core, %.2fM on %d\n", lim.one/1e6, lim.all/1e6, lim.procs)
				order := slices.Clone(o.systems)
				if rep%2 == 1 {
					slices.Reverse(order)
				}
				for _, sys := range order {
					if err := ctx.Err(); err != nil {
						return err
					}
					r, err := measure(ctx, o, sys, f, c, rep)
					if err != nil {
						return fmt.Errorf("%s, %d GPUs, %d senders, repetition %d: %w", sys, g, c, rep+1, err)
					}
					r.limit = lim
					fmt.Fprintf(stderr, "  %-15s %5d GPUs  %d senders  rep %d: %.3fM samples/s, %.3fM samples/CPU-s, RSS peak %.0f B/series, settled %.0f B/series; %d retries, %d rejected; cores used: server %.2f, senders %.2f, machine %.0f%% busy\n",
						sys, g, c, rep+1, r.rate()/1e6, r.perCPU()/1e6, r.peakPerSeries(), r.settledPerSeries(), r.retries, r.rejected,
						r.cpuSeconds/r.seconds, r.senderCPU/r.seconds, 100*r.machineBusy)
					all = append(all, r)
				}
			}
		}
	}
	if err := writeCSV(filepath.Join(o.out, "runs.csv"), all); err != nil {
		return err
	}
	report(stdout, o, all)
	return nil
}

func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s=%q: %q is not a positive integer", flagName, s, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one measurement of one system.
type result struct {
	system           string
	gpus, senders    int
	rep              int
	samples          int         // timed samples sent
	series           int         // series a scrape
	seconds          float64     // wall time of the timed scrapes
	cpuSeconds       float64     // the server's user+system CPU over them
	senderCPU        float64     // this program's (the senders') CPU over them
	machineBusy      float64     // the share of all CPUs' time busy over them, 0-1
	peakRSS, settled int64       // bytes: the process' high-water mark, and after it settled
	retries          int         // requests answered 429 or 503 and sent again
	rejected         int         // samples gpuledger counted as rejected
	limit            decodeLimit // measured just before the repetition
}

func (r result) rate() float64             { return float64(r.samples) / r.seconds }
func (r result) perCPU() float64           { return float64(r.samples) / r.cpuSeconds }
func (r result) peakPerSeries() float64    { return float64(r.peakRSS) / float64(r.series) }
func (r result) settledPerSeries() float64 { return float64(r.settled) / float64(r.series) }

// share is the rate over the decode-only limit on all cores, measured
// just before.
func (r result) share() float64 { return r.rate() / r.limit.all }

func writeCSV(path string, rs []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"system", "gpus", "senders", "rep", "samples", "series", "seconds", "cpu_seconds", "peak_rss_bytes", "settled_rss_bytes", "retries", "rejected_samples",
		"samples_per_s", "samples_per_cpu_s", "sender_cpu_seconds", "machine_busy", "decode_only_1_core", "decode_only_all_cores"})
	for _, r := range rs {
		w.Write([]string{r.system, strconv.Itoa(r.gpus), strconv.Itoa(r.senders), strconv.Itoa(r.rep + 1), strconv.Itoa(r.samples), strconv.Itoa(r.series),
			fmt.Sprintf("%.3f", r.seconds), fmt.Sprintf("%.3f", r.cpuSeconds), strconv.FormatInt(r.peakRSS, 10), strconv.FormatInt(r.settled, 10),
			strconv.Itoa(r.retries), strconv.Itoa(r.rejected), fmt.Sprintf("%.0f", r.rate()), fmt.Sprintf("%.0f", r.perCPU()),
			fmt.Sprintf("%.3f", r.senderCPU), fmt.Sprintf("%.3f", r.machineBusy), fmt.Sprintf("%.0f", r.limit.one), fmt.Sprintf("%.0f", r.limit.all)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// spread is min, median and max.
type spread struct{ min, med, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{s[0], med, s[len(s)-1]}
}

func (s spread) format(scale float64, prec int) string {
	return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, s.med/scale, prec, s.min/scale, prec, s.max/scale)
}

func report(w io.Writer, o options, all []result) {
	fmt.Fprintf(w, "benchingest: %d repetitions, %d timed scrapes of 15 s, seed %d, GOMAXPROCS %d, %d CPUs\n",
		o.reps, o.scrapes, o.seed, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintln(w, "median [min-max] over the repetitions; ratios are gpuledger / VictoriaMetrics, of the medians and [min-max] over the repetitions' pairs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPUs | senders | system | M samples/s | M samples/CPU-s | peak RSS B/series | settled RSS B/series | % of decode-only limit |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, g := range o.gpus {
		for _, c := range o.senders {
			for _, sys := range o.systems {
				rs := pick(all, sys, g, c)
				rate := spreadOf(mapf(rs, result.rate))
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s |\n", g, c, sys, rate.format(1e6, 3),
					spreadOf(mapf(rs, result.perCPU)).format(1e6, 3), spreadOf(mapf(rs, result.peakPerSeries)).format(1, 0),
					spreadOf(mapf(rs, result.settledPerSeries)).format(1, 0), spreadOf(mapf(rs, result.share)).format(0.01, 0))
			}
			if len(o.systems) == 2 {
				gl, vm := pick(all, "gpuledger", g, c), pick(all, "victoriametrics", g, c)
				fmt.Fprintf(w, "| %d | %d | ratio | %s | %s | %s | %s | |\n", g, c, ratio(gl, vm, result.rate), ratio(gl, vm, result.perCPU),
					ratio(gl, vm, result.peakPerSeries), ratio(gl, vm, result.settledPerSeries))
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "decode-only limit (snappy + protobuf unmarshal of the same bodies, in this process, before each repetition; a share above is of its own repetition's):")
	for _, g := range o.gpus {
		var one, every []float64
		procs := 0
		for _, r := range all {
			if r.gpus == g && r.system == o.systems[0] {
				one, every, procs = append(one, r.limit.one), append(every, r.limit.all), r.limit.procs
			}
		}
		fmt.Fprintf(w, "  %d GPUs: %sM samples/s on 1 core, %sM on %d\n", g, spreadOf(one).format(1e6, 2), spreadOf(every).format(1e6, 2), procs)
	}
	if len(o.gpus) > 1 && slices.Contains(o.systems, "gpuledger") {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "gpuledger's CPU-seconds per million samples by fleet size (constant means cost grows linearly with the fleet):")
		for _, c := range o.senders {
			var parts []string
			for _, g := range o.gpus {
				s := spreadOf(mapf(pick(all, "gpuledger", g, c), func(r result) float64 { return 1e6 / r.perCPU() }))
				parts = append(parts, fmt.Sprintf("%d GPUs %.3f", g, s.med))
			}
			fmt.Fprintf(w, "  %d senders: %s\n", c, strings.Join(parts, ", "))
		}
	}
}

func pick(all []result, sys string, gpus, senders int) []result {
	var out []result
	for _, r := range all {
		if r.system == sys && r.gpus == gpus && r.senders == senders {
			out = append(out, r)
		}
	}
	return out
}

func mapf(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// ratio is the ratio of the medians, and the range of the ratios of the
// repetitions' pairs (gpuledger and VictoriaMetrics measured back to back).
func ratio(gl, vm []result, f func(result) float64) string {
	a, b := spreadOf(mapf(gl, f)), spreadOf(mapf(vm, f))
	var pairs []float64
	for i := range min(len(gl), len(vm)) {
		pairs = append(pairs, f(gl[i])/f(vm[i]))
	}
	p := spreadOf(pairs)
	return fmt.Sprintf("%.2f [%.2f-%.2f]", a.med/b.med, p.min, p.max)
}
