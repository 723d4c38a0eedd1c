package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/gpuledger/gpuledger/ledger"
)

type clusterHour struct {
	cluster string
	hour    time.Time
}

// markHours writes, for each hour the record replaces in one table but has
// no rows for in the other, an empty marker row with the record's version
// there, so that the older version's rows of that table stop counting.
// Markers have an empty team (ledger) or name (workloads); reads skip them.
func (s *Store) markHours(ctx context.Context, rec *record) error {
	inRows, inWls := map[clusterHour]bool{}, map[clusterHour]bool{}
	for _, r := range rec.Rows {
		inRows[clusterHour{r.Cluster, r.Hour.UTC()}] = true
	}
	for _, w := range rec.Workloads {
		inWls[clusterHour{w.Cluster, w.Hour.UTC()}] = true
	}
	var wlMarks, rowMarks []clusterHour
	for k := range inRows {
		if !inWls[k] {
			wlMarks = append(wlMarks, k)
		}
	}
	for k := range inWls {
		if !inRows[k] {
			rowMarks = append(rowMarks, k)
		}
	}
	if len(wlMarks) > 0 {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.WorkloadTable)+` (hour, cluster, team, namespace, kind, name, version,
			gpu_seconds, active_gpu_seconds, cost, idle_cost)`)
		if err != nil {
			return fmt.Errorf("mark hours in workloads: %w", err)
		}
		for _, k := range wlMarks {
			if err := b.Append(k.hour, k.cluster, "", "", "", "", rec.Version, 0.0, 0.0, micros(0), micros(0)); err != nil {
				b.Abort()
				return fmt.Errorf("mark hours in workloads: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("mark hours in workloads: %w", err)
		}
	}
	if len(rowMarks) > 0 {
		if err := s.markLedger(ctx, s.opts.LedgerTable, rowMarks, rec.Version); err != nil {
			return fmt.Errorf("mark hours in ledger: %w", err)
		}
	}
	return nil
}

// markLedger writes an empty marker row (no team) at version for each
// (cluster, hour) of keys into table, ledger_rows or one of its rollups.
func (s *Store) markLedger(ctx context.Context, table string, keys []clusterHour, version uint64) error {
	b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(table)+` (hour, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed, version,
		gpu_seconds, active_gpu_seconds, cost, idle_cost, unallocated_cost, energy_joules, energy_cost)`)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.Append(k.hour, k.cluster, "", "", "", "", "", uint8(0), version, 0.0, 0.0, micros(0), micros(0), micros(0), 0.0, micros(0)); err != nil {
			b.Abort()
			return err
		}
	}
	return b.Send()
}

// rollupColumns are the daily rollup's columns, as ledger_rows'.
const rollupColumns = `hour, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed, version,
	gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost, idle_cost, unmeasured_cost, unallocated_cost, energy_joules, energy_cost`

// rollupSelect sums the newest rows of the spans matching cond ({t}: the
// ledger table for the daily rollup, the daily rollup for the monthly one)
// per {bucket}, at version {v}. Marker rows (empty team) sum to a marker of
// the bucket.
const rollupSelect = `SELECT {bucket} AS b, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed, toUInt64({v}),
	sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds), sum(cost), sum(idle_cost), sum(unmeasured_cost),
	sum(unallocated_cost), sum(energy_joules), sum(energy_cost)
	FROM {t} FINAL WHERE {cond} AND (cluster, hour, version) GLOBAL IN (SELECT cluster, hour, max(version) FROM {t} WHERE {cond} GROUP BY cluster, hour)
	GROUP BY b, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed`

// The day and month buckets of queries and of the rollups (a UTC day of
// ledger_rows' hours, a UTC month of ledger_days' days).
const (
	dayBucket   = "toStartOfDay(hour)"
	monthBucket = "toDateTime(toStartOfMonth(hour))"
)

