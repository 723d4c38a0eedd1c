package embedded

// Reads: the ledger's rows by range and filter, the workloads that
// paid most for idle GPUs, the queue and endpoint hours, workload times.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

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
