// Command scaleestimate reads BenchmarkGPUMonth's output (ledger/clickhouse,
// one line per run and fleet size) and prints what the measured points say
// per GPU-year, then what a fleet of -gpus GPUs across -clusters clusters
// needs for a year: ClickHouse rows and disk, the hourly write, the month
// queries (fitted as a + b x GPUs through the two largest measured sizes),
// and the serve processes' ingest CPU and memory from -samplesPerCPUSecond
// and -bytesPerSeries (docs/ingest/benchmarks.md's measured figures).
//
//	go run ./tools/scaleestimate -in docs/scale/bench-gpu-month.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	fs := flag.NewFlagSet("scaleestimate", flag.ExitOnError)
	in := fs.String("in", "", "BenchmarkGPUMonth's output (go test -bench BenchmarkGPUMonth -count N ./ledger/clickhouse/)")
	gpus := fs.Int("gpus", 100_000, "GPUs of the fleet to estimate")
	clusters := fs.Int("clusters", 20, "clusters the fleet's GPUs are in (one serve each)")
	replicas := fs.Int("replicas", 2, "copies ClickHouse keeps of each row (replicas per shard), and serve replicas per cluster")
	counters := fs.Int("counters", 25, "dcgm-exporter counters per GPU (dcgm-exporter's default-counters.csv has 25)")
	scrape := fs.Float64("scrapeSeconds", 15, "scrape interval, seconds")
	perCPU := fs.Float64("samplesPerCPUSecond", 0, "serve's measured ingest rate, samples per CPU-second (docs/ingest/benchmarks.md)")
	perSeries := fs.Float64("bytesPerSeries", 0, "serve's measured peak resident memory per series, bytes (docs/ingest/benchmarks.md)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: scaleestimate -in FILE [flags]\n\nEstimates what a GPU fleet's ledger needs from BenchmarkGPUMonth's measurements.\n\n")
		fs.PrintDefaults()
	}
	fs.Parse(os.Args[1:])
	if *in == "" || *perCPU <= 0 || *perSeries <= 0 {
		fmt.Fprintln(os.Stderr, "scaleestimate: -in, -samplesPerCPUSecond and -bytesPerSeries are required (see -help)")
		os.Exit(2)
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleestimate:", err)
		os.Exit(1)
	}
	runs, err := parse(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scaleestimate: %s: %v\n", *in, err)
		os.Exit(1)
	}
	if len(runs) < 2 {
		fmt.Fprintf(os.Stderr, "scaleestimate: %s: want runs at two fleet sizes or more, found %d sizes\n", *in, len(runs))
		os.Exit(1)
	}
	e := estimate{runs: runs, gpus: *gpus, clusters: *clusters, replicas: *replicas, counters: *counters,
		scrape: *scrape, perCPU: *perCPU, perSeries: *perSeries}
	e.write(os.Stdout)
}

// runs maps a fleet size to its runs' metrics (unit -> one value per run).
type runs map[int]map[string][]float64

var benchLine = regexp.MustCompile(`^BenchmarkGPUMonth/gpus=(\d+)(-\d+)?\s+\d+\s+\S+ ns/op\s+(.*)$`)

func parse(r io.Reader) (runs, error) {
	out := runs{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		gpus, _ := strconv.Atoi(m[1])
		f := strings.Fields(m[3])
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: metrics %q: want value-unit pairs", line, m[3])
		}
		if out[gpus] == nil {
			out[gpus] = map[string][]float64{}
		}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: metric %s: value %q: want a number", line, f[i+1], f[i])
			}
			out[gpus][f[i+1]] = append(out[gpus][f[i+1]], v)
		}
	}
	return out, sc.Err()
}

type estimate struct {
	runs                               runs
	gpus, clusters, replicas, counters int
	scrape, perCPU, perSeries          float64
}