// rollUp recomputes the daily rollup of every day the record wrote an
// hour of, from the newest hours, then the monthly rollup of their months
// from the newest days, each at a version taken then: of two
// recomputations of a day or month, the later one read the later rows and
// wins. A marker row (empty team) of the day or month makes one whose rows
// were all emptied replace its older rollup too.
func (s *Store) rollUp(ctx context.Context, rec *record) error {
	days, months := map[clusterHour]bool{}, map[clusterHour]bool{}
	add := func(cluster string, h time.Time) {
		days[clusterHour{cluster, ledger.StepDay.Truncate(h)}] = true
		months[clusterHour{cluster, ledger.StepMonth.Truncate(h)}] = true
	}
	for _, r := range rec.Rows {
		add(r.Cluster, r.Hour)
	}
	for _, w := range rec.Workloads {
		add(w.Cluster, w.Hour)
	}
	for d := range days {
		if err := s.rollSpan(ctx, s.opts.DayTable, s.opts.LedgerTable, dayBucket, d, d.hour.Add(24*time.Hour)); err != nil {
			return fmt.Errorf("roll up day %s of %s: %w", d.hour.Format(time.DateOnly), d.cluster, err)
		}
	}
	for m := range months {
		if err := s.rollSpan(ctx, s.opts.MonthTable, s.opts.DayTable, monthBucket, m, m.hour.AddDate(0, 1, 0)); err != nil {
			return fmt.Errorf("roll up month %s of %s: %w", m.hour.Format("2006-01"), m.cluster, err)
		}
	}
	return nil
}

// rollSpan writes rollup's rows of one cluster's [k.hour, end): a marker,
// then the sums of from's newest rows of the span, at one new version.
func (s *Store) rollSpan(ctx context.Context, rollup, from, bucket string, k clusterHour, end time.Time) error {
	v := s.nextVersion()
	if err := s.markLedger(ctx, rollup, []clusterHour{k}, v); err != nil {
		return err
	}
	sql := strings.NewReplacer("{bucket}", bucket, "{v}", strconv.FormatUint(v, 10), "{t}", s.table(from),
		"{cond}", "cluster = ? AND hour >= ? AND hour < ?").Replace(rollupSelect)
	return s.conn.Exec(ctx, `INSERT INTO `+s.table(rollup)+` (`+rollupColumns+`) `+sql, k.cluster, k.hour, end, k.cluster, k.hour, end)
}

// where builds the range and filter conditions, and the newest-version
// condition: each (cluster, hour) counts only its last write. GLOBAL IN
// evaluates the subquery once, which a Distributed table needs; all of an
// hour's versions live on one shard (deploy/clickhouse shards by cluster
// and hour).
func where(table string, q ledger.Query) (string, []any) {
	conds := []string{"hour >= ?", "hour < ?"}
	args := []any{q.From.UTC(), q.To.UTC()}
	if q.Cluster != "" {
		conds = append(conds, "cluster = ?")
		args = append(args, q.Cluster)
	}
	base := strings.Join(conds, " AND ")
	sub := fmt.Sprintf("(cluster, hour, version) GLOBAL IN (SELECT cluster, hour, max(version) FROM %s WHERE %s GROUP BY cluster, hour)", table, base)
	subArgs := append([]any(nil), args...)
	if q.Team != "" {
		conds = append(conds, "team = ?")
		args = append(args, q.Team)
	}
	return strings.Join(conds, " AND ") + " AND " + sub, append(args, subArgs...)
}

// Query sums the newest rows per bucket and GroupBy dimensions. Money is
// read as text and parsed exactly.
func (s *Store) Query(ctx context.Context, q ledger.Query) (_ []ledger.Row, rerr error) {
	defer damaged(&rerr, s.opts.LedgerTable, q.From, q.To)
	if err := q.Validate(); err != nil {
		return nil, err
	}
	bucket := map[ledger.Step]string{
		ledger.StepHour:  "hour",
		ledger.StepDay:   dayBucket,
		ledger.StepMonth: monthBucket,
	}[q.Step]
	cols, groupCols := q.SQLColumns(bucket, "toUInt8(0)")
	// Month buckets over whole UTC months come from the monthly rollup (a
	// year is 12 rows per key there), day and month buckets over whole UTC
	// days from the daily one (365, not 8,760).
	table := s.table(s.opts.LedgerTable)
	switch {
	case q.MonthlyRollup():
		table = s.table(s.opts.MonthTable)
	case q.DailyRollup():
		table = s.table(s.opts.DayTable)
	}
	w, args := where(table, q)
	sql := fmt.Sprintf(`SELECT %s, sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds), toString(sum(cost)),
		toString(sum(idle_cost)), toString(sum(unmeasured_cost)), toString(sum(unallocated_cost)), sum(energy_joules), toString(sum(energy_cost))
		FROM %s FINAL WHERE team != '' AND %s GROUP BY %s ORDER BY %s`,
		strings.Join(cols, ", "), table, w, strings.Join(groupCols, ", "), strings.Join(groupCols, ", "))
	rs, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("query ledger: %w", err)
	}
	defer rs.Close()
	var out []ledger.Row
	for rs.Next() {
		var r ledger.Row
		var b time.Time
		var borrowed uint8
		var cost, idle, unmeasured, unalloc, ecost string
		if err := rs.Scan(&b, &r.Cluster, &r.Team, &r.Namespace, &r.LocalQueue, &r.ClusterQueue, &r.Flavor, &borrowed,
			&r.GPUSeconds, &r.ActiveGPUSeconds, &r.UnmeasuredGPUSeconds, &cost, &idle, &unmeasured, &unalloc, &r.EnergyJoules, &ecost); err != nil {
			return nil, fmt.Errorf("scan ledger row: %w", err)
		}
		r.Hour, r.Borrowed = b.UTC(), borrowed == 1
		for _, m := range []struct {
			s   string
			dst *int64
		}{{cost, &r.CostMicros}, {idle, &r.IdleCostMicros}, {unmeasured, &r.UnmeasuredCostMicros}, {unalloc, &r.UnallocatedCostMicros},
			{ecost, &r.EnergyCostMicros}} {
			if *m.dst, err = ledger.ParseMicros(m.s); err != nil {
				return nil, fmt.Errorf("read amount: %w", err)
			}
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read ledger rows: %w", err)
	}
	return out, nil
}

