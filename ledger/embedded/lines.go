package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

var _ ledger.LineStore = (*Store)(nil)

// WriteLineHours replaces, in one transaction, the lines of every
// (cluster, hour) present in lines.
func (s *Store) WriteLineHours(ctx context.Context, lines []ledger.Line) error {
	hours := make([]clusterHour, len(lines))
	for i := range lines {
		hours[i] = clusterHour{lines[i].Cluster, lines[i].Hour.Unix()}
	}
	return s.replaceHours(ctx, "line_rows", hours, `INSERT INTO line_rows
		(hour, cluster, team, namespace, local_queue, cluster_queue, flavor, kind, node, gpu, mig, pod, workload_kind, workload, rate_micros,
		rate_source, gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost_micros, idle_cost_micros, unmeasured_cost_micros, unallocated_cost_micros,
		energy_cost_micros) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, func(i int) ([]any, error) {
		l := &lines[i]
		return []any{l.Hour.Unix(), l.Cluster, l.Team, l.Namespace, l.LocalQueue, l.ClusterQueue, l.Flavor, string(l.Kind), l.Node, l.GPU, l.MIG,
			l.Pod, l.WorkloadKind, l.Workload, l.RateMicrosPerHour, l.RateSource, l.GPUSeconds, l.ActiveGPUSeconds, l.UnmeasuredGPUSeconds, l.CostMicros,
			l.IdleCostMicros, l.UnmeasuredCostMicros, l.UnallocatedCostMicros, l.EnergyCostMicros}, nil
	})
}

// lineIdentity are line_rows' columns but the hour and the figures.
const lineIdentity = `cluster, team, namespace, local_queue, cluster_queue, flavor, kind, node, gpu, mig, pod, workload_kind, workload, rate_micros,
	rate_source`

// Lines sums the lines of q per identity over its range. Every line of
// the range's teams is checked first (their checks and row counts), so
// that a damaged line is an error, never a changed explanation.
func (s *Store) Lines(ctx context.Context, q ledger.LineQuery) ([]ledger.Line, error) {
	if !q.From.Before(q.To) {
		return nil, fmt.Errorf("lines: from %s is not before to %s", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	where, args := filters(ledger.Query{From: q.From, To: q.To, Cluster: q.Cluster, Team: q.Team})
	if err := s.checkRange(ctx, "line_rows", where, args, q.From, q.To); err != nil {
		return nil, err
	}
	if q.Namespace != "" || q.Workload != "" {
		where += " AND namespace = ? AND workload = ?"
		args = append(args, q.Namespace, q.Workload)
	}
	rs, err := s.read.QueryContext(ctx, `SELECT `+lineIdentity+`, SUM(gpu_seconds), SUM(active_gpu_seconds), SUM(unmeasured_gpu_seconds),
		SUM(cost_micros), SUM(idle_cost_micros), SUM(unmeasured_cost_micros), SUM(unallocated_cost_micros), SUM(energy_cost_micros)
		FROM line_rows WHERE `+where+` GROUP BY `+lineIdentity, args...)
	if err != nil {
		return nil, fmt.Errorf("query lines: %w", err)
	}
	defer rs.Close()
	var out []ledger.Line
	for rs.Next() {
		l := ledger.Line{Key: ledger.Key{Hour: q.From}}
		var kind string
		if err := rs.Scan(&l.Cluster, &l.Team, &l.Namespace, &l.LocalQueue, &l.ClusterQueue, &l.Flavor, &kind, &l.Node, &l.GPU, &l.MIG, &l.Pod,
			&l.WorkloadKind, &l.Workload, &l.RateMicrosPerHour, &l.RateSource, &l.GPUSeconds, &l.ActiveGPUSeconds, &l.UnmeasuredGPUSeconds, &l.CostMicros,
			&l.IdleCostMicros, &l.UnmeasuredCostMicros, &l.UnallocatedCostMicros, &l.EnergyCostMicros); err != nil {
			return nil, s.readErr("scan line", "line_rows", q.From, q.To, err)
		}
		l.Kind = ledger.LineKind(kind)
		out = append(out, l)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read lines: %w", err)
	}
	ledger.SortLines(out)
	return out, nil
}
