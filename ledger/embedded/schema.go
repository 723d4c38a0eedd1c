package embedded

// The ledger's schema: its migrations, applied in order at Open.

import (
	"maps"
	"slices"
)

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
	// 9 → 10: the record of rewrites per team-hour (restatements of open
	// months, adjustments of closed ones) and the months closed.
	9: {
		`CREATE TABLE IF NOT EXISTS restatements (
		at                 INTEGER NOT NULL, -- Unix milliseconds
		cluster            TEXT    NOT NULL,
		hour               INTEGER NOT NULL, -- Unix seconds
		team               TEXT    NOT NULL,
		before_micros      INTEGER NOT NULL,
		after_micros       INTEGER NOT NULL,
		before_gpu_seconds REAL    NOT NULL,
		after_gpu_seconds  REAL    NOT NULL,
		source             TEXT    NOT NULL,
		by                 TEXT    NOT NULL,
		reason             TEXT    NOT NULL,
		billed_in          INTEGER NOT NULL, -- Unix seconds, start of a month; 0: not an adjustment
		row_check          INTEGER NOT NULL DEFAULT 0
	)`,
		`CREATE INDEX IF NOT EXISTS restatements_hour ON restatements (hour)`,
		`CREATE INDEX IF NOT EXISTS restatements_billed ON restatements (billed_in)`,
		`CREATE TABLE IF NOT EXISTS month_closes (
		month     INTEGER PRIMARY KEY, -- Unix seconds, start of the month
		at        INTEGER NOT NULL,    -- Unix milliseconds
		by        TEXT    NOT NULL,
		note      TEXT    NOT NULL,
		row_check INTEGER NOT NULL DEFAULT 0
	)`,
	},
	// 10 → 11: the lines, the rows' explanation per GPU and holder
	// (ledger.Line).
	10: {
		`CREATE TABLE IF NOT EXISTS line_rows (
		hour                    INTEGER NOT NULL,
		cluster                 TEXT    NOT NULL,
		team                    TEXT    NOT NULL,
		namespace               TEXT    NOT NULL,
		local_queue             TEXT    NOT NULL,
		cluster_queue           TEXT    NOT NULL,
		flavor                  TEXT    NOT NULL,
		kind                    TEXT    NOT NULL,
		node                    TEXT    NOT NULL,
		gpu                     TEXT    NOT NULL,
		mig                     TEXT    NOT NULL,
		pod                     TEXT    NOT NULL,
		workload_kind           TEXT    NOT NULL,
		workload                TEXT    NOT NULL,
		rate_micros             INTEGER NOT NULL,
		rate_source             TEXT    NOT NULL,
		gpu_seconds             REAL    NOT NULL,
		active_gpu_seconds      REAL    NOT NULL,
		unmeasured_gpu_seconds  REAL    NOT NULL,
		cost_micros             INTEGER NOT NULL,
		idle_cost_micros        INTEGER NOT NULL,
		unmeasured_cost_micros  INTEGER NOT NULL,
		unallocated_cost_micros INTEGER NOT NULL,
		energy_cost_micros      INTEGER NOT NULL,
		row_check               INTEGER NOT NULL DEFAULT 0
	)`,
		`CREATE INDEX IF NOT EXISTS line_rows_hour ON line_rows (cluster, hour, team)`,
	},
}

// checkMigrationTables are the tables migration 8 gave a row_check: the
// tables there were then. Tables made later have theirs from the start.
var checkMigrationTables = []string{"ledger_rows", "ledger_days", "ledger_months", "workload_rows", "queue_rows", "endpoint_rows",
	"workload_times", "checkpoints", "audit", "hour_flags"}

// checkMigration adds row_check to every table and computes it for the
// rows there, and counts the rows of the tables of hours.
func checkMigration() []string {
	var out []string
	for _, t := range checkMigrationTables {
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
		if !slices.Contains(checkMigrationTables, t) {
			continue // made later, with its counts from the start
		}
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