// TopWorkloads sums the newest workload rows, most idle cost first.
func (s *Store) TopWorkloads(ctx context.Context, q ledger.Query, limit int) (_ []ledger.WorkloadRow, rerr error) {
	defer damaged(&rerr, s.opts.WorkloadTable, q.From, q.To)
	if limit <= 0 {
		return nil, fmt.Errorf("workload limit %d: want at least 1", limit)
	}
	table := s.table(s.opts.WorkloadTable)
	w, args := where(table, q)
	args = append(args, limit)
	// Ordered by the idle cost in integer micro-units: the same order as
	// the Decimal sum's, and ClickHouse 18.16 sorts a Decimal128 column
	// with string keys after it far slower: the whole query took 3.7 s
	// for a month of 10,000 GPUs (BenchmarkGPUMonth), 0.8 s so.
	rs, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, team, namespace, kind, name,
		sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds), toString(sum(cost)), toString(sum(idle_cost)),
		toString(sum(unmeasured_cost))
		FROM %s FINAL WHERE name != '' AND %s
		GROUP BY cluster, team, namespace, kind, name
		ORDER BY toInt64(sum(idle_cost) * 1000000) DESC, cluster, team, namespace, kind, name LIMIT ?`, table, w), args...)
	if err != nil {
		return nil, fmt.Errorf("query workloads: %w", err)
	}
	defer rs.Close()
	var out []ledger.WorkloadRow
	for rs.Next() {
		wl := ledger.WorkloadRow{Hour: q.From.UTC()}
		var cost, idle, unmeasured string
		if err := rs.Scan(&wl.Cluster, &wl.Team, &wl.Namespace, &wl.Kind, &wl.Name, &wl.GPUSeconds, &wl.ActiveGPUSeconds,
			&wl.UnmeasuredGPUSeconds, &cost, &idle, &unmeasured); err != nil {
			return nil, fmt.Errorf("scan workload row: %w", err)
		}
		for _, m := range []struct {
			s   string
			dst *int64
		}{{cost, &wl.CostMicros}, {idle, &wl.IdleCostMicros}, {unmeasured, &wl.UnmeasuredCostMicros}} {
			if *m.dst, err = ledger.ParseMicros(m.s); err != nil {
				return nil, fmt.Errorf("read amount: %w", err)
			}
		}
		out = append(out, wl)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read workload rows: %w", err)
	}
	return out, nil
}

// QueueHours returns the newest queue rows of [from, to).
func (s *Store) QueueHours(ctx context.Context, cluster string, from, to time.Time) (_ []ledger.QueueRow, rerr error) {
	defer damaged(&rerr, s.opts.QueueTable, from, to)
	table := s.table(s.opts.QueueTable)
	w, args := where(table, ledger.Query{From: from, To: to, Cluster: cluster})
	rs, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT hour, cluster, cluster_queue, pending_workloads, pending_gpus, admitted,
		admitted_wait_le, admitted_wait_n, pending_wait_le, pending_wait_n
		FROM %s FINAL WHERE %s ORDER BY cluster, hour, cluster_queue`, table, w), args...)
	if err != nil {
		return nil, fmt.Errorf("query queue rows: %w", err)
	}
	defer rs.Close()
	var out []ledger.QueueRow
	for rs.Next() {
		var r ledger.QueueRow
		if err := rs.Scan(&r.Hour, &r.Cluster, &r.ClusterQueue, &r.PendingWorkloads, &r.PendingGPUs, &r.Admitted,
			&r.AdmittedWait.Bounds, &r.AdmittedWait.Counts, &r.PendingWait.Bounds, &r.PendingWait.Counts); err != nil {
			return nil, fmt.Errorf("scan queue row: %w", err)
		}
		r.Hour = r.Hour.UTC()
		for _, h := range []*ledger.Histogram{&r.AdmittedWait, &r.PendingWait} {
			if len(h.Bounds) == 0 {
				*h = ledger.Histogram{}
			}
		}
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("read queue row: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read queue rows: %w", err)
	}
	return out, nil
}

