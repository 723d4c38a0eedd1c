package clickhouse

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkChargebackAtScale loads 12 months of hourly rows for 1,000 teams
// (8.76M rows; GPULEDGER_BENCH_TEAMS and GPULEDGER_BENCH_MONTHS scale it)
// into the embedded store and into ClickHouse side by side, a day at a
// time, then times the monthly chargeback query (one month, by team, flavor
// and borrowed, as reports.Build runs it) on each.
func BenchmarkChargebackAtScale(b *testing.B) {
	teams := benchEnv("GPULEDGER_BENCH_TEAMS", 1000)
	months := benchEnv("GPULEDGER_BENCH_MONTHS", 12)
	ctx := context.Background()
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, months, 0)
	day := func(d time.Time) []ledger.Row {
		rows := make([]ledger.Row, 0, 24*teams)
		for h := range 24 {
			hour := d.Add(time.Duration(h) * time.Hour)
			for tm := range teams {
				rows = append(rows, ledger.Row{
					Key:        ledger.Key{Hour: hour, Cluster: "c1", Team: fmt.Sprintf("team-%04d", tm), Namespace: fmt.Sprintf("ns-%04d", tm), Flavor: []string{"h100", "a100"}[tm%2]},
					GPUSeconds: 3600, ActiveGPUSeconds: 2500, CostMicros: int64(1_000_000 + tm + h), IdleCostMicros: 300_000, EnergyJoules: 1e6, EnergyCostMicros: 100,
				})
			}
		}
		return rows
	}
	var embInsert, chInsert, embQuery, chQuery time.Duration
	var total int
	for i := 0; i < b.N; i++ {
		srv := chtest.StartServer(b, "")
		chs, err := Open(ctx, Options{DSN: srv.DSN()})
		if err != nil {
			b.Fatal(err)
		}
		emb, err := embedded.Open(b.TempDir(), embedded.Options{})
		if err != nil {
			b.Fatal(err)
		}
		total = 0
		for d := start; d.Before(end); d = d.AddDate(0, 0, 1) {
			rows := day(d)
			total += len(rows)
			t0 := time.Now()
			if err := emb.WriteHours(ctx, rows, nil); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := chs.WriteHours(ctx, rows, nil); err != nil {
				b.Fatal(err)
			}
			embInsert += t1.Sub(t0)
			chInsert += time.Since(t1)
		}
		month := end.AddDate(0, -1, 0)
		q := ledger.Query{From: month, To: end, Step: ledger.StepMonth,
			GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimFlavor, ledger.DimBorrowed}}
		for _, st := range []struct {
			s   ledger.Store
			dur *time.Duration
		}{{emb, &embQuery}, {chs, &chQuery}} {
			t0 := time.Now()
			rows, err := st.s.Query(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			*st.dur += time.Since(t0)
			if len(rows) != teams {
				b.Fatalf("%d lines, want %d", len(rows), teams)
			}
		}
		emb.Close()
		chs.Close()
		srv.Kill()
	}
	n := float64(b.N)
	b.ReportMetric(float64(total)*n/embInsert.Seconds(), "embedded-insert-rows/s")
	b.ReportMetric(float64(total)*n/chInsert.Seconds(), "clickhouse-insert-rows/s")
	b.ReportMetric(float64(embQuery.Milliseconds())/n, "embedded-month-query-ms")
	b.ReportMetric(float64(chQuery.Milliseconds())/n, "clickhouse-month-query-ms")
	b.ReportMetric(float64(total), "rows")
}

// BenchmarkExplainMonth loads a month of lines of a fleet of
// GPULEDGER_BENCH_GPUS GPUs (default 10,000; each GPU held all month, by
// a new pod each day, of one of 20 teams) into ClickHouse, a day at a
// time, then times what GET /api/v1/explain asks of it: one team's month
// (its lines summed per GPU and pod), and one workload's.
func BenchmarkExplainMonth(b *testing.B) {
	gpus := benchEnv("GPULEDGER_BENCH_GPUS", 10_000)
	const teams = 20
	ctx := context.Background()
	month := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := month.AddDate(0, 1, 0)
	day := func(d time.Time) []ledger.Line {
		lines := make([]ledger.Line, 0, 24*gpus)
		for h := range 24 {
			hour := d.Add(time.Duration(h) * time.Hour)
			for g := range gpus {
				tm := fmt.Sprintf("team-%02d", g%teams)
				wl := fmt.Sprintf("train-%05d-%02d", g, d.Day())
				lines = append(lines, ledger.Line{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: tm, Namespace: tm, Flavor: "h100"},
					Kind: ledger.LineUsage, Node: fmt.Sprintf("node-%04d", g/8), GPU: strconv.Itoa(g % 8), Pod: wl + "-0", WorkloadKind: "Job", Workload: wl,
					RateMicrosPerHour: 6_880_000, GPUSeconds: 3600, ActiveGPUSeconds: 2400, CostMicros: 6_880_000, IdleCostMicros: 2_293_334})
			}
		}
		return lines
	}
	var insert, teamQuery, workloadQuery time.Duration
	var total, teamLines int
	for i := 0; i < b.N; i++ {
		srv := chtest.StartServer(b, "")
		chs, err := Open(ctx, Options{DSN: srv.DSN()})
		if err != nil {
			b.Fatal(err)
		}
		total = 0
		for d := month; d.Before(end); d = d.AddDate(0, 0, 1) {
			lines := day(d)
			total += len(lines)
			t0 := time.Now()
			if err := chs.WriteLineHours(ctx, lines); err != nil {
				b.Fatal(err)
			}
			insert += time.Since(t0)
		}
		t0 := time.Now()
		got, err := chs.Lines(ctx, ledger.LineQuery{From: month, To: end, Team: "team-07"})
		if err != nil {
			b.Fatal(err)
		}
		teamQuery += time.Since(t0)
		teamLines = len(got)
		if want := gpus / teams * 31; teamLines != want {
			b.Fatalf("team-07's month: %d lines, want %d", teamLines, want)
		}
		t0 = time.Now()
		one, err := chs.Lines(ctx, ledger.LineQuery{From: month, To: end, Team: "team-07", Namespace: "team-07", Workload: "train-00007-15"})
		if err != nil {
			b.Fatal(err)
		}
		workloadQuery += time.Since(t0)
		if len(one) != 1 || one[0].GPUSeconds != 24*3600 {
			b.Fatalf("one workload's month: %+v", one)
		}
		chs.Close()
		srv.Kill()
	}
	n := float64(b.N)
	b.ReportMetric(float64(total)*n/insert.Seconds(), "insert-lines/s")
	b.ReportMetric(float64(teamQuery.Milliseconds())/n, "team-month-explain-ms")
	b.ReportMetric(float64(workloadQuery.Milliseconds())/n, "workload-month-explain-ms")
	b.ReportMetric(float64(total), "lines")
	b.ReportMetric(float64(teamLines), "team-lines")
}