// med is the median of a size's runs of unit; 0 when absent.
func (e *estimate) med(size int, unit string) float64 {
	v := slices.Clone(e.runs[size][unit])
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// spread is "median [min-max]" of a size's runs of unit.
func (e *estimate) spread(size int, unit string, format func(float64) string) string {
	v := e.runs[size][unit]
	if len(v) == 0 {
		return "-"
	}
	if len(v) == 1 {
		return format(v[0])
	}
	return fmt.Sprintf("%s [%s-%s]", format(e.med(size, unit)), format(slices.Min(v)), format(slices.Max(v)))
}

// fit is a + b x gpus through the medians of the two largest sizes.
func (e *estimate) fit(unit string, gpus float64) float64 {
	sizes := e.sizes()
	x0, x1 := sizes[len(sizes)-2], sizes[len(sizes)-1]
	y0, y1 := e.med(x0, unit), e.med(x1, unit)
	b := (y1 - y0) / float64(x1-x0)
	return max(y1+b*(gpus-float64(x1)), 0)
}

func (e *estimate) sizes() []int {
	var s []int
	for k := range e.runs {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

func (e *estimate) write(w io.Writer) {
	sizes := e.sizes()
	largest := sizes[len(sizes)-1]
	n := len(e.runs[largest]["disk-B/GPU-year"])
	fmt.Fprintf(w, "Measured (one cluster, a month written as serve writes it, then scaled to a year), median [min-max] over %d runs:\n\n", n)
	e.table(w, "per GPU-year", []metric{
		{"rows stored (all tables)", "stored-rows/GPU-year"},
		{"of them lines (per GPU and pod, for explain)", "lines/GPU-year"},
		{"ledger rows", "ledger-rows/GPU-year"},
		{"workload rows", "workload-rows/GPU-year"},
		{"bytes on disk (all tables, compressed, one copy)", "disk-B/GPU-year"},
		{"of them lines", "line_rows-B/GPU-year"},
	})
	fmt.Fprintln(w)
	e.table(w, "per month of one cluster", []metric{
		{"insert, rows/s", "insert-rows/s"},
		{"chargeback (by team, flavor, borrowed), ms", "month-chargeback-ms"},
		{"one team's explain (lines per GPU and pod), ms", "team-month-explain-ms"},
		{"20 costliest workloads, ms", "month-top-workloads-ms"},
	})

	g := float64(e.gpus)
	perCluster := g / float64(e.clusters)
	storedRows := e.med(largest, "stored-rows/GPU-year") * g
	disk := e.med(largest, "disk-B/GPU-year") * g * float64(e.replicas)
	hourRows := storedRows / 8760
	insertS := hourRows / e.med(largest, "insert-rows/s")
	series := g * float64(e.counters)
	samplesPerS := series / e.scrape
	cores := samplesPerS / e.perCPU * float64(e.replicas)
	mem := series * e.perSeries * float64(e.replicas)
	fmt.Fprintf(w, "\n%s GPUs in %d clusters (%s GPUs each), a year, %d copies of everything (ClickHouse replicas per shard, serve replicas per cluster); per-GPU figures of the %s-GPU runs, query times fitted as a + b x GPUs through the %s- and %s-GPU medians:\n\n",
		thousands(g), e.clusters, thousands(perCluster), e.replicas, thousands(float64(largest)), thousands(float64(sizes[len(sizes)-2])), thousands(float64(largest)))
	fmt.Fprintln(w, "| what | estimate |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| rows stored a year | %s |\n", thousands(storedRows))
	fmt.Fprintf(w, "| ClickHouse disk a year, all copies | %.1f GiB |\n", disk/(1<<30))
	fmt.Fprintf(w, "| rows written an hour (all clusters) | %s, %.1f s of one ClickHouse's measured insert |\n", thousands(hourRows), insertS)
	fmt.Fprintf(w, "| a cluster's month chargeback | %s ms |\n", thousands(e.fit("month-chargeback-ms", perCluster)))
	fmt.Fprintf(w, "| a team's month explain (50 teams a cluster) | %s ms |\n", thousands(e.fit("team-month-explain-ms", perCluster)))
	fmt.Fprintf(w, "| the whole fleet's month chargeback in one query | %s ms |\n", thousands(e.fit("month-chargeback-ms", g)))
	fmt.Fprintf(w, "| the whole fleet's 20 costliest workloads of a month in one query | %s ms |\n", thousands(e.fit("month-top-workloads-ms", g)))
	fmt.Fprintf(w, "| serve processes | %d (%d clusters x %d) |\n", e.clusters*e.replicas, e.clusters, e.replicas)
	fmt.Fprintf(w, "| samples a second (%d counters, %g s scrapes) | %s |\n", e.counters, e.scrape, thousands(samplesPerS))
	fmt.Fprintf(w, "| serve CPU, all replicas (%s samples per CPU-second) | %.2f cores |\n", thousands(e.perCPU), cores)
	fmt.Fprintf(w, "| serve memory, all replicas (%s B per series) | %.1f GiB |\n", thousands(e.perSeries), mem/(1<<30))
}

// metric is a table's row: its name, and the benchmark's unit it shows.
type metric struct{ name, unit string }

// table writes a markdown table of the metrics, a column per fleet size.
func (e *estimate) table(w io.Writer, title string, metrics []metric) {
	sizes := e.sizes()
	fmt.Fprintf(w, "| %s |", title)
	for _, s := range sizes {
		fmt.Fprintf(w, " %s GPUs |", thousands(float64(s)))
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(sizes)))
	for _, m := range metrics {
		fmt.Fprintf(w, "| %s |", m.name)
		for _, s := range sizes {
			fmt.Fprintf(w, " %s |", e.spread(s, m.unit, thousands))
		}
		fmt.Fprintln(w)
	}
}

// thousands formats v rounded to an integer with thousands separators, or
// with one decimal when below 10.
func thousands(v float64) string {
	if v < 10 && v != float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
