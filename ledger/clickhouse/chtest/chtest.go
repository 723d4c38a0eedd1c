// Package chtest gives tests a ClickHouse database of their own on the
// server CI starts.
package chtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// DSN is the test server: $GPULEDGER_CLICKHOUSE_DSN, else the one .ci/run
// starts on 127.0.0.1:9000.
func DSN() string {
	if d := os.Getenv("GPULEDGER_CLICKHOUSE_DSN"); d != "" {
		return d
	}
	return "clickhouse://127.0.0.1:9000/default"
}

// Database creates a database for the test on the server at dsn, dropped
// when the test ends, and returns its DSN. Outside CI an unreachable server
// skips the test; under CI=true it fails it.
func Database(t testing.TB, dsn string) string {
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
		msg := fmt.Sprintf("no ClickHouse at %s (%v); start one with tools/clickhouse-test-server.sh or set GPULEDGER_CLICKHOUSE_DSN", dsn, err)
		testenv.Missing(t, "%s", msg)
	}
	defer conn.Close()
	db := fmt.Sprintf("gpuledger_test_%d_%d", time.Now().UnixNano(), rand.IntN(1e6))
	if err := conn.Exec(context.Background(), "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := ch.Open(opts); err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			c.Close()
		}
	})
	return fmt.Sprintf("clickhouse://%s/%s", opts.Addr[0], db)
}

// Conn is a connection to the server and database of dsn, closed when the
// test ends.
func Conn(t testing.TB, dsn string) ch.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
