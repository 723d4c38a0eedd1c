package clickhouse

// Restatements, adjustments and month closes (ledger.Rewrite).

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// RecordRestatements records rewrites of team-hours in one INSERT. It is
// not spooled: a rewrite that cannot record what it changes fails before
// it writes.
func (s *Store) RecordRestatements(ctx context.Context, rs []ledger.Restatement) error {
	for i := range rs {
		if err := rs[i].Check(); err != nil {
			return err
		}
	}
	if len(rs) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.RestateTable)+` (at_ms, cluster, hour, team, before_cost, after_cost,
		before_gpu_seconds, after_gpu_seconds, source, by, reason, billed_in)`)
	if err != nil {
		return fmt.Errorf("record restatements: %w", err)
	}
	for i := range rs {
		r := &rs[i]
		billed := time.Unix(0, 0).UTC()
		if r.Adjustment() {
			billed = r.BilledIn.UTC()
		}
		if err := b.Append(r.At.UnixMilli(), r.Cluster, r.Hour.UTC(), r.Team, micros(r.BeforeMicros), micros(r.AfterMicros),
			r.BeforeGPUSeconds, r.AfterGPUSeconds, r.Source, r.By, r.Reason, billed); err != nil {
			b.Abort()
			return fmt.Errorf("record the restatement of %s %s team %s: %w", r.Cluster, r.Hour.Format(time.RFC3339), r.Team, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record %d restatements: %w", len(rs), err)
	}
	return nil
}

// Restatements returns those whose hours are in [from, to).
func (s *Store) Restatements(ctx context.Context, cluster string, from, to time.Time) ([]ledger.Restatement, error) {
	where, args := "hour >= ? AND hour < ?", []any{from.UTC(), to.UTC()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	return s.readRestatements(ctx, where, args, from, to)
}

// Adjustments returns the adjustments billed in the month at month.
func (s *Store) Adjustments(ctx context.Context, cluster string, month time.Time) ([]ledger.Restatement, error) {
	month = ledger.StepMonth.Truncate(month.UTC())
	where, args := "billed_in = ?", []any{month}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	return s.readRestatements(ctx, where, args, month, month.AddDate(0, 1, 0))
}

func (s *Store) readRestatements(ctx context.Context, where string, args []any, from, to time.Time) (_ []ledger.Restatement, rerr error) {
	defer damaged(&rerr, s.opts.RestateTable, from, to)
	rows, err := s.conn.Query(ctx, `SELECT at_ms, cluster, hour, team, toString(before_cost), toString(after_cost), before_gpu_seconds,
		after_gpu_seconds, source, by, reason, billed_in FROM `+s.table(s.opts.RestateTable)+` WHERE `+where+` ORDER BY cluster, hour, team, at_ms`, args...)
	if err != nil {
		return nil, fmt.Errorf("read restatements: %w", err)
	}
	defer rows.Close()
	var out []ledger.Restatement
	for rows.Next() {
		var r ledger.Restatement
		var at int64
		var before, after string
		if err := rows.Scan(&at, &r.Cluster, &r.Hour, &r.Team, &before, &after, &r.BeforeGPUSeconds, &r.AfterGPUSeconds,
			&r.Source, &r.By, &r.Reason, &r.BilledIn); err != nil {
			return nil, fmt.Errorf("scan a restatement: %w", err)
		}
		if r.BeforeMicros, err = ledger.ParseMicros(before); err != nil {
			return nil, fmt.Errorf("restatement of %s %s: before_cost: %w", r.Cluster, r.Hour.Format(time.RFC3339), err)
		}
		if r.AfterMicros, err = ledger.ParseMicros(after); err != nil {
			return nil, fmt.Errorf("restatement of %s %s: after_cost: %w", r.Cluster, r.Hour.Format(time.RFC3339), err)
		}
		r.At, r.Hour = time.UnixMilli(at).UTC(), r.Hour.UTC()
		if r.BilledIn.Unix() == 0 {
			r.BilledIn = time.Time{}
		} else {
			r.BilledIn = r.BilledIn.UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CloseMonth records a month's close. ClickHouse has no unique key: a
// month found closed is refused here, and two closes racing are both
// kept and read as the first (ClosedMonths).
func (s *Store) CloseMonth(ctx context.Context, c ledger.MonthClose) error {
	if err := c.Check(); err != nil {
		return err
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, `SELECT count() FROM `+s.table(s.opts.CloseTable)+` WHERE month = ?`, c.Month.UTC()).Scan(&n); err != nil {
		return fmt.Errorf("close %s: read the closes: %w", c.Month.Format("2006-01"), err)
	}
	if n > 0 {
		return fmt.Errorf("close %s: %w", c.Month.Format("2006-01"), ledger.ErrMonthClosed)
	}
	if err := s.insertOne(ctx, `INSERT INTO `+s.table(s.opts.CloseTable)+` (month, at_ms, by, note)`,
		c.Month.UTC(), c.At.UnixMilli(), c.By, c.Note); err != nil {
		return fmt.Errorf("close %s: %w", c.Month.Format("2006-01"), err)
	}
	return nil
}

// ClosedMonths returns the closes, by month, each month's first.
func (s *Store) ClosedMonths(ctx context.Context) (_ []ledger.MonthClose, rerr error) {
	defer damaged(&rerr, s.opts.CloseTable, time.Time{}, time.Time{})
	rows, err := s.conn.Query(ctx, `SELECT month, min(at_ms), argMin(by, at_ms), argMin(note, at_ms) FROM `+s.table(s.opts.CloseTable)+`
		GROUP BY month ORDER BY month`)
	if err != nil {
		return nil, fmt.Errorf("read the closed months: %w", err)
	}
	defer rows.Close()
	var out []ledger.MonthClose
	for rows.Next() {
		var c ledger.MonthClose
		var at int64
		if err := rows.Scan(&c.Month, &at, &c.By, &c.Note); err != nil {
			return nil, fmt.Errorf("scan a month close: %w", err)
		}
		c.Month, c.At = c.Month.UTC(), time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// RestatementCount is how many restatements and adjustments the ledger
// holds: it grows with every rewrite that changed a figure, whichever
// process wrote it (a backfill beside serve), so the API's answer cache
// keys on it to drop answers over rewritten hours.
func (s *Store) RestatementCount(ctx context.Context) (uint64, error) {
	var n uint64
	if err := s.conn.QueryRow(ctx, `SELECT count() FROM `+s.table(s.opts.RestateTable)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count restatements: %w", err)
	}
	return n, nil
}

// DataVersion is RestatementCount read at most once a second (the API's
// answer cache asks on every request); a failed read keeps the last.
func (s *Store) DataVersion(ctx context.Context) (uint64, error) {
	if now := time.Now().UnixNano(); now-s.versionAt.Load() >= int64(time.Second) {
		s.versionAt.Store(now)
		n, err := s.RestatementCount(ctx)
		if err != nil {
			return s.version.Load(), err
		}
		s.version.Store(n)
	}
	return s.version.Load(), nil
}

// Gauges are what the store counts, for /metrics: the spool, and the
// hours compared with another writer's (-clickhouse.comparePeers).
func (s *Store) Gauges() map[string]func() float64 {
	spool := func(f func(SpoolStats) float64) func() float64 {
		return func() float64 { return f(s.SpoolStats()) }
	}
	peer := func(f func(PeerStats) uint64) func() float64 {
		return func() float64 { return float64(f(s.PeerStats())) }
	}
	return map[string]func() float64{
		"gpuledger_clickhouse_spool_pending_bytes":               spool(func(s SpoolStats) float64 { return float64(s.PendingBytes) }),
		"gpuledger_clickhouse_spool_pending_records":             spool(func(s SpoolStats) float64 { return float64(s.PendingRecords) }),
		"gpuledger_clickhouse_spool_spooled_total":               spool(func(s SpoolStats) float64 { return float64(s.Spooled) }),
		"gpuledger_clickhouse_spool_replayed_total":              spool(func(s SpoolStats) float64 { return float64(s.Replayed) }),
		"gpuledger_clickhouse_spool_corrupt_total":               spool(func(s SpoolStats) float64 { return float64(s.Corrupt) }),
		`gpuledger_clickhouse_peer_hours_total{result="same"}`:   peer(func(p PeerStats) uint64 { return p.Same }),
		`gpuledger_clickhouse_peer_hours_total{result="differ"}`: peer(func(p PeerStats) uint64 { return p.Differ }),
		`gpuledger_clickhouse_peer_hours_total{result="error"}`:  peer(func(p PeerStats) uint64 { return p.Errors }),
	}
}
