package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// benchLedger writes 90 days of 20 teams on two flavors (86,400 hourly
// rows, 43,200 workload rows) into a ledger in a new folder.
func benchLedger(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for day := range 90 {
		var rows []ledger.Row
		var wls []ledger.WorkloadRow
		for h := range 24 {
			hour := start.Add(time.Duration(day*24+h) * time.Hour)
			for t := range 20 {
				team := fmt.Sprintf("team-%02d", t)
				for _, f := range []string{"h100", "a100"} {
					rows = append(rows, ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: team, Namespace: team, ClusterQueue: team, Flavor: f},
						GPUSeconds: 3600 * 4, ActiveGPUSeconds: 3600, CostMicros: int64(27_520_000 + t), IdleCostMicros: 20_640_000})
				}
				wls = append(wls, ledger.WorkloadRow{Hour: hour, Cluster: "c1", Team: team, Namespace: team, Kind: "Job",
					Name: fmt.Sprintf("job-%d", (day*24+h)/6), GPUSeconds: 3600, CostMicros: 6_880_000, IdleCostMicros: int64(t * 1000)})
			}
		}
		if err := s.WriteHours(context.Background(), rows, wls); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkQuery reads a ledger as the cost API does: a month by day by
// team (daily rollup), a week by hour by team and flavor, a quarter by
// month (monthly rollup), one team's month by day, and the month's most
// idle workloads. Every read checks the rows it reads (check.go).
func BenchmarkQuery(b *testing.B) {
	s := benchLedger(b)
	ctx := context.Background()
	aug := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		q    ledger.Query
	}{
		{"month-by-day", ledger.Query{From: aug, To: aug.AddDate(0, 1, 0), Step: ledger.StepDay, GroupBy: []ledger.Dimension{ledger.DimTeam}}},
		{"week-by-hour", ledger.Query{From: aug, To: aug.AddDate(0, 0, 7), Step: ledger.StepHour, GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimFlavor}}},
		{"quarter-by-month", ledger.Query{From: aug.AddDate(0, -1, 0), To: aug.AddDate(0, 2, 0), Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}}},
		{"team-month-by-day", ledger.Query{From: aug, To: aug.AddDate(0, 1, 0), Step: ledger.StepDay, Team: "team-07"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				rows, err := s.Query(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				n = len(rows)
			}
			b.ReportMetric(float64(n), "rows")
		})
	}
	b.Run("top-workloads", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.TopWorkloads(ctx, ledger.Query{From: aug, To: aug.AddDate(0, 1, 0)}, 20); err != nil {
				b.Fatal(err)
			}
		}
	})
}
