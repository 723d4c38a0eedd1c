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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpuledger/gpuledger/ledger"
)

// FileName is the database file inside the ledger directory.
const FileName = "ledger.db"

// migrations are applied in order at Open, each once, recorded in SQLite's
// user_version: migrations[v] takes a ledger from version v to v+1.
var migrations = [][]string{
	0: {
		`CREATE TABLE IF NOT EXISTS ledger_rows (
		hour               INTEGER NOT NULL, -- Unix seconds, start of the hour
		cluster            TEXT    NOT NULL,
		team               TEXT    NOT NULL,
		namespace          TEXT    NOT NULL,
		local_queue        TEXT    NOT NULL,
		cluster_queue      TEXT    NOT NULL,
		flavor             TEXT    NOT NULL,
		borrowed           INTEGER NOT NULL, -- 0 or 1
		gpu_seconds        REAL    NOT NULL,
		active_gpu_seconds REAL    NOT NULL,
		cost_micros        INTEGER NOT NULL,
		idle_cost_micros   INTEGER NOT NULL,
		unallocated_cost_micros INTEGER NOT NULL,
		energy_joules      REAL    NOT NULL,
		energy_cost_micros INTEGER NOT NULL,
		PRIMARY KEY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS ledger_rows_hour ON ledger_rows (hour)`,
		`CREATE TABLE IF NOT EXISTS workload_rows (
		hour               INTEGER NOT NULL,
		cluster            TEXT    NOT NULL,
		team               TEXT    NOT NULL,
		namespace          TEXT    NOT NULL,
		kind               TEXT    NOT NULL,
		name               TEXT    NOT NULL,
		gpu_seconds        REAL    NOT NULL,
		active_gpu_seconds REAL    NOT NULL,
		cost_micros        INTEGER NOT NULL,
		idle_cost_micros   INTEGER NOT NULL,
		PRIMARY KEY (cluster, hour, team, namespace, kind, name)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS workload_rows_hour ON workload_rows (hour)`,
		`CREATE TABLE IF NOT EXISTS checkpoints (
		name TEXT PRIMARY KEY,
		at   INTEGER NOT NULL -- Unix milliseconds
	) WITHOUT ROWID`,
	},
	// 1 → 2: time held while no telemetry measured activity, and the record
	// of rewrites of written hours.
	1: {
		`ALTER TABLE ledger_rows ADD COLUMN unmeasured_gpu_seconds REAL NOT NULL DEFAULT 0`,
		`ALTER TABLE ledger_rows ADD COLUMN unmeasured_cost_micros INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE workload_rows ADD COLUMN unmeasured_gpu_seconds REAL NOT NULL DEFAULT 0`,
		`ALTER TABLE workload_rows ADD COLUMN unmeasured_cost_micros INTEGER NOT NULL DEFAULT 0`,
		`CREATE TABLE IF NOT EXISTS audit (
		at        INTEGER NOT NULL, -- Unix milliseconds
		cluster   TEXT    NOT NULL,
		from_hour INTEGER NOT NULL, -- Unix seconds
		to_hour   INTEGER NOT NULL,
		source    TEXT    NOT NULL,
		rows      INTEGER NOT NULL,
		note      TEXT    NOT NULL
	)`,
	},
	// 2 → 3: the daily rollup: ledger_rows summed per UTC day, kept in step
	// by every write, read by day and month queries over whole days (a
	// dashboard's month by day reads 24 times fewer rows).
	2: {
		`CREATE TABLE IF NOT EXISTS ledger_days (` + rollupColumns + `,
		PRIMARY KEY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS ledger_days_hour ON ledger_days (hour)`,
		`INSERT INTO ledger_days SELECT ` + rollupSelect + ` FROM ledger_rows GROUP BY ` + rollupGroup,
	},
	// 3 → 4: the queues' hours (capacity: pending demand and waits). The
	// wait histograms are JSON ({"le": [...], "n": [...]}).
	3: {
		`CREATE TABLE IF NOT EXISTS queue_rows (
		hour              INTEGER NOT NULL,
		cluster           TEXT    NOT NULL,
		cluster_queue     TEXT    NOT NULL,
		pending_workloads REAL    NOT NULL,
		pending_gpus      REAL    NOT NULL,
		admitted          REAL    NOT NULL,
		admitted_wait     TEXT    NOT NULL,
		pending_wait      TEXT    NOT NULL,
		PRIMARY KEY (cluster, hour, cluster_queue)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS queue_rows_hour ON queue_rows (hour)`,
	},
	// 4 → 5: the workloads' times in Kueue (capacity's what-if).
	4: {
		`CREATE TABLE IF NOT EXISTS workload_times (
		cluster     TEXT    NOT NULL,
		namespace   TEXT    NOT NULL,
		name        TEXT    NOT NULL,
		submit_ms   INTEGER NOT NULL,
		local_queue TEXT    NOT NULL,
		resource    TEXT    NOT NULL,
		count       INTEGER NOT NULL,
		admit_ms    INTEGER NOT NULL, -- 0: not admitted
		finish_ms   INTEGER NOT NULL, -- 0: not finished
		PRIMARY KEY (cluster, namespace, name, submit_ms)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS workload_times_submit ON workload_times (submit_ms)`,
	},
	// 5 → 6: the inference endpoints' hours (scale-to-zero: busy time and
	// idle gaps, from vLLM's metrics). The gaps are JSON ({"n": [...],
	// "s": [...]}); idle_since_ms 0 when no gap was open.
	5: {
		`CREATE TABLE IF NOT EXISTS endpoint_rows (
		hour              INTEGER NOT NULL,
		cluster           TEXT    NOT NULL,
		namespace         TEXT    NOT NULL,
		model             TEXT    NOT NULL,
		kind              TEXT    NOT NULL,
		name              TEXT    NOT NULL,
		pods              INTEGER NOT NULL,
		reported_seconds  REAL    NOT NULL,
		busy_seconds      REAL    NOT NULL,
		requests          REAL    NOT NULL,
		generation_tokens REAL    NOT NULL,
		gaps              TEXT    NOT NULL,
		idle_since_ms     INTEGER NOT NULL,
		PRIMARY KEY (cluster, hour, namespace, model, kind, name)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS endpoint_rows_hour ON endpoint_rows (hour)`,
	},
	// 6 → 7: the monthly rollup: the daily rollup summed per UTC month,
	// kept in step by every write, read by month queries over whole months
	// (a year by month reads 12 rows a team, not 365).
	6: {
		`CREATE TABLE IF NOT EXISTS ledger_months (` + rollupColumns + `,
		PRIMARY KEY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed)
	) WITHOUT ROWID`,
		`CREATE INDEX IF NOT EXISTS ledger_months_hour ON ledger_months (hour)`,
		`DELETE FROM ledger_months`,
		`INSERT INTO ledger_months SELECT ` + monthSelect + ` FROM ledger_days GROUP BY ` + monthGroup,
	},
	// 7 → 8: flags on hours whose rows may not say all that happened
	// (acknowledged telemetry lost from the write-ahead log).
	7: {
		`CREATE TABLE IF NOT EXISTS hour_flags (
		cluster   TEXT    NOT NULL,
		from_hour INTEGER NOT NULL, -- Unix seconds
		to_hour   INTEGER NOT NULL,
		reason    TEXT    NOT NULL,
		detail    TEXT    NOT NULL,
		at        INTEGER NOT NULL, -- Unix milliseconds
		PRIMARY KEY (cluster, from_hour, to_hour, reason, detail)
	) WITHOUT ROWID`,
	},
	// 8 → 9: every row carries a check of its values (check.go), computed
	// here for the rows written before.
	8: checkMigration(),
}

