package clickhouse

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// testDSN is the server the tests use: $GPULEDGER_CLICKHOUSE_DSN, else the
// one .ci/run starts.
func testDSN() string {
	if d := os.Getenv("GPULEDGER_CLICKHOUSE_DSN"); d != "" {
		return d
	}
	return "clickhouse://127.0.0.1:9000/default"
}

// freshDatabase creates a database of its own for a test on the server at
// dsn and returns its DSN. Outside CI an unreachable server skips the test;
// under CI=true it fails it.
func freshDatabase(t testing.TB, dsn string) string {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	opts.DialTimeout = 2 * time.Second
	conn, err := ch.Open(opts)
	if err == nil {
		err = conn.Ping(context.Background())
	}
	if err != nil {
		msg := fmt.Sprintf("no ClickHouse at %s (%v); start one (see .ci/run) or set GPULEDGER_CLICKHOUSE_DSN", dsn, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	defer conn.Close()
	db := fmt.Sprintf("gpuledger_test_%d_%d", time.Now().UnixNano(), rand.IntN(1e6))
	if err := conn.Exec(context.Background(), "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := ch.Open(opts)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			c.Close()
		}
	})
	opts.Auth.Database = db
	return fmt.Sprintf("clickhouse://%s/%s", opts.Addr[0], db)
}

func TestStoreContract(t *testing.T) {
	dsn := testDSN()
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		s, err := Open(context.Background(), Options{DSN: freshDatabase(t, dsn)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMigrationsOnce: opening twice applies nothing the second time.
func TestMigrationsOnce(t *testing.T) {
	dsn := freshDatabase(t, testDSN())
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
