package embedded

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"modernc.org/sqlite"

	"github.com/gpuledger/gpuledger/ledger"
)

// Every row of every table carries a check of its values (row_check): a
// CRC-32C of the columns of checkColumns, in that order, with 1<<32 added
// so that no check is 0. It is computed from what SQLite stored (an UPDATE
// with the SQL function gpuledger_check after the rows of an hour are
// written), or in Go from the values as SQLite will return them, and
// verified by every read (SUM(gpuledger_bad(row_check, ...)) beside the
// sums it reads): a byte flipped in a data page, in a value, a key or the
// check itself, is a ledger.DamageError, never a changed number. SQLite's
// quick_check at Open finds damage to the file's structure.

// A row that goes missing (a b-tree page whose cell count or pointer is
// damaged, an index entry that no longer leads to its row) fails no check
// of its own, so the tables of hours also keep, per (cluster, hour or day
// or month, team), how many rows there are and the sum of their checks
// (row_counts). A read sums the same over what it read and compares:
// a row missing, or one that turns up where it does not belong, is a
// DamageError too.

// countedTables are the tables with row_counts, and the column that
// names the team of a row ("" where the table has none).
var countedTables = map[string]string{
	"ledger_rows": "team", "ledger_days": "team", "ledger_months": "team", "workload_rows": "team",
	"queue_rows": "''", "endpoint_rows": "''", "line_rows": "team",
}

// recount is the SQL that makes a table's row counts of one (cluster,
// hour) what the table holds: delete them, then count.
func recount(table string) [2]string {
	return [2]string{`DELETE FROM row_counts WHERE tbl = '` + table + `' AND cluster = ? AND bucket = ?`,
		`INSERT INTO row_counts (tbl, cluster, bucket, team, rows, check_sum)
		SELECT '` + table + `', cluster, hour, ` + countedTables[table] + `, COUNT(*), SUM(row_check) FROM ` + table + `
		WHERE cluster = ? AND hour = ? GROUP BY cluster, hour, ` + countedTables[table]}
}

// checkColumns lists, per table, the columns its rows' checks cover.
var checkColumns = map[string]string{
	"ledger_rows":    ledgerCheckColumns,
	"ledger_days":    ledgerCheckColumns,
	"ledger_months":  ledgerCheckColumns,
	"workload_rows":  `hour, cluster || char(0) || team || char(0) || namespace || char(0) || kind || char(0) || name, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros, unmeasured_cost_micros`,
	"queue_rows":     `hour, cluster, cluster_queue, pending_workloads, pending_gpus, admitted, admitted_wait, pending_wait`,
	"endpoint_rows":  `hour, cluster, namespace, model, kind, name, pods, reported_seconds, busy_seconds, requests, generation_tokens, gaps, idle_since_ms`,
	"workload_times": `cluster, namespace, name, submit_ms, local_queue, resource, count, admit_ms, finish_ms`,
	"checkpoints":    `name, at`,
	"audit":          `at, cluster, from_hour, to_hour, source, rows, note`,
	"hour_flags":     `cluster, from_hour, to_hour, reason, detail, at`,
	"restatements":   `at, cluster, hour, team, before_micros, after_micros, before_gpu_seconds, after_gpu_seconds, source, by, reason, billed_in`,
	"month_closes":   `month, at, by, note`,
	"line_rows": `hour, cluster || char(0) || team || char(0) || namespace || char(0) || local_queue || char(0) || cluster_queue || char(0) || flavor
		|| char(0) || kind || char(0) || node || char(0) || gpu || char(0) || mig || char(0) || pod || char(0) || workload_kind || char(0) || workload,
		rate_micros, rate_source, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros, unmeasured_cost_micros,
		unallocated_cost_micros, energy_cost_micros`,
}

// ledgerCheckColumns are the ledger tables' columns, the names joined by
// NUL in SQL (names are DNS names, which hold none): one string handed
// to the check function rather than six is a third of the cost of a
// checked read.
const ledgerCheckColumns = `hour, cluster || char(0) || team || char(0) || namespace || char(0) || local_queue || char(0) || cluster_queue || char(0) || flavor,
	borrowed, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros, unmeasured_cost_micros, unallocated_cost_micros,
	energy_joules, energy_cost_micros`

// checkedTables lists the tables in the order verify reads them.
var checkedTables = []string{"ledger_rows", "ledger_days", "ledger_months", "workload_rows", "queue_rows", "endpoint_rows",
	"workload_times", "checkpoints", "audit", "hour_flags", "restatements", "month_closes", "line_rows"}