// checkMigration adds row_check to every table and computes it for the
// rows there, and counts the rows of the tables of hours.
func checkMigration() []string {
	var out []string
	for _, t := range checkedTables {
		out = append(out, `ALTER TABLE `+t+` ADD COLUMN row_check INTEGER NOT NULL DEFAULT 0`,
			`UPDATE `+t+` SET row_check = gpuledger_check(`+checkColumns[t]+`)`)
	}
	out = append(out, `CREATE TABLE IF NOT EXISTS row_counts (
		tbl       TEXT    NOT NULL,
		cluster   TEXT    NOT NULL,
		bucket    INTEGER NOT NULL, -- the rows' hour (the start of a day or month in the rollups)
		team      TEXT    NOT NULL, -- '' where the table has none
		rows      INTEGER NOT NULL,
		check_sum INTEGER NOT NULL, -- the sum of their row_check
		PRIMARY KEY (tbl, cluster, bucket, team)
	) WITHOUT ROWID`)
	for _, t := range slices.Sorted(maps.Keys(countedTables)) {
		out = append(out, `INSERT INTO row_counts (tbl, cluster, bucket, team, rows, check_sum)
		SELECT '`+t+`', cluster, hour, `+countedTables[t]+`, COUNT(*), SUM(row_check) FROM `+t+` GROUP BY cluster, hour, `+countedTables[t])
	}
	return out
}

