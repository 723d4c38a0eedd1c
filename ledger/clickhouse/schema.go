package clickhouse

import "strings"

// migrations are applied in order at Open; each runs once per database,
// recorded in gpuledger_schema. The SQL runs on ClickHouse 18.16 (Debian's
// package) as on current releases: MergeTree-family engines, Decimal,
// DateTime and plain functions only, and explicit column lists in every
// INSERT.
//
// Ledger rows carry a version: every write of a (cluster, hour) gets a new
// one, and reads keep only each hour's newest version, so a rewritten hour
// replaces the old one even where it has fewer rows. ReplacingMergeTree
// folds equal keys to the newest version as parts merge; FINAL makes reads
// exact before that.
var migrations = []string{
	1: `CREATE TABLE IF NOT EXISTS {db}.ledger_rows (
		hour DateTime,
		cluster String,
		team String,
		namespace String,
		local_queue String,
		cluster_queue String,
		flavor String,
		borrowed UInt8,
		version UInt64,
		gpu_seconds Float64,
		active_gpu_seconds Float64,
		cost Decimal(18, 6),
		idle_cost Decimal(18, 6),
		unallocated_cost Decimal(18, 6),
		energy_joules Float64,
		energy_cost Decimal(18, 6)
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed)`,
	2: `CREATE TABLE IF NOT EXISTS {db}.workload_rows (
		hour DateTime,
		cluster String,
		team String,
		namespace String,
		kind String,
		name String,
		version UInt64,
		gpu_seconds Float64,
		active_gpu_seconds Float64,
		cost Decimal(18, 6),
		idle_cost Decimal(18, 6)
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour, team, namespace, kind, name)`,
	3: `CREATE TABLE IF NOT EXISTS {db}.checkpoints (
		name String,
		at_ms Int64,
		version UInt64
	) ENGINE = ReplacingMergeTree(version)
	ORDER BY name`,
	// Time held while no telemetry measured activity (issue: the bill
	// follows the holder), and the record of rewrites of written hours.
	4: `ALTER TABLE {db}.ledger_rows ADD COLUMN unmeasured_gpu_seconds Float64 DEFAULT 0,
		ADD COLUMN unmeasured_cost Decimal(18, 6) DEFAULT 0`,
	5: `ALTER TABLE {db}.workload_rows ADD COLUMN unmeasured_gpu_seconds Float64 DEFAULT 0,
		ADD COLUMN unmeasured_cost Decimal(18, 6) DEFAULT 0`,
	6: `CREATE TABLE IF NOT EXISTS {db}.audit (
		at_ms Int64,
		cluster String,
		from_hour DateTime,
		to_hour DateTime,
		source String,
		rows UInt64,
		note String
	) ENGINE = MergeTree
	ORDER BY (cluster, from_hour, at_ms)`,
	// The queues' hours (capacity: pending demand and waits); each wait
	// histogram is its bounds (the last +Inf) and cumulative counts.
	7: `CREATE TABLE IF NOT EXISTS {db}.queue_rows (
		hour DateTime,
		cluster String,
		cluster_queue String,
		version UInt64,
		pending_workloads Float64,
		pending_gpus Float64,
		admitted Float64,
		admitted_wait_le Array(Float64),
		admitted_wait_n Array(Float64),
		pending_wait_le Array(Float64),
		pending_wait_n Array(Float64)
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour, cluster_queue)`,
	// The workloads' times in Kueue (capacity's what-if); 0 for an
	// admission or finish not yet seen.
	8: `CREATE TABLE IF NOT EXISTS {db}.workload_times (
		cluster String,
		namespace String,
		name String,
		submit_ms Int64,
		version UInt64,
		local_queue String,
		resource String,
		count Int64,
		admit_ms Int64,
		finish_ms Int64
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(toDateTime(intDiv(submit_ms, 1000)))
	ORDER BY (cluster, namespace, name, submit_ms)`,
	// The inference endpoints' hours (scale-to-zero); the idle gaps are
	// each bucket's count and seconds (ledger.GapBounds and one above);
	// idle_since_ms 0 when no gap was open.
	9: `CREATE TABLE IF NOT EXISTS {db}.endpoint_rows (
		hour DateTime,
		cluster String,
		namespace String,
		model String,
		version UInt64,
		kind String,
		name String,
		pods Int64,
		reported_seconds Float64,
		busy_seconds Float64,
		requests Float64,
		generation_tokens Float64,
		gaps_n Array(Int64),
		gaps_s Array(Float64),
		idle_since_ms Int64
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour, namespace, model, kind, name)`,
	// The daily rollup: ledger_rows' newest hours summed per UTC day,
	// each day's rows at one version (the newest counts, as for hours),
	// so that day and month answers over a year read 365 rows per key.
	10: rollupTable("ledger_days"),
	// The rollup of what was written before it.
	11: `INSERT INTO {db}.ledger_days (` + rollupColumns + `) ` + backfill(dayBucket, "{db}.ledger_rows"),
	// The monthly rollup: ledger_days' newest days summed per UTC month,
	// so that a year by month reads 12 rows per key; then what was
	// written before it, at version 1.
	12: rollupTable("ledger_months"),
	13: `INSERT INTO {db}.ledger_months (` + rollupColumns + `) ` + backfill(monthBucket, "{db}.ledger_days"),
	// Flags on hours whose rows may not say all that happened; a flag
	// written twice is read once (HourFlags groups them).
	14: `CREATE TABLE IF NOT EXISTS {db}.hour_flags (
		cluster String,
		from_hour DateTime,
		to_hour DateTime,
		reason String,
		detail String,
		at_ms Int64
	) ENGINE = MergeTree
	ORDER BY (cluster, from_hour, to_hour, reason, detail)`,
	// The requests that came as gaps ended, within each of
	// ledger.WakeBounds (flattened), how many gaps have them, how many of
	// those each window covered, and how many gaps have none, by bucket:
	// an upper bound on the requests a cold start makes wait
	// (ledger.Gaps).
	15: `ALTER TABLE {db}.endpoint_rows ADD COLUMN gaps_woken Array(Float64), ADD COLUMN gaps_wakes Array(Int64),
		ADD COLUMN gaps_measured Array(Int64), ADD COLUMN gaps_unmeasured Array(Int64)`,
	// The record of rewrites per team-hour: restatements of open months,
	// adjustments of closed ones (billed_in, the start of the month they
	// are billed in; 1970-01-01 for a restatement).
	16: `CREATE TABLE IF NOT EXISTS {db}.restatements (
		at_ms Int64,
		cluster String,
		hour DateTime,
		team String,
		before_cost Decimal(18, 6),
		after_cost Decimal(18, 6),
		before_gpu_seconds Float64,
		after_gpu_seconds Float64,
		source String,
		by String,
		reason String,
		billed_in DateTime
	) ENGINE = MergeTree
	ORDER BY (cluster, hour, team, at_ms)`,
	// The months closed; a month closed twice is read once, its first
	// close.
	17: `CREATE TABLE IF NOT EXISTS {db}.month_closes (
		month DateTime,
		at_ms Int64,
		by String,
		note String
	) ENGINE = MergeTree
	ORDER BY month`,
	// The lines, the rows' explanation per GPU and holder (ledger.Line).
	// Each write of an hour is at a new version; a line_hours row names
	// it once all its lines are in, and reads keep each hour's newest
	// named version (line_hours is small: a month is 744 rows a cluster).
	// Plain MergeTree: two lines of one version never fold. Ordered by
	// team first, so that a team's month reads its own granules only.
	18: `CREATE TABLE IF NOT EXISTS {db}.line_rows (
		hour DateTime,
		cluster String,
		team String,
		namespace String,
		local_queue String,
		cluster_queue String,
		flavor String,
		kind String,
		node String,
		gpu String,
		mig String,
		pod String,
		workload_kind String,
		workload String,
		rate Decimal(18, 6),
		rate_source String,
		version UInt64,
		gpu_seconds Float64,
		active_gpu_seconds Float64,
		unmeasured_gpu_seconds Float64,
		cost Decimal(18, 6),
		idle_cost Decimal(18, 6),
		unmeasured_cost Decimal(18, 6),
		unallocated_cost Decimal(18, 6),
		energy_cost Decimal(18, 6)
	) ENGINE = MergeTree
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, team, namespace, workload, hour)`,
	19: `CREATE TABLE IF NOT EXISTS {db}.line_hours (
		hour DateTime,
		cluster String,
		version UInt64
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour)`,
}

// backfill is rollupSelect over every row of table, at version 1: every
// later write of a day or month is newer.
func backfill(bucket, table string) string {
	return strings.NewReplacer("{bucket}", bucket, "{v}", "1", "{t}", table, "{cond}", "1").Replace(rollupSelect)
}

// rollupTable is the DDL of a rollup of ledger_rows: its columns, each
// bucket's rows at one version.
func rollupTable(name string) string {
	return strings.ReplaceAll(`CREATE TABLE IF NOT EXISTS {db}.{table} (
		hour DateTime,
		cluster String,
		team String,
		namespace String,
		local_queue String,
		cluster_queue String,
		flavor String,
		borrowed UInt8,
		version UInt64,
		gpu_seconds Float64,
		active_gpu_seconds Float64,
		unmeasured_gpu_seconds Float64,
		cost Decimal(18, 6),
		idle_cost Decimal(18, 6),
		unmeasured_cost Decimal(18, 6),
		unallocated_cost Decimal(18, 6),
		energy_joules Float64,
		energy_cost Decimal(18, 6)
	) ENGINE = ReplacingMergeTree(version)
	PARTITION BY toYYYYMM(hour)
	ORDER BY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed)`, "{table}", name)
}