// EndpointHours returns the newest endpoint rows of [from, to).
func (s *Store) EndpointHours(ctx context.Context, cluster string, from, to time.Time) (_ []ledger.EndpointRow, rerr error) {
	defer damaged(&rerr, s.opts.EndpointTable, from, to)
	table := s.table(s.opts.EndpointTable)
	w, args := where(table, ledger.Query{From: from, To: to, Cluster: cluster})
	rs, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT hour, cluster, namespace, model, kind, name, pods, reported_seconds, busy_seconds,
		requests, generation_tokens, gaps_n, gaps_s, idle_since_ms, gaps_woken, gaps_wakes, gaps_measured, gaps_unmeasured
		FROM %s FINAL WHERE %s ORDER BY cluster, hour, namespace, model, kind, name`, table, w), args...)
	if err != nil {
		return nil, fmt.Errorf("query endpoint rows: %w", err)
	}
	defer rs.Close()
	var out []ledger.EndpointRow
	for rs.Next() {
		var r ledger.EndpointRow
		var pods, idle int64
		if err := rs.Scan(&r.Hour, &r.Cluster, &r.Namespace, &r.Model, &r.Kind, &r.Name, &pods, &r.ReportedSeconds, &r.BusySeconds,
			&r.Requests, &r.GenerationTokens, &r.Gaps.Counts, &r.Gaps.Seconds, &idle, &r.Gaps.Woken, &r.Gaps.Wakes, &r.Gaps.Measured, &r.Gaps.Unmeasured); err != nil {
			return nil, fmt.Errorf("scan endpoint row: %w", err)
		}
		r.Hour, r.Pods, r.IdleSince = r.Hour.UTC(), int(pods), ledger.TimeOrZero(idle)
		if len(r.Gaps.Counts) == 0 {
			r.Gaps = ledger.Gaps{}
		}
		if len(r.Gaps.Wakes) == 0 {
			r.Gaps.Woken, r.Gaps.Wakes, r.Gaps.Measured, r.Gaps.Unmeasured = nil, nil, nil, nil
		}
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("read endpoint row: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read endpoint rows: %w", err)
	}
	return out, nil
}

// WorkloadTimes returns each workload's newest times, submitted in
// [from, to).
func (s *Store) WorkloadTimes(ctx context.Context, cluster string, from, to time.Time) (_ []ledger.WorkloadTime, rerr error) {
	defer damaged(&rerr, s.opts.TimesTable, from, to)
	conds, args := []string{"submit_ms >= ?", "submit_ms < ?"}, []any{from.UnixMilli(), to.UnixMilli()}
	if cluster != "" {
		conds, args = append(conds, "cluster = ?"), append(args, cluster)
	}
	rs, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, namespace, name, submit_ms, local_queue, resource, count, admit_ms, finish_ms
		FROM %s FINAL WHERE %s ORDER BY submit_ms, cluster, namespace, name`, s.table(s.opts.TimesTable), strings.Join(conds, " AND ")), args...)
	if err != nil {
		return nil, fmt.Errorf("query workload times: %w", err)
	}
	defer rs.Close()
	var out []ledger.WorkloadTime
	for rs.Next() {
		var w ledger.WorkloadTime
		var submit, admit, finish, count int64
		if err := rs.Scan(&w.Cluster, &w.Namespace, &w.Name, &submit, &w.LocalQueue, &w.Resource, &count, &admit, &finish); err != nil {
			return nil, fmt.Errorf("scan workload time: %w", err)
		}
		w.Count, w.Submit, w.Admit, w.Finish = int(count), ledger.TimeOrZero(submit), ledger.TimeOrZero(admit), ledger.TimeOrZero(finish)
		out = append(out, w)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read workload times: %w", err)
	}
	return out, nil
}

