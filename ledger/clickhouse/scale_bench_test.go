package clickhouse

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// scaleFleet is a month of what serve writes for one cluster of gpus GPUs
// (eight to a node, one pod holding a node's eight): every hour a held
// node's job ends with probability 1/8 (jobs last 8 hours on average), a
// free node is taken with probability 1/2, so that about 80% of the GPUs
// are held; jobs belong to one of 50 teams, each its own namespace. Each
// GPU-hour is a line (usage or unallocated), each (team, namespace,
// flavor) holding GPUs in the hour a ledger row (plus the unallocated
// row), each job holding GPUs a workload row. Activity is drawn per GPU
// and hour, so the columns compress as real ones do, not as constants.
type scaleFleet struct {
	gpus, teams int
	rng         *rand.Rand
	jobs        []int // per node: the job holding it, -1 when free
	nextJob     int
}

func newScaleFleet(gpus int, seed uint64) *scaleFleet {
	f := &scaleFleet{gpus: gpus, teams: 50, rng: rand.New(rand.NewPCG(seed, 7)), jobs: make([]int, gpus/8)}
	for n := range f.jobs {
		f.jobs[n] = -1
	}
	return f
}

const scaleRate = 6_880_000 // H100, micro-USD per GPU-hour

// hour returns the hour's rows, workload rows and lines.
func (f *scaleFleet) hour(h time.Time) ([]ledger.Row, []ledger.WorkloadRow, []ledger.Line) {
	for n, j := range f.jobs {
		switch {
		case j >= 0 && f.rng.IntN(8) == 0:
			f.jobs[n] = -1
		case j < 0 && f.rng.IntN(2) == 0:
			f.jobs[n] = f.nextJob
			f.nextJob++
		}
	}
	rows := map[string]*ledger.Row{}
	wls := map[int]*ledger.WorkloadRow{}
	lines := make([]ledger.Line, 0, f.gpus)
	unalloc := &ledger.Row{Key: ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}}
	for n, j := range f.jobs {
		node := fmt.Sprintf("gpu-node-%05d", n)
		for g := range 8 {
			if j < 0 {
				lines = append(lines, ledger.Line{Key: unalloc.Key, Kind: ledger.LineUnallocated, Node: node, GPU: strconv.Itoa(g),
					RateMicrosPerHour: scaleRate, RateSource: "price-book", GPUSeconds: 3600, CostMicros: scaleRate, UnallocatedCostMicros: scaleRate})
				unalloc.GPUSeconds += 3600
				unalloc.CostMicros += scaleRate
				unalloc.UnallocatedCostMicros += scaleRate
				continue
			}
			team := fmt.Sprintf("team-%02d", j%f.teams)
			job := fmt.Sprintf("train-%07d", j)
			active := 3600 * (0.3 + 0.7*f.rng.Float64())
			idle := int64(float64(scaleRate) * (3600 - active) / 3600)
			key := ledger.Key{Hour: h, Cluster: "c1", Team: team, Namespace: team, LocalQueue: "training", ClusterQueue: team, Flavor: "h100"}
			lines = append(lines, ledger.Line{Key: key, Kind: ledger.LineUsage, Node: node, GPU: strconv.Itoa(g),
				Pod: job + "-worker-0", WorkloadKind: "Job", Workload: job, RateMicrosPerHour: scaleRate, RateSource: "price-book",
				GPUSeconds: 3600, ActiveGPUSeconds: active, CostMicros: scaleRate, IdleCostMicros: idle})
			r := rows[team]
			if r == nil {
				r = &ledger.Row{Key: key}
				rows[team] = r
			}
			r.GPUSeconds += 3600
			r.ActiveGPUSeconds += active
			r.CostMicros += scaleRate
			r.IdleCostMicros += idle
			w := wls[j]
			if w == nil {
				w = &ledger.WorkloadRow{Hour: h, Cluster: "c1", Team: team, Namespace: team, Kind: "Job", Name: job}
				wls[j] = w
			}
			w.GPUSeconds += 3600
			w.ActiveGPUSeconds += active
			w.CostMicros += scaleRate
			w.IdleCostMicros += idle
		}
	}
	out := make([]ledger.Row, 0, len(rows)+1)
	for _, r := range rows {
		out = append(out, *r)
	}
	if unalloc.GPUSeconds > 0 {
		out = append(out, *unalloc)
	}
	wout := make([]ledger.WorkloadRow, 0, len(wls))
	for _, w := range wls {
		wout = append(wout, *w)
	}
	return out, wout, lines
}

