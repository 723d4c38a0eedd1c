// Package backend opens the ledger a command was told to use: the
// embedded one (a SQLite file, no server) or ClickHouse, from the
// -ledger.* and -clickhouse.* flags every command that reads or writes
// the ledger shares.
package backend

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// DefaultPath is where serve, ingest and report keep the embedded ledger
// unless -ledger.path says otherwise: one place, so that a report reads
// what ingest wrote.
const DefaultPath = "gpuledger-data/ledger"

// Mode is what a command does with the ledger.
type Mode int

const (
	// Write creates the embedded ledger when it is not there.
	Write Mode = iota
	// Serve is Write for serve, with -clickhouse.comparePeers.
	Serve
	// Read fails on a missing embedded ledger instead of creating an
	// empty one.
	Read
	// Verify is Read without the check at open: verify runs the whole
	// one, and reports what it finds.
	Verify
)

// Opener opens the ledger the flags name.
type Opener func(ctx context.Context, log *slog.Logger) (ledger.Store, error)

// Flags registers the ledger flags and returns what opens the store once
// they are parsed.
func Flags(fs *flag.FlagSet, defaultPath string, mode Mode) Opener {
	kind := fs.String("ledger.store", "embedded", "ledger backend: embedded (SQLite file, no server) or clickhouse")
	path := fs.String("ledger.path", defaultPath, "embedded ledger directory")
	dsn := fs.String("clickhouse.dsn", "clickhouse://127.0.0.1:9000/default", "ClickHouse server and database, for -ledger.store=clickhouse")
	spool := fs.String("clickhouse.spoolDir", "", "directory that keeps writes while ClickHouse is unreachable, replayed in order when it is back (empty: writes fail instead)")
	distributed := fs.Bool("clickhouse.distributed", false, "use the Distributed tables of a ClickHouse cluster (ledger_rows_all and the other _all tables of deploy/clickhouse/cluster.sql); the schema is then the operator's")
	comparePeers := new(bool)
	if mode == Serve {
		comparePeers = fs.Bool("clickhouse.comparePeers", true, "before writing an hour, compare it with the hour's newest rows when another writer (an active-active replica) wrote them, and count the hours that differ (gpuledger_clickhouse_peer_hours_total)")
	}
	return func(ctx context.Context, log *slog.Logger) (ledger.Store, error) {
		switch *kind {
		case "embedded":
			opts := embedded.Options{Logger: log, MustExist: mode != Write && mode != Serve}
			if mode == Verify {
				opts.CheckTimeout = -1
			}
			s, err := embedded.Open(*path, opts)
			if errors.Is(err, embedded.ErrNoLedger) {
				return nil, flagutil.Usagef("%v: run gpuledger serve or gpuledger ingest first, or pass -ledger.path (or -ledger.store=clickhouse) to the ledger they write", err)
			}
			return s, err
		case "clickhouse":
			opts := clickhouse.Options{DSN: *dsn, SpoolDir: *spool, Logger: log, ComparePeers: *comparePeers}
			if *distributed {
				opts.UseDistributed()
			}
			return clickhouse.Open(ctx, opts)
		}
		return nil, flagutil.Usagef("-ledger.store=%q: want embedded or clickhouse", *kind)
	}
}
