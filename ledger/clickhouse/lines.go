package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuledger/gpuledger/ledger"
)

var _ ledger.LineStore = (*Store)(nil)

// WriteLineHours writes lines with a new version, replacing their hours
// (through the spool when the server is unreachable, like WriteHours).
func (s *Store) WriteLineHours(ctx context.Context, lines []ledger.Line) error {
	for i := range lines {
		if err := checkHour(lines[i].Hour); err != nil {
			return fmt.Errorf("line %d: %w", i, err)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return s.write(ctx, &record{Version: s.nextVersion(), Lines: lines})
}

// insertLines inserts a record's lines, in batches.
func (s *Store) insertLines(ctx context.Context, rec *record) error {
	for start := 0; start < len(rec.Lines); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.LineTable)+` (hour, cluster, team, namespace, local_queue, cluster_queue,
			flavor, kind, node, gpu, mig, pod, workload_kind, workload, rate, rate_source, version, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds,
			cost, idle_cost, unmeasured_cost, unallocated_cost, energy_cost)`)
		if err != nil {
			return fmt.Errorf("prepare line insert: %w", err)
		}
		for _, l := range rec.Lines[start:min(start+s.opts.BatchRows, len(rec.Lines))] {
			if err := b.Append(l.Hour.UTC(), l.Cluster, l.Team, l.Namespace, l.LocalQueue, l.ClusterQueue, l.Flavor, string(l.Kind), l.Node, l.GPU,
				l.MIG, l.Pod, l.WorkloadKind, l.Workload, micros(l.RateMicrosPerHour), l.RateSource, rec.Version, l.GPUSeconds, l.ActiveGPUSeconds,
				l.UnmeasuredGPUSeconds, micros(l.CostMicros), micros(l.IdleCostMicros), micros(l.UnmeasuredCostMicros),
				micros(l.UnallocatedCostMicros), micros(l.EnergyCostMicros)); err != nil {
				b.Abort()
				return fmt.Errorf("append line: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d lines: %w", b.Rows(), err)
		}
	}
	// Then name the version of each hour: until this lands, reads keep
	// the hour's previous lines, never part of the new ones.
	hours := map[clusterHour]bool{}
	for _, l := range rec.Lines {
		hours[clusterHour{l.Cluster, l.Hour.UTC()}] = true
	}
	b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.LineHourTable)+` (hour, cluster, version)`)
	if err != nil {
		return fmt.Errorf("prepare line hours insert: %w", err)
	}
	for k := range hours {
		if err := b.Append(k.hour, k.cluster, rec.Version); err != nil {
			b.Abort()
			return fmt.Errorf("append line hour: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d line hours: %w", b.Rows(), err)
	}
	return nil
}

// lineIdentity are line_rows' columns but the hour, the version, the
// rate and the figures.
const lineIdentity = `cluster, team, namespace, local_queue, cluster_queue, flavor, kind, node, gpu, mig, pod, workload_kind, workload, rate_source`

// Lines sums the newest lines of q per identity over its range.
func (s *Store) Lines(ctx context.Context, q ledger.LineQuery) (_ []ledger.Line, rerr error) {
	defer damaged(&rerr, s.opts.LineTable, q.From, q.To)
	if !q.From.Before(q.To) {
		return nil, fmt.Errorf("lines: from %s is not before to %s", q.From, q.To)
	}
	table := s.table(s.opts.LineTable)
	conds := []string{"hour >= ?", "hour < ?"}
	args := []any{q.From.UTC(), q.To.UTC()}
	if q.Cluster != "" {
		conds = append(conds, "cluster = ?")
		args = append(args, q.Cluster)
	}
	// Each hour's newest named version (line_hours), not the lines'
	// own: a month of line_hours is a few hundred rows.
	newest := fmt.Sprintf("(cluster, hour, version) GLOBAL IN (SELECT cluster, hour, max(version) FROM %s WHERE %s GROUP BY cluster, hour)",
		s.table(s.opts.LineHourTable), strings.Join(conds, " AND "))
	args = append(args, args...)
	if q.Team != "" {
		conds = append(conds, "team = ?")
		args = append(args, q.Team)
	}
	if q.Namespace != "" || q.Workload != "" {
		conds = append(conds, "namespace = ?", "workload = ?")
		args = append(args, q.Namespace, q.Workload)
	}
	w := newest + " AND " + strings.Join(conds, " AND ")
	rs, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT %s, toString(rate), sum(gpu_seconds), sum(active_gpu_seconds), sum(unmeasured_gpu_seconds),
		toString(sum(cost)), toString(sum(idle_cost)), toString(sum(unmeasured_cost)), toString(sum(unallocated_cost)), toString(sum(energy_cost))
		FROM %s WHERE %s GROUP BY %s, rate`, lineIdentity, table, w, lineIdentity), args...)
	if err != nil {
		return nil, fmt.Errorf("query lines: %w", err)
	}
	defer rs.Close()
	var out []ledger.Line
	for rs.Next() {
		l := ledger.Line{Key: ledger.Key{Hour: q.From.UTC()}}
		var kind string
		var rate, cost, idle, unmeasured, unallocated, energy string
		if err := rs.Scan(&l.Cluster, &l.Team, &l.Namespace, &l.LocalQueue, &l.ClusterQueue, &l.Flavor, &kind, &l.Node, &l.GPU, &l.MIG, &l.Pod,
			&l.WorkloadKind, &l.Workload, &l.RateSource, &rate, &l.GPUSeconds, &l.ActiveGPUSeconds, &l.UnmeasuredGPUSeconds, &cost, &idle, &unmeasured,
			&unallocated, &energy); err != nil {
			return nil, fmt.Errorf("scan line: %w", err)
		}
		l.Kind = ledger.LineKind(kind)
		for _, m := range []struct {
			s   string
			dst *int64
		}{{rate, &l.RateMicrosPerHour}, {cost, &l.CostMicros}, {idle, &l.IdleCostMicros}, {unmeasured, &l.UnmeasuredCostMicros},
			{unallocated, &l.UnallocatedCostMicros}, {energy, &l.EnergyCostMicros}} {
			if *m.dst, err = ledger.ParseMicros(m.s); err != nil {
				return nil, fmt.Errorf("read amount: %w", err)
			}
		}
		out = append(out, l)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read lines: %w", err)
	}
	ledger.SortLines(out)
	return out, nil
}
