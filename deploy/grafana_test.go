package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// expandMacros expands the ClickHouse data source's macros and the
// dashboard's variables as Grafana does for a range and a cluster.
func expandMacros(sql string, from, to time.Time, cluster string) string {
	col := func(macro string, f func(string) string) {
		for {
			i := strings.Index(sql, macro+"(")
			if i < 0 {
				return
			}
			j := strings.Index(sql[i:], ")")
			c := sql[i+len(macro)+1 : i+j]
			sql = sql[:i] + f(c) + sql[i+j+1:]
		}
	}
	col("$__timeFilter", func(c string) string {
		return fmt.Sprintf("%s >= toDateTime(%d) AND %s <= toDateTime(%d)", c, from.Unix(), c, to.Unix())
	})
	return strings.ReplaceAll(sql, "${cluster:singlequote}", "'"+cluster+"'")
}

// TestGrafanaPanelsRunOnClickHouse runs every panel's query of the
// dashboards against the real ClickHouse of CI, on a ledger gpuledger wrote
// (one hour written twice: only its newest version counts), and requires
// rows; the range's cost by team is the ledger's to the micro.
func TestGrafanaPanelsRunOnClickHouse(t *testing.T) {
	dsn := chtest.Database(t, chtest.DSN())
	ctx := context.Background()
	store, err := clickhouse.Open(ctx, clickhouse.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	hourRows := func(h time.Time, mlCost int64) []ledger.Row {
		k := func(team string) ledger.Key {
			return ledger.Key{Hour: h, Cluster: "c1", Team: team, Namespace: team, LocalQueue: "q", ClusterQueue: "train", Flavor: "h100"}
		}
		return []ledger.Row{
			{Key: k("ml"), GPUSeconds: 7200, ActiveGPUSeconds: 3600, CostMicros: mlCost, IdleCostMicros: mlCost / 2},
			{Key: k("vision"), GPUSeconds: 3600, UnmeasuredGPUSeconds: 3600, CostMicros: 6_880_000, UnmeasuredCostMicros: 6_880_000},
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 6_880_000, UnallocatedCostMicros: 6_880_000},
		}
	}
	var rows []ledger.Row
	for i := range 24 {
		rows = append(rows, hourRows(start.Add(time.Duration(i)*time.Hour), 13_760_000)...)
	}
	wl := []ledger.WorkloadRow{{Hour: start, Cluster: "c1", Team: "ml", Namespace: "ml", Kind: "Job", Name: "train-1", GPUSeconds: 7200, ActiveGPUSeconds: 3600,
		CostMicros: 13_760_000, IdleCostMicros: 6_880_000}}
	if err := store.WriteHours(ctx, rows, wl); err != nil {
		t.Fatal(err)
	}
	// Hour 5 rewritten (a late correction): ml cost 1.00 there now.
	if err := store.WriteHours(ctx, hourRows(start.Add(5*time.Hour), 1_000_000), nil); err != nil {
		t.Fatal(err)
	}
	conn := chtest.Conn(t, dsn)

	b, err := os.ReadFile("grafana/gpuledger-cost.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ RawSQL string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Panels) < 5 {
		t.Fatalf("%d panels", len(dash.Panels))
	}
	from, to := start, start.Add(24*time.Hour)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			sql := expandMacros(tg.RawSQL, from, to, "c1")
			if strings.Contains(sql, "$") {
				t.Errorf("%s: a macro or variable left unexpanded: %s", p.Title, sql)
				continue
			}
			rs, err := conn.Query(ctx, sql)
			if err != nil {
				t.Errorf("%s: %v\n%s", p.Title, err, sql)
				continue
			}
			n := 0
			for rs.Next() {
				n++
			}
			rs.Close()
			if n == 0 {
				t.Errorf("%s: no rows", p.Title)
			}
			t.Logf("%s: %d rows", p.Title, n)
		}
	}
	// The range's cost by team: ml's 23 hours at 13.76 and the rewritten
	// one at 1.00, as the ledger has it.
	sql := expandMacros(dash.Panels[1].Targets[0].RawSQL, from, to, "c1")
	sql = strings.Replace(sql, "sum(cost) AS cost", "toString(sum(cost)) AS cost", 1)
	rs, err := conn.Query(ctx, strings.Replace(sql, "sum(idle_cost) AS idle_cost", "toString(sum(idle_cost)) AS idle_cost", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got := map[string]string{}
	for rs.Next() {
		var team, cost, idle string
		if err := rs.Scan(&team, &cost, &idle); err != nil {
			t.Fatal(err)
		}
		got[team] = cost
	}
	want, err := store.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		if g, err := ledger.ParseMicros(got[r.Team]); err != nil || g != r.CostMicros {
			t.Errorf("%s: the panel says %q, the ledger %d micros", r.Team, got[r.Team], r.CostMicros)
		}
	}
	if got["ml"] == "" || !strings.HasPrefix(got["ml"], "317.48") {
		t.Errorf("ml's cost %q, want 317.48 (23 × 13.76 + 1.00)", got["ml"])
	}
}
