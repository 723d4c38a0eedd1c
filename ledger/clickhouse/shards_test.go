package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// clusterDDL is deploy/clickhouse/cluster.sql for a cluster without
// ZooKeeper: no ON CLUSTER, and ReplacingMergeTree for its replicated form.
// local keeps the local tables; otherwise only the Distributed ones.
func clusterDDL(t *testing.T, local bool) []string {
	t.Helper()
	replicated := regexp.MustCompile(`ReplicatedReplacingMergeTree\('[^']*', '\{replica\}', version\)`)
	replicatedPlain := regexp.MustCompile(`ReplicatedMergeTree\('[^']*', '\{replica\}'\)`)
	var out []string
	for _, stmt := range chtest.ClusterSQL(t, "gpuledger", false) {
		stmt = replicated.ReplaceAllString(stmt, "ReplacingMergeTree(version)")
		stmt = replicatedPlain.ReplaceAllString(stmt, "MergeTree")
		isDist := strings.Contains(stmt, "ENGINE = Distributed")
		if isDist != local || strings.HasPrefix(stmt, "CREATE DATABASE") {
			out = append(out, stmt)
		}
	}
	return out
}

func execAll(t *testing.T, dsn string, stmts []string) {
	t.Helper()
	conn := chtest.Conn(t, dsn)
	for _, s := range stmts {
		if err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}

func countRows(t *testing.T, dsn, table string) uint64 {
	t.Helper()
	conn := chtest.Conn(t, dsn)
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTwoShards runs deploy/clickhouse/cluster.sql (without ZooKeeper:
// plain ReplacingMergeTree, no ON CLUSTER) on two clickhouse-server
// processes as two shards, writes three months through the Distributed
// tables, and gets the ledger one store without shards holds.
func TestTwoShards(t *testing.T) {
	s1, s2 := chtest.NewServer(t), chtest.NewServer(t)
	remote := fmt.Sprintf(`<remote_servers><gpuledger>
		<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>
		<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>
	</gpuledger></remote_servers>`, s1.TCP, s2.TCP)
	for _, s := range []*chtest.Server{s1, s2} {
		s.SetExtra(remote)
		s.Start()
		execAll(t, s.DSN(), clusterDDL(t, true))
	}
	execAll(t, s1.DSN(), clusterDDL(t, false))

	ctx := context.Background()
	dsn := fmt.Sprintf("clickhouse://127.0.0.1:%d/gpuledger?insert_distributed_sync=1", s1.TCP)
	copts := Options{DSN: dsn}
	copts.UseDistributed()
	cluster, err := Open(ctx, copts)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	const hours = 24 * 92
	for start := 0; start < hours; start += 24 {
		var rows []ledger.Row
		var wls []ledger.WorkloadRow
		for i := start; i < start+24; i++ {
			r, w := hourRows(i)
			rows, wls = append(rows, r...), append(wls, w...)
		}
		if err := cluster.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	// Rewrite a few hours with fewer rows: the old rows must stop counting.
	for _, i := range []int{5, 700, 2000} {
		rows, _ := hourRows(i)
		if err := cluster.WriteHours(ctx, rows[:1], nil); err != nil {
			t.Fatal(err)
		}
	}
	want := reference(t, hours, nil)
	for _, i := range []int{5, 700, 2000} {
		rows, _ := hourRows(i)
		if err := want.WriteHours(ctx, rows[:1], nil); err != nil {
			t.Fatal(err)
		}
	}
	q := ledger.Query{From: h0, To: h0.Add(hours * time.Hour), Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}}
	a, err := want.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("monthly totals through the shards:\n%v\nwant\n%v", b, a)
	}
	sameAs(t, want, cluster, hours)
	n1, n2 := countRows(t, s1.DSN(), "gpuledger.ledger_rows"), countRows(t, s2.DSN(), "gpuledger.ledger_rows")
	if n1 == 0 || n2 == 0 {
		t.Errorf("shard rows %d and %d: both shards should hold some", n1, n2)
	}
	t.Logf("rows per shard: %d and %d", n1, n2)
	// The lines through line_rows_all, as on one server.
	ledgertest.RunLines(t, cluster)
}