// BenchmarkGPUMonth writes a month (30 days, a day at a time, as serve
// settles them) of one cluster of GPULEDGER_BENCH_GPUS GPUs (a
// comma-separated list; default 1000,10000) into a ClickHouse of its own,
// through the store's own writes (rows, workload rows, lines and the day
// and month roll-ups), then reports per size: the stored rows and bytes
// on disk of each table (system.parts, after merges), the bytes per
// GPU-year (a month's bytes x 365/30 / GPUs), the insert rate, and the
// times of what the API asks of a month: the chargeback (one month by
// team, flavor and borrowed), one team's explain (its lines per GPU and
// pod) and the month's 20 costliest workloads. docs/scale extrapolates
// from these.
func BenchmarkGPUMonth(b *testing.B) {
	sizes := []int{1000, 10_000}
	if v := strings.TrimSpace(os.Getenv("GPULEDGER_BENCH_GPUS")); v != "" {
		sizes = sizes[:0]
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 8 {
				b.Fatalf("GPULEDGER_BENCH_GPUS=%q: want a comma-separated list of GPU counts of at least 8", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, gpus := range sizes {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) { benchGPUMonth(b, gpus) })
	}
}

// scaleRuns seeds each run's fleet differently: -count N gives N draws.
var scaleRuns uint64

func benchGPUMonth(b *testing.B, gpus int) {
	ctx := context.Background()
	month := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	const days = 30
	var insert, chargeback, explain, top time.Duration
	var lines, rows, wrows int
	var stored float64
	var onDisk map[string]float64
	for i := 0; i < b.N; i++ {
		srv := chtest.StartServer(b, "")
		s, err := Open(ctx, Options{DSN: srv.DSN()})
		if err != nil {
			b.Fatal(err)
		}
		scaleRuns++
		f := newScaleFleet(gpus, scaleRuns)
		lines, rows, wrows = 0, 0, 0
		for d := range days {
			var dr []ledger.Row
			var dw []ledger.WorkloadRow
			var dl []ledger.Line
			for h := range 24 {
				r, w, l := f.hour(month.Add(time.Duration(d*24+h) * time.Hour))
				dr, dw, dl = append(dr, r...), append(dw, w...), append(dl, l...)
			}
			rows, wrows, lines = rows+len(dr), wrows+len(dw), lines+len(dl)
			t0 := time.Now()
			if err := s.WriteHours(ctx, dr, dw); err != nil {
				b.Fatal(err)
			}
			if err := s.WriteLineHours(ctx, dl); err != nil {
				b.Fatal(err)
			}
			insert += time.Since(t0)
		}
		end := month.AddDate(0, 0, days)
		t0 := time.Now()
		got, err := s.Query(ctx, ledger.Query{From: month, To: end, Step: ledger.StepMonth,
			GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimFlavor, ledger.DimBorrowed}})
		if err != nil || len(got) == 0 {
			b.Fatalf("chargeback: %d rows, %v", len(got), err)
		}
		chargeback += time.Since(t0)
		t0 = time.Now()
		ls, err := s.Lines(ctx, ledger.LineQuery{From: month, To: end, Team: "team-07"})
		if err != nil || len(ls) == 0 {
			b.Fatalf("explain: %d lines, %v", len(ls), err)
		}
		explain += time.Since(t0)
		t0 = time.Now()
		ws, err := s.TopWorkloads(ctx, ledger.Query{From: month, To: end}, 20)
		if err != nil || len(ws) != 20 {
			b.Fatalf("top workloads: %d, %v", len(ws), err)
		}
		top += time.Since(t0)
		stored, onDisk = tableSizes(b, s)
		s.Close()
		srv.Kill()
	}
	n := float64(b.N)
	gpuYears := float64(gpus) * days / 365
	b.ReportMetric(float64(lines+rows+wrows)*n/insert.Seconds(), "insert-rows/s")
	b.ReportMetric(float64(lines)/gpuYears, "lines/GPU-year")
	b.ReportMetric(float64(rows)/gpuYears, "ledger-rows/GPU-year")
	b.ReportMetric(float64(wrows)/gpuYears, "workload-rows/GPU-year")
	var total float64
	for t, v := range onDisk {
		total += v
		b.ReportMetric(v/gpuYears, t+"-B/GPU-year")
	}
	b.ReportMetric(total/gpuYears, "disk-B/GPU-year")
	b.ReportMetric(stored/gpuYears, "stored-rows/GPU-year")
	b.ReportMetric(float64(chargeback.Milliseconds())/n, "month-chargeback-ms")
	b.ReportMetric(float64(explain.Milliseconds())/n, "team-month-explain-ms")
	b.ReportMetric(float64(top.Milliseconds())/n, "month-top-workloads-ms")
}

// tableSizes merges every table of the store's database and returns the
// rows of all of them and each table's bytes on disk, from
// system.parts' active parts.
func tableSizes(b *testing.B, s *Store) (rows float64, disk map[string]float64) {
	ctx := context.Background()
	tr, err := s.conn.Query(ctx, `SELECT DISTINCT table FROM system.parts WHERE database = ? AND active`, s.db)
	if err != nil {
		b.Fatal(err)
	}
	var tables []string
	for tr.Next() {
		var t string
		if err := tr.Scan(&t); err != nil {
			b.Fatal(err)
		}
		tables = append(tables, t)
	}
	tr.Close()
	for _, t := range tables {
		if err := s.conn.Exec(ctx, `OPTIMIZE TABLE `+s.db+`.`+t+` FINAL`); err != nil {
			b.Fatalf("optimize %s: %v", t, err)
		}
	}
	r, err := s.conn.Query(ctx, `SELECT table, sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = ? AND active GROUP BY table`, s.db)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	disk = map[string]float64{}
	for r.Next() {
		var t string
		var n, d uint64
		if err := r.Scan(&t, &n, &d); err != nil {
			b.Fatal(err)
		}
		rows += float64(n)
		disk[t] = float64(d)
	}
	return rows, disk
}
