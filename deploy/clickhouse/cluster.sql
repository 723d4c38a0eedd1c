-- gpuledger on a ClickHouse cluster: replicated local tables on every node
-- and Distributed tables over them. Apply once with clickhouse-client on any
-- node (ON CLUSTER needs the cluster's ZooKeeper), then run gpuledger with
--   -ledger.store=clickhouse -clickhouse.distributed
--   -clickhouse.dsn='clickhouse://node:9000/gpuledger?insert_distributed_sync=1'
--
-- The cluster is named gpuledger in <remote_servers>; {shard} and {replica}
-- are each node's <macros>. The columns are those of ledger/clickhouse's
-- migrations; keep the two in step.
--
-- Sharding: all versions of one (cluster, hour) must live on one shard, since
-- reads keep each hour's newest version; the sharding key is therefore the
-- cluster and the hour. A month's chargeback reads every shard in parallel.

CREATE DATABASE IF NOT EXISTS gpuledger ON CLUSTER gpuledger;

CREATE TABLE IF NOT EXISTS gpuledger.ledger_rows ON CLUSTER gpuledger (
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
    energy_cost Decimal(18, 6),
    unmeasured_gpu_seconds Float64 DEFAULT 0,
    unmeasured_cost Decimal(18, 6) DEFAULT 0
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/ledger_rows', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed);

CREATE TABLE IF NOT EXISTS gpuledger.workload_rows ON CLUSTER gpuledger (
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
    idle_cost Decimal(18, 6),
    unmeasured_gpu_seconds Float64 DEFAULT 0,
    unmeasured_cost Decimal(18, 6) DEFAULT 0
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/workload_rows', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, team, namespace, kind, name);

CREATE TABLE IF NOT EXISTS gpuledger.checkpoints ON CLUSTER gpuledger (
    name String,
    at_ms Int64,
    version UInt64
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/checkpoints', '{replica}', version)
ORDER BY name;

-- Rewrites of written hours (backfills over settled hours), kept forever.
CREATE TABLE IF NOT EXISTS gpuledger.audit ON CLUSTER gpuledger (
    at_ms Int64,
    cluster String,
    from_hour DateTime,
    to_hour DateTime,
    source String,
    rows UInt64,
    note String
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/gpuledger/audit', '{replica}')
ORDER BY (cluster, from_hour, at_ms);

-- Flags on hours whose rows may not say all that happened (acknowledged
-- telemetry lost from a write-ahead log), kept forever.
CREATE TABLE IF NOT EXISTS gpuledger.hour_flags ON CLUSTER gpuledger (
    cluster String,
    from_hour DateTime,
    to_hour DateTime,
    reason String,
    detail String,
    at_ms Int64
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/gpuledger/hour_flags', '{replica}')
ORDER BY (cluster, from_hour, to_hour, reason, detail);

-- Rewrites of team-hours: restatements of open months, adjustments of
-- closed ones (billed_in: the month they are billed in; 1970-01-01 for a
-- restatement), kept forever.
CREATE TABLE IF NOT EXISTS gpuledger.restatements ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/gpuledger/restatements', '{replica}')
ORDER BY (cluster, hour, team, at_ms);

-- The months closed (gpuledger close); a month closed twice is read as
-- its first close.
CREATE TABLE IF NOT EXISTS gpuledger.month_closes ON CLUSTER gpuledger (
    month DateTime,
    at_ms Int64,
    by String,
    note String
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/gpuledger/month_closes', '{replica}')
ORDER BY month;

-- The queues' hours (pending demand and waits, for the capacity trigger).
CREATE TABLE IF NOT EXISTS gpuledger.queue_rows ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/queue_rows', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, cluster_queue);

-- The workloads' times in Kueue (capacity's what-if).
CREATE TABLE IF NOT EXISTS gpuledger.workload_times ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/workload_times', '{replica}', version)
PARTITION BY toYYYYMM(toDateTime(intDiv(submit_ms, 1000)))
ORDER BY (cluster, namespace, name, submit_ms);

-- The daily rollup of ledger_rows (gpuledger keeps it as it writes hours).
CREATE TABLE IF NOT EXISTS gpuledger.ledger_days ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/ledger_days', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed);

-- The monthly rollup of ledger_days (gpuledger keeps it as it writes hours).
CREATE TABLE IF NOT EXISTS gpuledger.ledger_months ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/ledger_months', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, team, namespace, local_queue, cluster_queue, flavor, borrowed);

-- The inference endpoints' hours (scale-to-zero).
CREATE TABLE IF NOT EXISTS gpuledger.endpoint_rows ON CLUSTER gpuledger (
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
    idle_since_ms Int64,
    gaps_woken Array(Float64),
    gaps_wakes Array(Int64),
    gaps_measured Array(Int64),
    gaps_unmeasured Array(Int64)
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/endpoint_rows', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour, namespace, model, kind, name);

-- The lines, the rows' explanation per GPU and holder (GET /api/v1/explain):
-- each write of an hour at a new version, named in line_hours once all its
-- lines are in; reads keep each hour's newest named version.
CREATE TABLE IF NOT EXISTS gpuledger.line_rows ON CLUSTER gpuledger (
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
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/gpuledger/line_rows', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, team, namespace, workload, hour);

CREATE TABLE IF NOT EXISTS gpuledger.line_hours ON CLUSTER gpuledger (
    hour DateTime,
    cluster String,
    version UInt64
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/gpuledger/line_hours', '{replica}', version)
PARTITION BY toYYYYMM(hour)
ORDER BY (cluster, hour);

-- Distributed tables: what gpuledger reads and writes.
CREATE TABLE IF NOT EXISTS gpuledger.ledger_rows_all ON CLUSTER gpuledger AS gpuledger.ledger_rows
ENGINE = Distributed(gpuledger, gpuledger, ledger_rows, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.workload_rows_all ON CLUSTER gpuledger AS gpuledger.workload_rows
ENGINE = Distributed(gpuledger, gpuledger, workload_rows, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.checkpoints_all ON CLUSTER gpuledger AS gpuledger.checkpoints
ENGINE = Distributed(gpuledger, gpuledger, checkpoints, cityHash64(name));

CREATE TABLE IF NOT EXISTS gpuledger.audit_all ON CLUSTER gpuledger AS gpuledger.audit
ENGINE = Distributed(gpuledger, gpuledger, audit, cityHash64(cluster));

CREATE TABLE IF NOT EXISTS gpuledger.hour_flags_all ON CLUSTER gpuledger AS gpuledger.hour_flags
ENGINE = Distributed(gpuledger, gpuledger, hour_flags, cityHash64(cluster));

CREATE TABLE IF NOT EXISTS gpuledger.restatements_all ON CLUSTER gpuledger AS gpuledger.restatements
ENGINE = Distributed(gpuledger, gpuledger, restatements, cityHash64(cluster));

CREATE TABLE IF NOT EXISTS gpuledger.month_closes_all ON CLUSTER gpuledger AS gpuledger.month_closes
ENGINE = Distributed(gpuledger, gpuledger, month_closes, rand());

CREATE TABLE IF NOT EXISTS gpuledger.queue_rows_all ON CLUSTER gpuledger AS gpuledger.queue_rows
ENGINE = Distributed(gpuledger, gpuledger, queue_rows, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.workload_times_all ON CLUSTER gpuledger AS gpuledger.workload_times
ENGINE = Distributed(gpuledger, gpuledger, workload_times, cityHash64(cluster, namespace, name));

CREATE TABLE IF NOT EXISTS gpuledger.ledger_days_all ON CLUSTER gpuledger AS gpuledger.ledger_days
ENGINE = Distributed(gpuledger, gpuledger, ledger_days, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.ledger_months_all ON CLUSTER gpuledger AS gpuledger.ledger_months
ENGINE = Distributed(gpuledger, gpuledger, ledger_months, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.endpoint_rows_all ON CLUSTER gpuledger AS gpuledger.endpoint_rows
ENGINE = Distributed(gpuledger, gpuledger, endpoint_rows, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.line_rows_all ON CLUSTER gpuledger AS gpuledger.line_rows
ENGINE = Distributed(gpuledger, gpuledger, line_rows, cityHash64(cluster, toUInt32(hour)));

CREATE TABLE IF NOT EXISTS gpuledger.line_hours_all ON CLUSTER gpuledger AS gpuledger.line_hours
ENGINE = Distributed(gpuledger, gpuledger, line_hours, cityHash64(cluster, toUInt32(hour)));

-- Upgrading a cluster created before the unmeasured columns (gpuledger's
-- migrations 4 and 5 on a single server):
--   ALTER TABLE gpuledger.ledger_rows ON CLUSTER gpuledger ADD COLUMN unmeasured_gpu_seconds Float64 DEFAULT 0, ADD COLUMN unmeasured_cost Decimal(18, 6) DEFAULT 0;
--   ALTER TABLE gpuledger.workload_rows ON CLUSTER gpuledger ADD COLUMN unmeasured_gpu_seconds Float64 DEFAULT 0, ADD COLUMN unmeasured_cost Decimal(18, 6) DEFAULT 0;
--   then drop and re-create ledger_rows_all and workload_rows_all as above.
-- Upgrading a cluster created before the queue rows (migration 7) or the
-- workload times (migration 8), the endpoint rows (migration 9) or the daily
-- rollup (migrations 10 and 11): run the queue_rows, queue_rows_all,
-- workload_times, workload_times_all, endpoint_rows, endpoint_rows_all,
-- ledger_days and ledger_days_all statements above, then fill the rollup
-- from what is written (gpuledger keeps it from then on):
--   INSERT INTO gpuledger.ledger_days_all SELECT toStartOfDay(hour) AS day, cluster, team, namespace, local_queue, cluster_queue, flavor,
--     borrowed, toUInt64(1), sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds), sum(cost), sum(idle_cost),
--     sum(unmeasured_cost), sum(unallocated_cost), sum(energy_joules), sum(energy_cost) FROM gpuledger.ledger_rows_all FINAL
--     WHERE (cluster, hour, version) GLOBAL IN (SELECT cluster, hour, max(version) FROM gpuledger.ledger_rows_all GROUP BY cluster, hour)
--     GROUP BY day, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed;
-- Upgrading a cluster created before the monthly rollup (migrations 12 and
-- 13): run the ledger_months and ledger_months_all statements above, then
--   INSERT INTO gpuledger.ledger_months_all SELECT toDateTime(toStartOfMonth(hour)) AS month, cluster, team, namespace, local_queue,
--     cluster_queue, flavor, borrowed, toUInt64(1), sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds), sum(cost),
--     sum(idle_cost), sum(unmeasured_cost), sum(unallocated_cost), sum(energy_joules), sum(energy_cost) FROM gpuledger.ledger_days_all FINAL
--     WHERE (cluster, hour, version) GLOBAL IN (SELECT cluster, hour, max(version) FROM gpuledger.ledger_days_all GROUP BY cluster, hour)
--     GROUP BY month, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed;
-- (serve -clickhouse.distributed reads ledger_months_all).