// Checkpoint returns the newest checkpoint of a source.
func (s *Store) Checkpoint(ctx context.Context, name string) (_ time.Time, rerr error) {
	defer damaged(&rerr, s.opts.CheckpointTable, time.Time{}, time.Time{})
	var ms int64
	var n uint64
	row := s.conn.QueryRow(ctx, `SELECT argMax(at_ms, version), count() FROM `+s.table(s.opts.CheckpointTable)+` WHERE name = ?`, name)
	if err := row.Scan(&ms, &n); err != nil {
		return time.Time{}, fmt.Errorf("read checkpoint %q: %w", name, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms).UTC(), nil
}

// RecordAudit records a rewrite of written hours. It is not spooled: a
// backfill that cannot record its rewrite fails.
func (s *Store) RecordAudit(ctx context.Context, e ledger.AuditEntry) error {
	err := s.insertOne(ctx, `INSERT INTO `+s.table(s.opts.AuditTable)+` (at_ms, cluster, from_hour, to_hour, source, rows, note)`,
		e.At.UnixMilli(), e.Cluster, e.From.UTC(), e.To.UTC(), e.Source, uint64(e.Rows), e.Note)
	if err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// Audit returns the entries whose hours overlap [from, to), oldest first.
func (s *Store) Audit(ctx context.Context, from, to time.Time) (_ []ledger.AuditEntry, rerr error) {
	defer damaged(&rerr, s.opts.AuditTable, from, to)
	rs, err := s.conn.Query(ctx, `SELECT at_ms, cluster, from_hour, to_hour, source, rows, note FROM `+s.table(s.opts.AuditTable)+`
		WHERE from_hour < ? AND to_hour > ? ORDER BY at_ms, cluster, from_hour`, to.UTC(), from.UTC())
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rs.Close()
	var out []ledger.AuditEntry
	for rs.Next() {
		var e ledger.AuditEntry
		var at int64
		var rows uint64
		if err := rs.Scan(&at, &e.Cluster, &e.From, &e.To, &e.Source, &rows, &e.Note); err != nil {
			return nil, fmt.Errorf("scan audit entry: %w", err)
		}
		e.At, e.From, e.To, e.Rows = time.UnixMilli(at).UTC(), e.From.UTC(), e.To.UTC(), int(rows)
		out = append(out, e)
	}
	return out, rs.Err()
}

// FlagHours records flags on hours. It is not spooled: the pipeline that
// flags hours at start fails rather than start without them.
func (s *Store) FlagHours(ctx context.Context, flags []ledger.HourFlag) error {
	for i := range flags {
		if err := flags[i].Check(); err != nil {
			return err
		}
	}
	if len(flags) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.FlagTable)+` (cluster, from_hour, to_hour, reason, detail, at_ms)`)
	if err != nil {
		return fmt.Errorf("record hour flags: %w", err)
	}
	for _, f := range flags {
		if err := b.Append(f.Cluster, f.From.UTC(), f.To.UTC(), f.Reason, f.Detail, f.At.UnixMilli()); err != nil {
			b.Abort()
			return fmt.Errorf("record hour flags: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record %d hour flags: %w", len(flags), err)
	}
	return nil
}

// HourFlags returns the flags whose hours overlap [from, to), each once
// with the first time it was recorded.
func (s *Store) HourFlags(ctx context.Context, cluster string, from, to time.Time) (_ []ledger.HourFlag, rerr error) {
	defer damaged(&rerr, s.opts.FlagTable, from, to)
	where, args := "from_hour < ? AND to_hour > ?", []any{to.UTC(), from.UTC()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	rs, err := s.conn.Query(ctx, `SELECT cluster, from_hour, to_hour, reason, detail, min(at_ms) FROM `+s.table(s.opts.FlagTable)+`
		WHERE `+where+` GROUP BY cluster, from_hour, to_hour, reason, detail ORDER BY cluster, from_hour, reason, detail`, args...)
	if err != nil {
		return nil, fmt.Errorf("read hour flags: %w", err)
	}
	defer rs.Close()
	var out []ledger.HourFlag
	for rs.Next() {
		var f ledger.HourFlag
		var at int64
		if err := rs.Scan(&f.Cluster, &f.From, &f.To, &f.Reason, &f.Detail, &at); err != nil {
			return nil, fmt.Errorf("scan hour flag: %w", err)
		}
		f.From, f.To, f.At = f.From.UTC(), f.To.UTC(), time.UnixMilli(at).UTC()
		out = append(out, f)
	}
	return out, rs.Err()
}

// Codes of ClickHouse's exceptions for data it found damaged: a block
// failing its checksum, one that does not decompress, or a part shorter
// than its marks say.
var damageCodes = map[int32]bool{
	32:  true, // ATTEMPT_TO_READ_AFTER_EOF
	33:  true, // CANNOT_READ_ALL_DATA
	40:  true, // CHECKSUM_DOESNT_MATCH
	246: true, // CORRUPTED_DATA
	271: true, // CANNOT_DECOMPRESS
}

// damaged makes *err a ledger.DamageError when it is ClickHouse finding
// the data it read damaged: never a number from it, and the error says so.
func damaged(err *error, table string, from, to time.Time) {
	var ex *ch.Exception
	if *err != nil && errors.As(*err, &ex) && damageCodes[ex.Code] {
		*err = &ledger.DamageError{Store: "clickhouse", Table: table, From: from, To: to, Err: *err}
	}
}

// Verify reads every column of every table (ClickHouse checks each block
// it decompresses against its checksum), runs CHECK TABLE where the server
// supports it on the engine, and compares the rollups with the hours. It
// returns what it found damaged; an error when it could not check.
// ClickHouse moves a part it finds broken at start (a file of the wrong
// size) aside, and reads on without it: the comparison of the rollups
// with the hours shows that as the buckets whose sums differ.
func (s *Store) Verify(ctx context.Context, progress func(step string)) ([]ledger.Problem, error) {
	var problems []ledger.Problem
	for _, t := range []string{s.opts.LedgerTable, s.opts.DayTable, s.opts.MonthTable, s.opts.WorkloadTable, s.opts.QueueTable,
		s.opts.EndpointTable, s.opts.TimesTable, s.opts.CheckpointTable, s.opts.AuditTable, s.opts.FlagTable, s.opts.RestateTable, s.opts.CloseTable, s.opts.LineTable, s.opts.LineHourTable} {
		progress("every column of " + t)
		// ignore(*) reads every column and is 0: the count of all rows,
		// having read them all.
		var n uint64
		err := s.conn.QueryRow(ctx, `SELECT count() FROM `+s.table(t)+` WHERE NOT ignore(*)`).Scan(&n)
		var ex *ch.Exception
		switch {
		case err != nil && errors.As(err, &ex) && damageCodes[ex.Code]:
			problems = append(problems, ledger.Problem{Table: t, Detail: err.Error()})
			continue
		case err != nil:
			return problems, fmt.Errorf("read %s: %w", t, err)
		}
		rs, err := s.conn.Query(ctx, `CHECK TABLE `+s.table(t))
		if err != nil {
			continue // not supported on MergeTree by older servers (18.16)
		}
		for rs.Next() {
			var ok uint8
			if rs.Scan(&ok) == nil && ok == 0 {
				problems = append(problems, ledger.Problem{Table: t, Detail: "CHECK TABLE finds it damaged"})
			}
		}
		rs.Close()
	}
	var first, last time.Time
	var n uint64
	err := s.conn.QueryRow(ctx, `SELECT min(hour), max(hour), count() FROM `+s.table(s.opts.LedgerTable)).Scan(&first, &last, &n)
	var ex *ch.Exception
	switch {
	case err != nil && errors.As(err, &ex) && damageCodes[ex.Code]:
		return problems, nil // the hours' column is damaged: listed above
	case err != nil:
		return problems, fmt.Errorf("read the ledger's range: %w", err)
	}
	if n > 0 {
		progress(fmt.Sprintf("the rollups against the hours, %s to %s", first.UTC().Format("2006-01"), last.UTC().Format("2006-01")))
		more, err := ledger.CompareRollups(ctx, s, first.UTC(), last.UTC().Add(time.Hour), 20)
		if err != nil {
			return problems, err
		}
		problems = append(problems, more...)
	}
	return problems, nil
}
