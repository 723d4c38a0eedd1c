package clickhouse

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

func TestStoreContract(t *testing.T) {
	dsn := chtest.DSN()
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		s, err := Open(context.Background(), Options{DSN: chtest.Database(t, dsn)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMigrationsOnce: opening twice applies nothing the second time.
func TestMigrationsOnce(t *testing.T) {
	dsn := chtest.Database(t, chtest.DSN())
	for range 2 {
		s, err := Open(context.Background(), Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		if err := s.conn.QueryRow(context.Background(), "SELECT count() FROM "+s.db+".gpuledger_schema").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != uint64(len(migrations)-1) {
			t.Errorf("%d migrations recorded, want %d", n, len(migrations)-1)
		}
		s.Close()
	}
}

// TestMonthlyRollupBackfill: a database from before the monthly rollup
// (schema 11) gets it filled from the daily one when opened, and whole
// months read it.
func TestMonthlyRollupBackfill(t *testing.T) {
	ctx := context.Background()
	dsn := chtest.Database(t, chtest.DSN())
	s, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var rows []ledger.Row
	for h := oct.Add(-2 * time.Hour); h.Before(oct.AddDate(0, 1, 2)); h = h.Add(5 * time.Hour) {
		rows = append(rows, ledger.Row{Key: ledger.Key{Hour: h, Cluster: "c", Team: "t", Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 1_000_001})
	}
	if err := s.WriteHours(ctx, rows, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"DROP TABLE {db}.ledger_months",
		// What migration 15 added, so that the database is as version 11
		// left it.
		"ALTER TABLE {db}.endpoint_rows DROP COLUMN gaps_woken, DROP COLUMN gaps_wakes, DROP COLUMN gaps_measured, DROP COLUMN gaps_unmeasured",
		"CREATE TABLE {db}.schema_old (version UInt32, applied DateTime) ENGINE = Log",
		"INSERT INTO {db}.schema_old SELECT version, applied FROM {db}.gpuledger_schema WHERE version <= 11",
		"DROP TABLE {db}.gpuledger_schema",
		"RENAME TABLE {db}.schema_old TO {db}.gpuledger_schema",
	} {
		if err := s.conn.Exec(ctx, strings.ReplaceAll(q, "{db}", s.db)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	if s, err = Open(ctx, Options{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := ledger.Query{From: oct.AddDate(0, -1, 0), To: oct.AddDate(0, 2, 0), Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}}
	if !q.MonthlyRollup() {
		t.Fatal("the query is not one the monthly rollup answers")
	}
	got, err := s.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want := map[time.Time]int64{}
	for _, r := range rows {
		want[time.Date(r.Hour.Year(), r.Hour.Month(), 1, 0, 0, 0, 0, time.UTC)] += r.CostMicros
	}
	if len(got) != len(want) {
		t.Fatalf("%d months after the backfill, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if r.CostMicros != want[r.Hour] {
			t.Errorf("%s: %d micros after the backfill, the hours sum to %d", r.Hour.Format("2006-01"), r.CostMicros, want[r.Hour])
		}
	}
}

// TestRestatementCount: the count the answer cache keys on grows when
// another connection (a backfill's process) rewrites a figure.
func TestRestatementCount(t *testing.T) {
	ctx := context.Background()
	dsn := chtest.Database(t, chtest.DSN())
	serve, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	backfill, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer backfill.Close()
	h := time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)
	row := func(cost int64) []ledger.Row {
		return []ledger.Row{{Key: ledger.Key{Hour: h, Cluster: "c", Team: "t", Flavor: "h100"}, GPUSeconds: 3600, CostMicros: cost}}
	}
	if _, err := ledger.Rewrite(ctx, backfill, row(6_880_000), nil, ledger.Provenance{Source: "live:c"}); err != nil {
		t.Fatal(err)
	}
	before, err := serve.RestatementCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Rewrite(ctx, backfill, row(3_440_000), nil, ledger.Provenance{Source: "backfill:file:///x.jsonl"}); err != nil {
		t.Fatal(err)
	}
	after, err := serve.RestatementCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("restatement count %d after a rewrite, %d before: the cache would not drop the hour", after, before)
	}
}

// TestUnreachable: which errors send a write to the spool. The messages are
// what clickhouse-server 18.16 returned in CI when a replica was killed
// during an insert through the Distributed table.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:9000: connect: connection refused"), true},
		{&ch.Exception{Code: 210, Message: "Connection refused (127.0.0.1:9001)"}, true},
		{&ch.Exception{Code: 32, Message: "Attempt to read after eof: while receiving packet from 127.0.0.1:32937: Insertion status:"}, true},
		{&ch.Exception{Code: 1000, Message: "Connection refused"}, true},
		{&ch.Exception{Code: 32, Message: "Attempt to read after eof"}, false},
		{&ch.Exception{Code: 62, Message: "Syntax error"}, false},
		{&ch.Exception{Code: 53, Message: "Type mismatch"}, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
