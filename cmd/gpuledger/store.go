package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// defaultLedgerPath is where serve, ingest and report keep the embedded
// ledger unless -ledger.path says otherwise: one place, so that a report
// reads what ingest wrote. The demo keeps its simulated ledger apart, in
// its -out folder.
const defaultLedgerPath = "gpuledger-data/ledger"

// storeMode is what a command does with the ledger.
type storeMode int

const (
	// storeWrite creates the embedded ledger when it is not there.
	storeWrite storeMode = iota
	// storeServe is storeWrite for serve, with -clickhouse.comparePeers.
	storeServe
	// storeRead fails on a missing embedded ledger instead of creating
	// an empty one.
	storeRead
	// storeVerify is storeRead without the check at open: verify runs the
	// whole one, and reports what it finds.
	storeVerify
)

// storeFlags registers the ledger flags and returns what opens the store.
func storeFlags(fs *flag.FlagSet, defaultPath string, mode storeMode) func(ctx context.Context, log *slog.Logger) (ledger.Store, error) {
	kind := fs.String("ledger.store", "embedded", "ledger backend: embedded (SQLite file, no server) or clickhouse")
	path := fs.String("ledger.path", defaultPath, "embedded ledger directory")
	dsn := fs.String("clickhouse.dsn", "clickhouse://127.0.0.1:9000/default", "ClickHouse server and database, for -ledger.store=clickhouse")
	spool := fs.String("clickhouse.spoolDir", "", "directory that keeps writes while ClickHouse is unreachable, replayed in order when it is back (empty: writes fail instead)")
	distributed := fs.Bool("clickhouse.distributed", false, "use the Distributed tables of a ClickHouse cluster (ledger_rows_all and the other _all tables of deploy/clickhouse/cluster.sql); the schema is then the operator's")
	comparePeers := new(bool)
	if mode == storeServe {
		comparePeers = fs.Bool("clickhouse.comparePeers", true, "before writing an hour, compare it with the hour's newest rows when another writer (an active-active replica) wrote them, and count the hours that differ (gpuledger_clickhouse_peer_hours_total)")
	}
	return func(ctx context.Context, log *slog.Logger) (ledger.Store, error) {
		switch *kind {
		case "embedded":
			opts := embedded.Options{Logger: log, MustExist: mode != storeWrite && mode != storeServe}
			if mode == storeVerify {
				opts.CheckTimeout = -1
			}
			s, err := embedded.Open(*path, opts)
			if errors.Is(err, embedded.ErrNoLedger) {
				return nil, usageError{fmt.Sprintf("%v: run gpuledger serve or gpuledger ingest first, or pass -ledger.path (or -ledger.store=clickhouse) to the ledger they write", err)}
			}
			return s, err
		case "clickhouse":
			opts := clickhouse.Options{DSN: *dsn, SpoolDir: *spool, Logger: log, ComparePeers: *comparePeers}
			if *distributed {
				opts.UseDistributed()
			}
			return clickhouse.Open(ctx, opts)
		}
		return nil, usageError{fmt.Sprintf("-ledger.store=%q: want embedded or clickhouse", *kind)}
	}
}

// storeGeneration is what the API's answer cache keys on: the pipeline's
// writes, and what moves when another process (a backfill) rewrites
// hours: on the embedded ledger its data version, on ClickHouse its count
// of restatements (read at most once a second), so that a rewritten hour
// is not served from the cache. (A backfill of hours never written before
// records no restatement: on ClickHouse those show once the cache's TTL
// has passed.)
func storeGeneration(s ledger.Store, writes func() uint64) func() uint64 {
	var version func(context.Context) (uint64, error)
	var every time.Duration
	switch st := s.(type) {
	case *embedded.Store:
		version = st.DataVersion
	case *clickhouse.Store:
		version, every = st.RestatementCount, time.Second
	default:
		return writes
	}
	var last atomic.Uint64  // the version last read (kept when a read fails)
	var readAt atomic.Int64 // when, in Unix nanoseconds
	return func() uint64 {
		if now := time.Now().UnixNano(); every == 0 || now-readAt.Load() >= int64(every) {
			readAt.Store(now)
			if v, err := version(context.Background()); err == nil {
				last.Store(v)
			}
		}
		// Both only grow: any change of either changes the sum.
		return writes() + last.Load()
	}
}

// storeGauges exports what a store counts: the ClickHouse spool.
func storeGauges(s ledger.Store) map[string]func() float64 {
	chs, ok := s.(*clickhouse.Store)
	if !ok {
		return nil
	}
	stat := func(f func(clickhouse.SpoolStats) float64) func() float64 {
		return func() float64 { return f(chs.SpoolStats()) }
	}
	return map[string]func() float64{
		"gpuledger_clickhouse_spool_pending_bytes":   stat(func(s clickhouse.SpoolStats) float64 { return float64(s.PendingBytes) }),
		"gpuledger_clickhouse_spool_pending_records": stat(func(s clickhouse.SpoolStats) float64 { return float64(s.PendingRecords) }),
		"gpuledger_clickhouse_spool_spooled_total":   stat(func(s clickhouse.SpoolStats) float64 { return float64(s.Spooled) }),
		"gpuledger_clickhouse_spool_replayed_total":  stat(func(s clickhouse.SpoolStats) float64 { return float64(s.Replayed) }),
		"gpuledger_clickhouse_spool_corrupt_total":   stat(func(s clickhouse.SpoolStats) float64 { return float64(s.Corrupt) }),
		// Active-active replicas: the hours compared with another
		// writer's (-clickhouse.comparePeers).
		`gpuledger_clickhouse_peer_hours_total{result="same"}`:   func() float64 { return float64(chs.PeerStats().Same) },
		`gpuledger_clickhouse_peer_hours_total{result="differ"}`: func() float64 { return float64(chs.PeerStats().Differ) },
		`gpuledger_clickhouse_peer_hours_total{result="error"}`:  func() float64 { return float64(chs.PeerStats().Errors) },
	}
}