// badExpr is the SQL that is 1 for a row of table whose check fails, else
// 0.
func badExpr(table string) string {
	return `gpuledger_bad(row_check, ` + checkColumns[table] + `)`
}

// setChecks is the UPDATE that computes the checks of a table's rows in
// one (cluster, hour).
func setChecks(table string) string {
	return `UPDATE ` + table + ` SET row_check = gpuledger_check(` + checkColumns[table] + `) WHERE cluster = ? AND hour = ?`
}

func init() {
	sqlite.MustRegisterDeterministicScalarFunction("gpuledger_check", -1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		return rowCheck(args...)
	})
	sqlite.MustRegisterDeterministicScalarFunction("gpuledger_bad", -1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if len(args) == 0 {
			return nil, errors.New("gpuledger_bad: no arguments")
		}
		want, err := rowCheck(args[1:]...)
		if err != nil {
			return nil, err
		}
		if got, ok := args[0].(int64); ok && got == want {
			return int64(0), nil
		}
		return int64(1), nil
	})
}

// rowCheck is the check of a row's values, as SQLite gives them to a
// function (int64, float64, string, []byte, nil): each value's type and
// bytes, CRC-32C, plus 1<<32.
func rowCheck(vals ...driver.Value) (int64, error) {
	var crc uint32
	var b [9]byte
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b[0] = 0
			crc = crc32.Update(crc, castagnoli, b[:1])
		case int64:
			b[0] = 1
			binary.LittleEndian.PutUint64(b[1:], uint64(x))
			crc = crc32.Update(crc, castagnoli, b[:])
		case float64:
			b[0] = 2
			binary.LittleEndian.PutUint64(b[1:], math.Float64bits(x))
			crc = crc32.Update(crc, castagnoli, b[:])
		case string:
			b[0] = 3
			binary.LittleEndian.PutUint64(b[1:], uint64(len(x)))
			crc = crc32.Update(crc, castagnoli, b[:])
			crc = crc32.Update(crc, castagnoli, unsafe.Slice(unsafe.StringData(x), len(x)))
		case []byte:
			b[0] = 4
			binary.LittleEndian.PutUint64(b[1:], uint64(len(x)))
			crc = crc32.Update(crc, castagnoli, b[:])
			crc = crc32.Update(crc, castagnoli, x)
		default:
			return 0, fmt.Errorf("row check of a %T", v)
		}
	}
	return int64(crc) + 1<<32, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// damaged returns a ledger.DamageError when bad rows of table failed
// their checks, nil when none did.
func damaged(table string, bad int64, from, to time.Time) error {
	if bad == 0 {
		return nil
	}
	return &ledger.DamageError{Store: "embedded", Table: table, Rows: bad, From: from, To: to}
}

// tally is what a read of a counted table saw: rows, the sum of their
// checks, and how many failed them.
type tally struct{ rows, sum, bad int64 }

func (t *tally) add(o tally) { t.rows, t.sum, t.bad = t.rows+o.rows, t.sum+o.sum, t.bad+o.bad }

// tallyExprs are the SQL of a tally's three sums over table's rows. A
// check read as a number, not an integer (a damaged record's type byte),
// is read as an integer: the sum then differs from the row counts' (a
// DamageError), where SUM would turn REAL and fail to scan.
func tallyExprs(table string) string {
	return `COUNT(*), COALESCE(SUM(CAST(row_check AS INTEGER)), 0), COALESCE(SUM(` + badExpr(table) + `), 0)`
}

