package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// TestThreeClusters: one ledger holding three clusters' hours answers per
// cluster and across them: the cost API by cluster and filtered to one,
// each cluster's chargeback and FOCUS export, OpenCost's allocation by
// cluster; every answer across clusters is the sum of the per-cluster
// ones, to the micro. On the embedded ledger, and on one ClickHouse
// database written by three stores (as three serve instances, one per
// cluster, write it) and read by a fourth.
func TestThreeClusters(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		s := testStore(t)
		threeClusters(t, s, func(string) ledger.Store { return s })
	})
	t.Run("clickhouse", func(t *testing.T) {
		dsn := chtest.Database(t, chtest.DSN())
		open := func() ledger.Store {
			s, err := clickhouse.Open(context.Background(), clickhouse.Options{DSN: dsn, SpoolDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		writers := map[string]ledger.Store{}
		threeClusters(t, open(), func(cluster string) ledger.Store {
			if writers[cluster] == nil {
				writers[cluster] = open()
			}
			return writers[cluster]
		})
	})
}

func threeClusters(t *testing.T, store ledger.Store, writer func(cluster string) ledger.Store) {
	cost := map[string]int64{"c1": 6_880_000, "c2": 3_430_901, "c3": 526_003}
	for cl, c := range cost {
		var rows []ledger.Row
		for h := range 48 {
			hour := time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC)
			rows = append(rows,
				ledger.Row{Key: ledger.Key{Hour: hour, Cluster: cl, Team: "ml", Namespace: "ml", Flavor: "h100"}, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: c, IdleCostMicros: c / 2},
				ledger.Row{Key: ledger.Key{Hour: hour, Cluster: cl, Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: 1800, CostMicros: c / 3, UnallocatedCostMicros: c / 3})
		}
		if err := writer(cl).WriteHours(context.Background(), rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv := New(Options{Store: store})
	month := map[string]int64{}
	var all int64
	for cl, c := range cost {
		month[cl] = 48 * (c + c/3)
		all += month[cl]
	}

	var resp CostResponse
	code, _, body := get(t, srv, "/api/v1/cost?from=2026-10&to=2026-11&step=month&groupBy=cluster")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &resp) != nil {
		t.Fatalf("cost by cluster: %d %s", code, body)
	}
	got := map[string]int64{}
	for _, p := range resp.Points {
		got[p.Cluster] += p.CostMicros
	}
	if len(got) != 3 || resp.TotalCostMicros != all {
		t.Errorf("cost by cluster: %v, total %d; want %v, total %d", got, resp.TotalCostMicros, month, all)
	}
	for cl, want := range month {
		if got[cl] != want {
			t.Errorf("cluster %s: %d, want %d", cl, got[cl], want)
		}
		var one CostResponse
		_, _, body := get(t, srv, "/api/v1/cost?from=2026-10&to=2026-11&step=month&groupBy=team&cluster="+cl)
		if json.Unmarshal([]byte(body), &one) != nil || one.TotalCostMicros != want {
			t.Errorf("cost of cluster %s alone: %s; want %d", cl, body, want)
		}
		for _, format := range []string{"csv", "focus"} {
			_, _, body = get(t, srv, "/api/v1/reports/chargeback/2026-10?format="+format+"&cluster="+cl)
			if sum := csvSum(t, body, map[string]string{"csv": "charge", "focus": "EffectiveCost"}[format], format == "csv"); sum != want {
				t.Errorf("cluster %s's %s: %d, want %d", cl, format, sum, want)
			}
			if format == "focus" && strings.Count(body, ","+cl+","+cl+",") != strings.Count(body, "\n")-1 {
				t.Errorf("cluster %s's FOCUS rows are not all of billing account %s:\n%.500s", cl, cl, body)
			}
		}
	}
	_, _, body = get(t, srv, "/api/v1/reports/chargeback/2026-10?format=csv")
	if sum := csvSum(t, body, "charge", true); sum != all {
		t.Errorf("the chargeback across clusters: %d, want %d", sum, all)
	}
	r := allocations(t, srv, "window=2026-10-01T00:00:00Z,2026-11-01T00:00:00Z&aggregate=cluster&accumulate=true")
	var names []string
	for name := range r.Data[0] {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"__idle__", "c1", "c2", "c3"}) || setMicros(r.Data[0]) != all {
		t.Errorf("allocation by cluster: %v summing to %d, want c1-c3 and __idle__ summing to %d", names, setMicros(r.Data[0]), all)
	}
}

// csvSum sums a column of a CSV answer in micros: with total, the TOTAL
// line's value, else every line's.
func csvSum(t *testing.T, body, column string, total bool) int64 {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("not CSV: %v\n%s", err, body)
	}
	col := slices.Index(recs[0], column)
	if col < 0 {
		t.Fatalf("no column %s in %v", column, recs[0])
	}
	var sum int64
	for _, r := range recs[1:] {
		if total && r[0] != "TOTAL" {
			continue
		}
		v, err := ledger.ParseMicros(r[col])
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}