// The daily rollup's columns (hour is the start of the UTC day) and the
// SELECT that makes them from ledger_rows.
const (
	rollupColumns = `hour INTEGER NOT NULL, cluster TEXT NOT NULL, team TEXT NOT NULL, namespace TEXT NOT NULL,
		local_queue TEXT NOT NULL, cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, borrowed INTEGER NOT NULL,
		gpu_seconds REAL NOT NULL, active_gpu_seconds REAL NOT NULL, unmeasured_gpu_seconds REAL NOT NULL,
		cost_micros INTEGER NOT NULL, idle_cost_micros INTEGER NOT NULL, unmeasured_cost_micros INTEGER NOT NULL,
		unallocated_cost_micros INTEGER NOT NULL, energy_joules REAL NOT NULL, energy_cost_micros INTEGER NOT NULL`
	// The day and month buckets of queries and of the rollups: the start
	// of the UTC day or month, in Unix seconds.
	dayStart   = `hour - hour % 86400`
	monthStart = `CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER)`
	rollupKeys = `cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed`
	// rollupNames are the rollups' columns but row_check, in order.
	rollupNames = `hour, ` + rollupKeys + `, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros,
		unmeasured_cost_micros, unallocated_cost_micros, energy_joules, energy_cost_micros`
	rollupSums = `SUM(gpu_seconds), SUM(active_gpu_seconds), SUM(unmeasured_gpu_seconds), SUM(cost_micros), SUM(idle_cost_micros),
		SUM(unmeasured_cost_micros), SUM(unallocated_cost_micros), SUM(energy_joules), SUM(energy_cost_micros)`
	rollupSelect = dayStart + `, ` + rollupKeys + `, ` + rollupSums
	rollupGroup  = dayStart + `, ` + rollupKeys
	// The monthly rollup has the same columns (hour is the start of the
	// UTC month), made from the daily one.
	monthSelect = monthStart + `, ` + rollupKeys + `, ` + rollupSums
	monthGroup  = monthStart + `, ` + rollupKeys
)

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
	log  *slog.Logger
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
	s.log.Info("ledger opened", "path", path)
	return s, nil
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
func (s *Store) Close() error { return errors.Join(s.read.Close(), s.db.Close()) }

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

func checkHour(h time.Time) error {
	if !h.Equal(h.Truncate(time.Hour)) {
		return fmt.Errorf("hour %s is not the start of an hour", h)
	}
	return nil
}

// filters returns the range, cluster and team conditions of q.
func filters(q ledger.Query) (string, []any) {
	where := []string{"hour >= ?", "hour < ?"}
	args := []any{q.From.Unix(), q.To.Unix()}
	if q.Cluster != "" {
		where = append(where, "cluster = ?")
		args = append(args, q.Cluster)
	}
	if q.Team != "" {
		where = append(where, "team = ?")
		args = append(args, q.Team)
	}
	return strings.Join(where, " AND "), args
}