// verifyTally compares what a read of table saw, over the rows that
// where (on hour, cluster and team, with args) selects, with the row
// counts: a row failing its check, or one missing or more, is a
// DamageError.
func (s *Store) verifyTally(ctx context.Context, table, where string, args []any, got tally, from, to time.Time) error {
	if err := damaged(table, got.bad, from, to); err != nil {
		return err
	}
	if countedTables[table] == "" {
		return nil
	}
	where = strings.ReplaceAll(where, "hour", "bucket")
	var want tally
	err := s.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(CAST(rows AS INTEGER)), 0), COALESCE(SUM(CAST(check_sum AS INTEGER)), 0) FROM row_counts
		WHERE tbl = '`+table+`' AND `+where, args...).Scan(&want.rows, &want.sum)
	if err != nil {
		return s.readErr("read the row counts of "+table, table, from, to, err)
	}
	if got.rows != want.rows || got.sum != want.sum {
		return &ledger.DamageError{Store: "embedded", Table: table, From: from, To: to,
			Err: fmt.Errorf("%d rows read where the row counts say %d (or their checks sum differently): rows missing or misplaced", got.rows, want.rows)}
	}
	return nil
}

// IntegrityOptions bounds the check Open runs.
type integrityResult struct {
	ok        bool
	completed bool
	problems  []string
}

// quickCheck runs SQLite's quick_check within timeout: its problems (at
// most 20), or completed false when it did not finish in time.
func quickCheck(db *sql.DB, timeout time.Duration) (integrityResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rs, err := db.QueryContext(ctx, `PRAGMA quick_check(20)`)
	if err != nil {
		if ctx.Err() != nil {
			return integrityResult{}, nil
		}
		return integrityResult{}, err
	}
	defer rs.Close()
	var res integrityResult
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			return integrityResult{}, err
		}
		if line != "ok" {
			res.problems = append(res.problems, line)
		}
	}
	if err := rs.Err(); err != nil {
		if ctx.Err() != nil {
			return integrityResult{}, nil
		}
		return integrityResult{}, err
	}
	res.completed, res.ok = true, len(res.problems) == 0
	return res, nil
}

// corruptFile says whether err is SQLite finding its file damaged
// (SQLITE_CORRUPT, SQLITE_NOTADB), or a schema the migrations made that
// no longer has its tables or columns (a damaged sqlite_master).
func corruptFile(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	// A value of a type the store never writes (an INTEGER read back as a
	// REAL with a fraction: a record's type byte changed) fails to scan.
	for _, s := range []string{"malformed", "SQLITE_CORRUPT", "not a database", "no such column", "no such table", "sql: Scan error on column"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// probeSchema reads nothing from every table, naming every column the
// store uses: a schema damaged on disk (sqlite_master is a page like any
// other) fails here, at Open, rather than at the first read.
func probeSchema(db *sql.DB) error {
	for _, t := range checkedTables {
		if _, err := db.Exec(`SELECT ` + checkColumns[t] + `, row_check FROM ` + t + ` LIMIT 0`); err != nil {
			return &ledger.DamageError{Store: "embedded", Table: t, Err: fmt.Errorf("the schema: %w", err)}
		}
	}
	if _, err := db.Exec(`SELECT tbl, cluster, bucket, team, rows, check_sum FROM row_counts LIMIT 0`); err != nil {
		return &ledger.DamageError{Store: "embedded", Table: "row_counts", Err: fmt.Errorf("the schema: %w", err)}
	}
	return nil
}

// checked returns vals with their check after them, for an INSERT of a
// row and its row_check: vals must be of the types SQLite returns for
// their columns (int64 for INTEGER, float64 for REAL, string for TEXT).
func checked(vals ...driver.Value) []any {
	c, err := rowCheck(vals...)
	if err != nil {
		panic(err) // a programming error: a value of a type no column has
	}
	out := make([]any, 0, len(vals)+1)
	for _, v := range vals {
		out = append(out, v)
	}
	return append(out, c)
}

// describe is the SQL that names a row of each table in what verify
// prints.
var describe = map[string]string{
	"ledger_rows":    `cluster || ' ' || strftime('%Y-%m-%dT%H:%M:%SZ', hour, 'unixepoch') || ' team ' || team || ' namespace ' || namespace || ' flavor ' || flavor`,
	"workload_rows":  `cluster || ' ' || strftime('%Y-%m-%dT%H:%M:%SZ', hour, 'unixepoch') || ' team ' || team || ' ' || kind || '/' || name`,
	"queue_rows":     `cluster || ' ' || strftime('%Y-%m-%dT%H:%M:%SZ', hour, 'unixepoch') || ' ClusterQueue ' || cluster_queue`,
	"endpoint_rows":  `cluster || ' ' || strftime('%Y-%m-%dT%H:%M:%SZ', hour, 'unixepoch') || ' ' || namespace || '/' || model || ' ' || kind || '/' || name`,
	"workload_times": `cluster || ' ' || namespace || '/' || name || ' submitted ' || strftime('%Y-%m-%dT%H:%M:%SZ', submit_ms / 1000, 'unixepoch')`,
	"checkpoints":    `name`,
	"audit":          `cluster || ' ' || source`,
	"hour_flags":     `cluster || ' ' || reason`,
	"restatements":   `cluster || ' ' || strftime('%Y-%m-%dT%H:%M:%SZ', hour, 'unixepoch') || ' team ' || team || ' ' || source`,
	"month_closes":   `strftime('%Y-%m', month, 'unixepoch')`,
}

func init() {
	describe["ledger_days"], describe["ledger_months"] = describe["ledger_rows"], describe["ledger_rows"]
}

// Verify checks the whole ledger: SQLite's integrity_check of the file,
// every row's check, every hour's row counts, and that the rollups are
// the sums of the hours. It returns what it found damaged (at most 20
// rows named per table); an error when it could not check. progress is
// told each step as it starts.
func (s *Store) Verify(ctx context.Context, progress func(step string)) ([]ledger.Problem, error) {
	var problems []ledger.Problem
	progress("SQLite's integrity_check of the file")
	rs, err := s.read.QueryContext(ctx, `PRAGMA integrity_check(100)`)
	if err != nil {
		return nil, fmt.Errorf("integrity_check: %w", err)
	}
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			rs.Close()
			return nil, err
		}
		if line != "ok" {
			problems = append(problems, ledger.Problem{Table: "the file", Detail: line})
		}
	}
	rs.Close()
	for _, t := range checkedTables {
		progress("the checks of every row of " + t)
		var n int64
		if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t+` WHERE `+badExpr(t)+` = 1`).Scan(&n); err != nil {
			problems = append(problems, ledger.Problem{Table: t, Detail: "unreadable: " + err.Error()})
			continue
		}
		if n == 0 {
			continue
		}
		rows, err := s.read.QueryContext(ctx, `SELECT `+describe[t]+` FROM `+t+` WHERE `+badExpr(t)+` = 1 LIMIT 20`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var d sql.NullString
			if err := rows.Scan(&d); err != nil {
				rows.Close()
				return nil, err
			}
			problems = append(problems, ledger.Problem{Table: t, Detail: "row fails its check: " + d.String})
		}
		rows.Close()
		if n > 20 {
			problems = append(problems, ledger.Problem{Table: t, Detail: fmt.Sprintf("%d more rows fail their checks", n-20)})
		}
	}
	for _, t := range slices.Sorted(maps.Keys(countedTables)) {
		progress("the row counts of " + t)
		rows, err := s.read.QueryContext(ctx, `SELECT COALESCE(c.cluster, a.cluster), COALESCE(c.bucket, a.hour), COALESCE(c.team, a.team),
			COALESCE(c.rows, 0), COALESCE(a.n, 0)
			FROM (SELECT cluster, bucket, team, rows, check_sum FROM row_counts WHERE tbl = '`+t+`') c
			FULL OUTER JOIN (SELECT cluster, hour, `+countedTables[t]+` AS team, COUNT(*) AS n, SUM(CAST(row_check AS INTEGER)) AS s FROM `+t+`
				GROUP BY cluster, hour, `+countedTables[t]+`) a
			ON c.cluster = a.cluster AND c.bucket = a.hour AND c.team = a.team
			WHERE c.rows IS NOT a.n OR c.check_sum IS NOT a.s LIMIT 20`)
		if err != nil {
			problems = append(problems, ledger.Problem{Table: t, Detail: "row counts unreadable: " + err.Error()})
			continue
		}
		for rows.Next() {
			var cluster, team string
			var bucket, want, got int64
			if err := rows.Scan(&cluster, &bucket, &team, &want, &got); err != nil {
				rows.Close()
				return nil, err
			}
			problems = append(problems, ledger.Problem{Table: t, Detail: fmt.Sprintf("%s %s team %q: %d rows where the row counts say %d (or their checks sum differently)",
				cluster, time.Unix(bucket, 0).UTC().Format(time.RFC3339), team, got, want)})
		}
		rows.Close()
	}
	var first, last sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT MIN(hour), MAX(hour) FROM ledger_rows`).Scan(&first, &last); err != nil {
		return problems, fmt.Errorf("read the ledger's range: %w", err)
	}
	if first.Valid {
		from, to := time.Unix(first.Int64, 0).UTC(), time.Unix(last.Int64, 0).UTC().Add(time.Hour)
		progress(fmt.Sprintf("the rollups against the hours, %s to %s", from.Format("2006-01"), to.Format("2006-01")))
		more, err := ledger.CompareRollups(ctx, s, from, to, 20)
		if err != nil {
			return problems, err
		}
		problems = append(problems, more...)
	}
	return problems, nil
}
