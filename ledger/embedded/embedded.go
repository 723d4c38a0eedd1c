// Package embedded is gpuledger's default ledger.Store: an in-process SQLite
// database (modernc.org/sqlite, pure Go, no cgo) in one file on local disk.
// It needs no server, which is what the demo and small clusters want; large
// fleets use the ClickHouse store.
//
// Money columns are SQLite INTEGERs of micro-units: SUM over them is exact
// (SQLite raises an error rather than overflow).
package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpuledger/gpuledger/ledger"
)

// FileName is the database file inside the ledger directory.
const FileName = "ledger.db"

// Options configures Open.
type Options struct {
	// Logger receives start-up messages; nil discards them.
	Logger *slog.Logger
	// ReadConns is how many connections serve queries, beside the one that
	// writes: in WAL mode readers do not wait for the writer. Default 4.
	ReadConns int
	// MustExist is for commands that only read the ledger: Open fails, and
	// creates nothing, when dir holds no ledger (ErrNoLedger).
	MustExist bool
	// CheckTimeout bounds SQLite's quick_check of the file at Open: damage
	// to its structure found in that time fails Open with a
	// ledger.DamageError; a check that takes longer (a ledger of many
	// years) is logged and the ledger opened (gpuledger verify checks it
	// all). Default 10 seconds; negative: no check.
	CheckTimeout time.Duration
}

// ErrNoLedger is Open's error, with MustExist, for a folder without a
// ledger.
var ErrNoLedger = errors.New("no ledger")

// Store is the embedded ledger.Store. Writes go through one connection
// (SQLite has one writer); reads through a pool of their own, so that the
// cost API does not queue behind an hour being written.
type Store struct {
	db   *sql.DB // the writer
	read *sql.DB
	// version is a connection of its own for DataVersion: SQLite's
	// data_version counts the commits of every other connection.
	version *sql.DB
	log     *slog.Logger
}

var _ ledger.Store = (*Store)(nil)

// Open opens (creating if needed) the ledger in directory dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.MustExist {
		if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
			return nil, fmt.Errorf("%w at %s", ErrNoLedger, filepath.Join(dir, FileName))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create ledger directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	// One writing connection: SQLite serialises writers anyway, and this
	// keeps the pragmas and transactions on a single handle. synchronous
	// FULL: a committed hour survives a power loss, not only a crash.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.startCheck(path, opts.CheckTimeout); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(); err != nil {
		db.Close()
		if corruptFile(err) {
			return nil, &ledger.DamageError{Store: "embedded", Table: path, Err: err}
		}
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	if err := probeSchema(db); err != nil {
		db.Close()
		return nil, err
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	s.read, err = sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s for reading: %w", path, err)
	}
	s.read.SetMaxOpenConns(opts.ReadConns)
	s.read.SetMaxIdleConns(opts.ReadConns)
	s.version, err = sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		s.read.Close()
		return nil, fmt.Errorf("open ledger %s for its version: %w", path, err)
	}
	s.version.SetMaxOpenConns(1)
	s.version.SetMaxIdleConns(1)
	s.version.SetConnMaxIdleTime(0)
	s.version.SetConnMaxLifetime(0)
	s.log.Info("ledger opened", "path", path)
	return s, nil
}

// DataVersion changes whenever a transaction is committed to the ledger,
// by this Store or by another process (a backfill's gpuledger ingest):
// SQLite's data_version, read on a connection that writes nothing. An
// answer cache keys on it so that a rewritten hour is never served stale.
func (s *Store) DataVersion(ctx context.Context) (uint64, error) {
	var v uint64
	if err := s.version.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the ledger's data version: %w", err)
	}
	return v, nil
}

func (s *Store) migrate() error {
	var v int
	if err := s.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary's %d; upgrade gpuledger", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		for _, q := range migrations[v] {
			if _, err := tx.Exec(q); err != nil {
				tx.Rollback()
				return fmt.Errorf("apply schema version %d: %w", v+1, err)
			}
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("apply schema version %d: %w", v+1, err)
		}
	}
	return nil
}