// Query sums rows per bucket and GroupBy dimensions.
func (s *Store) Query(ctx context.Context, q ledger.Query) ([]ledger.Row, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	bucket := map[ledger.Step]string{
		ledger.StepHour:  "hour",
		ledger.StepDay:   dayStart,
		ledger.StepMonth: monthStart,
	}[q.Step]
	cols, groupCols := q.SQLColumns(bucket, "0")
	where, args := filters(q)
	// Month buckets over whole months come from the monthly rollup, day
	// and month buckets over whole days from the daily one.
	table := "ledger_rows"
	switch {
	case q.MonthlyRollup():
		table = "ledger_months"
	case q.DailyRollup():
		table = "ledger_days"
	}
	// Every row summed is checked on the way (check.go).
	sqlText := fmt.Sprintf(`SELECT %s, SUM(gpu_seconds), SUM(active_gpu_seconds), SUM(unmeasured_gpu_seconds), SUM(cost_micros),
		SUM(idle_cost_micros), SUM(unmeasured_cost_micros), SUM(unallocated_cost_micros), SUM(energy_joules), SUM(energy_cost_micros),
		%s
		FROM %s WHERE %s GROUP BY %s ORDER BY %s`,
		strings.Join(cols, ", "), tallyExprs(table), table, where, strings.Join(groupCols, ", "), strings.Join(groupCols, ", "))
	rs, err := s.read.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, s.readErr("query ledger", table, q.From, q.To, err)
	}
	defer rs.Close()
	var out []ledger.Row
	var seen tally
	for rs.Next() {
		var r ledger.Row
		var b int64
		var t tally
		if err := rs.Scan(&b, &r.Cluster, &r.Team, &r.Namespace, &r.LocalQueue, &r.ClusterQueue, &r.Flavor, &r.Borrowed,
			&r.GPUSeconds, &r.ActiveGPUSeconds, &r.UnmeasuredGPUSeconds, &r.CostMicros, &r.IdleCostMicros, &r.UnmeasuredCostMicros,
			&r.UnallocatedCostMicros, &r.EnergyJoules, &r.EnergyCostMicros, &t.rows, &t.sum, &t.bad); err != nil {
			return nil, s.readErr("scan ledger row", table, q.From, q.To, err)
		}
		seen.add(t)
		r.Hour = time.Unix(b, 0).UTC()
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, s.readErr("read ledger rows", table, q.From, q.To, err)
	}
	if err := s.verifyTally(ctx, table, where, args, seen, q.From, q.To); err != nil {
		return nil, err
	}
	return out, nil
}

// readErr wraps an error of a read: SQLite finding its file damaged is a
// ledger.DamageError, anything else what failed.
func (s *Store) readErr(what, table string, from, to time.Time, err error) error {
	if corruptFile(err) {
		return &ledger.DamageError{Store: "embedded", Table: table, From: from, To: to, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// TopWorkloads sums workload rows over [q.From, q.To), most idle cost first.
func (s *Store) TopWorkloads(ctx context.Context, q ledger.Query, limit int) ([]ledger.WorkloadRow, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("workload limit %d: want at least 1", limit)
	}
	where, args := filters(q)
	args = append(args, limit)
	// Every row of the range is checked, the workloads past the limit
	// too: the window sums run over all the groups before the limit.
	rs, err := s.read.QueryContext(ctx, `SELECT cluster, team, namespace, kind, name,
		SUM(gpu_seconds), SUM(active_gpu_seconds), SUM(unmeasured_gpu_seconds), SUM(cost_micros), SUM(idle_cost_micros) AS idle,
		SUM(unmeasured_cost_micros),
		SUM(COUNT(*)) OVER (), SUM(SUM(CAST(row_check AS INTEGER))) OVER (), SUM(SUM(`+badExpr("workload_rows")+`)) OVER ()
		FROM workload_rows WHERE `+where+`
		GROUP BY cluster, team, namespace, kind, name
		ORDER BY idle DESC, cluster, team, namespace, kind, name LIMIT ?`, args...)
	if err != nil {
		return nil, s.readErr("query workloads", "workload_rows", q.From, q.To, err)
	}
	defer rs.Close()
	var out []ledger.WorkloadRow
	var seen tally
	for rs.Next() {
		w := ledger.WorkloadRow{Hour: q.From.UTC()}
		if err := rs.Scan(&w.Cluster, &w.Team, &w.Namespace, &w.Kind, &w.Name,
			&w.GPUSeconds, &w.ActiveGPUSeconds, &w.UnmeasuredGPUSeconds, &w.CostMicros, &w.IdleCostMicros, &w.UnmeasuredCostMicros,
			&seen.rows, &seen.sum, &seen.bad); err != nil {
			return nil, s.readErr("scan workload row", "workload_rows", q.From, q.To, err)
		}
		out = append(out, w)
	}
	if err := rs.Err(); err != nil {
		return nil, s.readErr("read workload rows", "workload_rows", q.From, q.To, err)
	}
	if err := s.verifyTally(ctx, "workload_rows", where, args[:len(args)-1], seen, q.From, q.To); err != nil {
		return nil, err
	}
	return out, nil
}

// checkRange checks the rows of table that where selects, and their
// counts.
func (s *Store) checkRange(ctx context.Context, table, where string, args []any, from, to time.Time) error {
	var t tally
	if err := s.read.QueryRowContext(ctx, `SELECT `+tallyExprs(table)+` FROM `+table+` WHERE `+where, args...).Scan(&t.rows, &t.sum, &t.bad); err != nil {
		return s.readErr("check "+table, table, from, to, err)
	}
	return s.verifyTally(ctx, table, where, args, t, from, to)
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
