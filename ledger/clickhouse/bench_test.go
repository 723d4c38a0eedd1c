package clickhouse

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
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
		srv := startServer(b, "")
		chs, err := Open(ctx, Options{DSN: srv.dsn()})
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
		srv.kill()
	}
	n := float64(b.N)
	b.ReportMetric(float64(total)*n/embInsert.Seconds(), "embedded-insert-rows/s")
	b.ReportMetric(float64(total)*n/chInsert.Seconds(), "clickhouse-insert-rows/s")
	b.ReportMetric(float64(embQuery.Milliseconds())/n, "embedded-month-query-ms")
	b.ReportMetric(float64(chQuery.Milliseconds())/n, "clickhouse-month-query-ms")
	b.ReportMetric(float64(total), "rows")
}