// startCheck runs SQLite's quick_check within timeout (default 10 s).
func (s *Store) startCheck(path string, timeout time.Duration) error {
	if timeout < 0 {
		return nil
	}
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	start := time.Now()
	res, err := quickCheck(s.db, timeout)
	switch {
	case err != nil && corruptFile(err):
		return &ledger.DamageError{Store: "embedded", Table: path, Err: fmt.Errorf("SQLite's quick_check: %w", err)}
	case err != nil:
		return fmt.Errorf("check ledger %s: %w", path, err)
	case !res.completed:
		s.log.Warn("the ledger's quick_check did not finish in time; opened unchecked (gpuledger verify checks it all)", "path", path, "timeout", timeout)
	case !res.ok:
		return &ledger.DamageError{Store: "embedded", Table: path, Err: fmt.Errorf("SQLite's quick_check: %s", strings.Join(res.problems, "; "))}
	default:
		s.log.Debug("ledger checked", "path", path, "took", time.Since(start))
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return errors.Join(s.version.Close(), s.read.Close(), s.db.Close()) }

type clusterHour struct {
	cluster string
	hour    int64
}

// WriteHours replaces, in one transaction, the rows and workload rows of
// every (cluster, hour) present in rows or workloads.
func (s *Store) WriteHours(ctx context.Context, rows []ledger.Row, workloads []ledger.WorkloadRow) (err error) {
	if len(rows) == 0 && len(workloads) == 0 {
		return nil
	}
	hours := make(map[clusterHour]bool)
	for i := range rows {
		if err := checkHour(rows[i].Hour); err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		hours[clusterHour{rows[i].Cluster, rows[i].Hour.Unix()}] = true
	}
	for i := range workloads {
		if err := checkHour(workloads[i].Hour); err != nil {
			return fmt.Errorf("workload row %d: %w", i, err)
		}
		hours[clusterHour{workloads[i].Cluster, workloads[i].Hour.Unix()}] = true
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin ledger write: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	for k := range hours {
		for _, table := range []string{"ledger_rows", "workload_rows"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE cluster = ? AND hour = ?`, k.cluster, k.hour); err != nil {
				return fmt.Errorf("clear hour %s of %s in %s: %w", time.Unix(k.hour, 0).UTC().Format(time.RFC3339), k.cluster, table, err)
			}
		}
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO ledger_rows
		(hour, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed,
		 gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros, unmeasured_cost_micros,
		 unallocated_cost_micros, energy_joules, energy_cost_micros)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	defer ins.Close()
	for i := range rows {
		r := &rows[i]
		if _, err := ins.ExecContext(ctx, r.Hour.Unix(), r.Cluster, r.Team, r.Namespace, r.LocalQueue, r.ClusterQueue, r.Flavor, r.Borrowed,
			r.GPUSeconds, r.ActiveGPUSeconds, r.UnmeasuredGPUSeconds, r.CostMicros, r.IdleCostMicros, r.UnmeasuredCostMicros,
			r.UnallocatedCostMicros, r.EnergyJoules, r.EnergyCostMicros); err != nil {
			return fmt.Errorf("insert row %d of %d: %w", i, len(rows), err)
		}
	}
	winsert, err := tx.PrepareContext(ctx, `INSERT INTO workload_rows
		(hour, cluster, team, namespace, kind, name, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds,
		 cost_micros, idle_cost_micros, unmeasured_cost_micros)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare workload insert: %w", err)
	}
	defer winsert.Close()
	for i := range workloads {
		w := &workloads[i]
		if _, err := winsert.ExecContext(ctx, w.Hour.Unix(), w.Cluster, w.Team, w.Namespace, w.Kind, w.Name,
			w.GPUSeconds, w.ActiveGPUSeconds, w.UnmeasuredGPUSeconds, w.CostMicros, w.IdleCostMicros, w.UnmeasuredCostMicros); err != nil {
			return fmt.Errorf("insert workload row %d of %d: %w", i, len(workloads), err)
		}
	}
	for k := range hours {
		for _, table := range []string{"ledger_rows", "workload_rows"} {
			if err := checkRows(ctx, tx, table, k.cluster, k.hour); err != nil {
				return err
			}
		}
	}
	// The daily rollup of every day touched, then the monthly rollup of
	// every month touched, in the same transaction.
	days, months := make(map[clusterHour]bool), make(map[clusterHour]bool)
	for k := range hours {
		days[clusterHour{k.cluster, k.hour - k.hour%86400}] = true
		months[clusterHour{k.cluster, ledger.StepMonth.Truncate(time.Unix(k.hour, 0)).Unix()}] = true
	}
	for d := range days {
		if err := rollUp(ctx, tx, "ledger_days", rollupSelect+" FROM ledger_rows", rollupGroup, d.cluster, d.hour, d.hour+86400); err != nil {
			return fmt.Errorf("update the daily rollup: %w", err)
		}
	}
	for m := range months {
		end := time.Unix(m.hour, 0).UTC().AddDate(0, 1, 0).Unix()
		if err := rollUp(ctx, tx, "ledger_months", monthSelect+" FROM ledger_days", monthGroup, m.cluster, m.hour, end); err != nil {
			return fmt.Errorf("update the monthly rollup: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d ledger rows and %d workload rows: %w", len(rows), len(workloads), err)
	}
	return nil
}

// rollUp replaces a rollup's rows of one cluster's [from, to) with the
// sums of the finer rows ("SELECT ... FROM table") of that span.
func rollUp(ctx context.Context, tx *sql.Tx, rollup, selectFrom, group, cluster string, from, to int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+rollup+` WHERE cluster = ? AND hour = ?`, cluster, from); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+rollup+` (`+rollupNames+`) SELECT `+selectFrom+`
		WHERE cluster = ? AND hour >= ? AND hour < ? GROUP BY `+group, cluster, from, to); err != nil {
		return err
	}
	return checkRows(ctx, tx, rollup, cluster, from)
}

// checkRows computes the checks of the rows of table in (cluster, hour),
// and their row counts.
func checkRows(ctx context.Context, tx *sql.Tx, table, cluster string, hour int64) error {
	if _, err := tx.ExecContext(ctx, setChecks(table), cluster, hour); err != nil {
		return fmt.Errorf("check the rows of %s: %w", table, err)
	}
	for _, q := range recount(table) {
		if _, err := tx.ExecContext(ctx, q, cluster, hour); err != nil {
			return fmt.Errorf("count the rows of %s: %w", table, err)
		}
	}
	return nil
}

// WriteQueueHours replaces, in one transaction, the queue rows of every
// (cluster, hour) present in rows.
func (s *Store) WriteQueueHours(ctx context.Context, rows []ledger.QueueRow) error {
	hours := make([]clusterHour, len(rows))
	for i := range rows {
		if err := rows[i].Check(); err != nil {
			return fmt.Errorf("queue row %d: %w", i, err)
		}
		hours[i] = clusterHour{rows[i].Cluster, rows[i].Hour.Unix()}
	}
	return s.replaceHours(ctx, "queue_rows", hours, `INSERT INTO queue_rows
		(hour, cluster, cluster_queue, pending_workloads, pending_gpus, admitted, admitted_wait, pending_wait)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, func(i int) ([]any, error) {
		r := &rows[i]
		aw, err := json.Marshal(r.AdmittedWait)
		if err != nil {
			return nil, fmt.Errorf("encode admitted wait: %w", err)
		}
		pw, err := json.Marshal(r.PendingWait)
		if err != nil {
			return nil, fmt.Errorf("encode pending wait: %w", err)
		}
		return []any{r.Hour.Unix(), r.Cluster, r.ClusterQueue, r.PendingWorkloads, r.PendingGPUs, r.Admitted, string(aw), string(pw)}, nil
	})
}

// WriteEndpointHours replaces, in one transaction, the endpoint rows of
// every (cluster, hour) present in rows.
func (s *Store) WriteEndpointHours(ctx context.Context, rows []ledger.EndpointRow) error {
	hours := make([]clusterHour, len(rows))
	for i := range rows {
		if err := rows[i].Check(); err != nil {
			return fmt.Errorf("endpoint row %d: %w", i, err)
		}
		hours[i] = clusterHour{rows[i].Cluster, rows[i].Hour.Unix()}
	}
	return s.replaceHours(ctx, "endpoint_rows", hours, `INSERT INTO endpoint_rows
		(hour, cluster, namespace, model, kind, name, pods, reported_seconds, busy_seconds, requests, generation_tokens, gaps, idle_since_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, func(i int) ([]any, error) {
		r := &rows[i]
		gaps, err := json.Marshal(r.Gaps)
		if err != nil {
			return nil, fmt.Errorf("encode gaps: %w", err)
		}
		return []any{r.Hour.Unix(), r.Cluster, r.Namespace, r.Model, r.Kind, r.Name, r.Pods, r.ReportedSeconds, r.BusySeconds,
			r.Requests, r.GenerationTokens, string(gaps), ledger.MilliOrZero(r.IdleSince)}, nil
	})
}

// replaceHours deletes the rows of table in each (cluster, hour) of hours
// and inserts n rows with insert, each row's arguments from args, all in
// one transaction: a failure leaves the table as it was.
func (s *Store) replaceHours(ctx context.Context, table string, hours []clusterHour, insert string, args func(i int) ([]any, error)) (err error) {
	if len(hours) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write of %s: %w", table, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	cleared := make(map[clusterHour]bool)
	for _, k := range hours {
		if cleared[k] {
			continue
		}
		cleared[k] = true
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE cluster = ? AND hour = ?`, k.cluster, k.hour); err != nil {
			return fmt.Errorf("clear hour %s of %s in %s: %w", time.Unix(k.hour, 0).UTC().Format(time.RFC3339), k.cluster, table, err)
		}
	}
	ins, err := tx.PrepareContext(ctx, insert)
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	defer ins.Close()
	for i := range hours {
		a, err := args(i)
		if err != nil {
			return fmt.Errorf("row %d of %s: %w", i, table, err)
		}
		if _, err := ins.ExecContext(ctx, a...); err != nil {
			return fmt.Errorf("insert row %d of %d into %s: %w", i, len(hours), table, err)
		}
	}
	for k := range cleared {
		if err := checkRows(ctx, tx, table, k.cluster, k.hour); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d rows of %s: %w", len(hours), table, err)
	}
	return nil
}

// EndpointHours returns the endpoint rows of [from, to), of one cluster or
// all, ordered by cluster, hour, namespace and model.
func (s *Store) EndpointHours(ctx context.Context, cluster string, from, to time.Time) ([]ledger.EndpointRow, error) {
	where, args := filters(ledger.Query{From: from, To: to, Cluster: cluster})
	if err := s.checkRange(ctx, "endpoint_rows", where, args, from, to); err != nil {
		return nil, err
	}
	rs, err := s.read.QueryContext(ctx, `SELECT hour, cluster, namespace, model, kind, name, pods, reported_seconds, busy_seconds, requests,
		generation_tokens, gaps, idle_since_ms FROM endpoint_rows WHERE `+where+` ORDER BY cluster, hour, namespace, model, kind, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("query endpoint rows: %w", err)
	}
	defer rs.Close()
	var out []ledger.EndpointRow
	for rs.Next() {
		var r ledger.EndpointRow
		var hour, idle int64
		var gaps string
		if err := rs.Scan(&hour, &r.Cluster, &r.Namespace, &r.Model, &r.Kind, &r.Name, &r.Pods, &r.ReportedSeconds, &r.BusySeconds,
			&r.Requests, &r.GenerationTokens, &gaps, &idle); err != nil {
			return nil, s.readErr("scan endpoint row", "endpoint_rows", from, to, err)
		}
		r.Hour, r.IdleSince = time.Unix(hour, 0).UTC(), ledger.TimeOrZero(idle)
		if err := json.Unmarshal([]byte(gaps), &r.Gaps); err != nil {
			return nil, fmt.Errorf("endpoint row %s/%s/%s at %s: gaps %q: %w", r.Cluster, r.Namespace, r.Model, r.Hour.Format(time.RFC3339), gaps, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read endpoint rows: %w", err)
	}
	return out, nil
}

// QueueHours returns the queue rows of [from, to), of one cluster or all.
func (s *Store) QueueHours(ctx context.Context, cluster string, from, to time.Time) ([]ledger.QueueRow, error) {
	where, args := filters(ledger.Query{From: from, To: to, Cluster: cluster})
	if err := s.checkRange(ctx, "queue_rows", where, args, from, to); err != nil {
		return nil, err
	}
	rs, err := s.read.QueryContext(ctx, `SELECT hour, cluster, cluster_queue, pending_workloads, pending_gpus, admitted, admitted_wait, pending_wait
		FROM queue_rows WHERE `+where+` ORDER BY cluster, hour, cluster_queue`, args...)
	if err != nil {
		return nil, fmt.Errorf("query queue rows: %w", err)
	}
	defer rs.Close()
	var out []ledger.QueueRow
	for rs.Next() {
		var r ledger.QueueRow
		var hour int64
		var aw, pw string
		if err := rs.Scan(&hour, &r.Cluster, &r.ClusterQueue, &r.PendingWorkloads, &r.PendingGPUs, &r.Admitted, &aw, &pw); err != nil {
			return nil, s.readErr("scan queue row", "queue_rows", from, to, err)
		}
		r.Hour = time.Unix(hour, 0).UTC()
		if err := json.Unmarshal([]byte(aw), &r.AdmittedWait); err != nil {
			return nil, fmt.Errorf("queue row %s/%s at %s: admitted wait %q: %w", r.Cluster, r.ClusterQueue, r.Hour.Format(time.RFC3339), aw, err)
		}
		if err := json.Unmarshal([]byte(pw), &r.PendingWait); err != nil {
			return nil, fmt.Errorf("queue row %s/%s at %s: pending wait %q: %w", r.Cluster, r.ClusterQueue, r.Hour.Format(time.RFC3339), pw, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read queue rows: %w", err)
	}
	return out, nil
}

// WriteWorkloadTimes records workloads' times, replacing what was written
// of the same workload, in one transaction.
func (s *Store) WriteWorkloadTimes(ctx context.Context, ws []ledger.WorkloadTime) (err error) {
	for i := range ws {
		if err := ws[i].Check(); err != nil {
			return fmt.Errorf("workload time %d: %w", i, err)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin workload times write: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	ins, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO workload_times
		(cluster, namespace, name, submit_ms, local_queue, resource, count, admit_ms, finish_ms, row_check) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare workload times insert: %w", err)
	}
	defer ins.Close()
	for i := range ws {
		w := &ws[i]
		if _, err := ins.ExecContext(ctx, checked(w.Cluster, w.Namespace, w.Name, w.Submit.UnixMilli(), w.LocalQueue, w.Resource, int64(w.Count),
			ledger.MilliOrZero(w.Admit), ledger.MilliOrZero(w.Finish))...); err != nil {
			return fmt.Errorf("insert workload time %d of %d: %w", i, len(ws), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d workload times: %w", len(ws), err)
	}
	return nil
}

// WorkloadTimes returns the workloads submitted in [from, to).
func (s *Store) WorkloadTimes(ctx context.Context, cluster string, from, to time.Time) ([]ledger.WorkloadTime, error) {
	where, args := "submit_ms >= ? AND submit_ms < ?", []any{from.UnixMilli(), to.UnixMilli()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	if err := s.checkRange(ctx, "workload_times", where, args, from, to); err != nil {
		return nil, err
	}
	rs, err := s.read.QueryContext(ctx, `SELECT cluster, namespace, name, submit_ms, local_queue, resource, count, admit_ms, finish_ms
		FROM workload_times WHERE `+where+` ORDER BY submit_ms, cluster, namespace, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("query workload times: %w", err)
	}
	defer rs.Close()
	var out []ledger.WorkloadTime
	for rs.Next() {
		var w ledger.WorkloadTime
		var submit, admit, finish int64
		if err := rs.Scan(&w.Cluster, &w.Namespace, &w.Name, &submit, &w.LocalQueue, &w.Resource, &w.Count, &admit, &finish); err != nil {
			return nil, fmt.Errorf("scan workload time: %w", err)
		}
		w.Submit, w.Admit, w.Finish = ledger.TimeOrZero(submit), ledger.TimeOrZero(admit), ledger.TimeOrZero(finish)
		out = append(out, w)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read workload times: %w", err)
	}
	return out, nil
}

// Checkpoint returns how far the source called name has been written.
func (s *Store) Checkpoint(ctx context.Context, name string) (time.Time, error) {
	var ms, bad int64
	err := s.read.QueryRowContext(ctx, `SELECT at, `+badExpr("checkpoints")+` FROM checkpoints WHERE name = ?`, name).Scan(&ms, &bad)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.readErr(fmt.Sprintf("read checkpoint %q", name), "checkpoints", time.Time{}, time.Time{}, err)
	}
	if err := damaged("checkpoints", bad, time.Time{}, time.Time{}); err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// SetCheckpoint records how far the source called name has been written.
func (s *Store) SetCheckpoint(ctx context.Context, name string, t time.Time) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO checkpoints (name, at, row_check) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET at = excluded.at, row_check = excluded.row_check`, checked(name, t.UnixMilli())...); err != nil {
		return fmt.Errorf("write checkpoint %q: %w", name, err)
	}
	return nil
}

// RecordAudit records a rewrite of written hours.
func (s *Store) RecordAudit(ctx context.Context, e ledger.AuditEntry) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO audit (at, cluster, from_hour, to_hour, source, rows, note, row_check) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		checked(e.At.UnixMilli(), e.Cluster, e.From.Unix(), e.To.Unix(), e.Source, int64(e.Rows), e.Note)...); err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// Audit returns the entries whose hours overlap [from, to), oldest first.
func (s *Store) Audit(ctx context.Context, from, to time.Time) ([]ledger.AuditEntry, error) {
	if err := s.checkRange(ctx, "audit", "from_hour < ? AND to_hour > ?", []any{to.Unix(), from.Unix()}, from, to); err != nil {
		return nil, err
	}
	rs, err := s.read.QueryContext(ctx, `SELECT at, cluster, from_hour, to_hour, source, rows, note FROM audit
		WHERE from_hour < ? AND to_hour > ? ORDER BY at, cluster, from_hour`, to.Unix(), from.Unix())
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rs.Close()
	var out []ledger.AuditEntry
	for rs.Next() {
		var e ledger.AuditEntry
		var at, f, t int64
		if err := rs.Scan(&at, &e.Cluster, &f, &t, &e.Source, &e.Rows, &e.Note); err != nil {
			return nil, fmt.Errorf("scan audit entry: %w", err)
		}
		e.At, e.From, e.To = time.UnixMilli(at).UTC(), time.Unix(f, 0).UTC(), time.Unix(t, 0).UTC()
		out = append(out, e)
	}
	return out, rs.Err()
}

// FlagHours records flags on hours; one written again keeps its first At.
func (s *Store) FlagHours(ctx context.Context, flags []ledger.HourFlag) (err error) {
	for i := range flags {
		if err := flags[i].Check(); err != nil {
			return err
		}
	}
	if len(flags) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin hour flags write: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	for _, f := range flags {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO hour_flags (cluster, from_hour, to_hour, reason, detail, at, row_check) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			checked(f.Cluster, f.From.Unix(), f.To.Unix(), f.Reason, f.Detail, f.At.UnixMilli())...); err != nil {
			return fmt.Errorf("record hour flag %q of %s: %w", f.Reason, f.Cluster, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d hour flags: %w", len(flags), err)
	}
	return nil
}

// HourFlags returns the flags whose hours overlap [from, to).
func (s *Store) HourFlags(ctx context.Context, cluster string, from, to time.Time) ([]ledger.HourFlag, error) {
	where, args := "from_hour < ? AND to_hour > ?", []any{to.Unix(), from.Unix()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	if err := s.checkRange(ctx, "hour_flags", where, args, from, to); err != nil {
		return nil, err
	}
	rs, err := s.read.QueryContext(ctx, `SELECT cluster, from_hour, to_hour, reason, detail, at FROM hour_flags
		WHERE `+where+` ORDER BY cluster, from_hour, reason, detail`, args...)
	if err != nil {
		return nil, fmt.Errorf("read hour flags: %w", err)
	}
	defer rs.Close()
	var out []ledger.HourFlag
	for rs.Next() {
		var f ledger.HourFlag
		var fh, th, at int64
		if err := rs.Scan(&f.Cluster, &fh, &th, &f.Reason, &f.Detail, &at); err != nil {
			return nil, fmt.Errorf("scan hour flag: %w", err)
		}
		f.From, f.To, f.At = time.Unix(fh, 0).UTC(), time.Unix(th, 0).UTC(), time.UnixMilli(at).UTC()
		out = append(out, f)
	}
	return out, rs.Err()
}
