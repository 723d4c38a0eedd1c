package embedded

// Restatements, adjustments and month closes (ledger.Rewrite).

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// RecordRestatements records rewrites of team-hours, all or none.
func (s *Store) RecordRestatements(ctx context.Context, rs []ledger.Restatement) (err error) {
	for i := range rs {
		if err := rs[i].Check(); err != nil {
			return err
		}
	}
	if len(rs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin restatements write: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	st, err := tx.PrepareContext(ctx, `INSERT INTO restatements (at, cluster, hour, team, before_micros, after_micros, before_gpu_seconds,
		after_gpu_seconds, source, by, reason, billed_in, row_check) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("record restatements: %w", err)
	}
	defer st.Close()
	for i := range rs {
		r := &rs[i]
		billed := int64(0)
		if r.Adjustment() {
			billed = r.BilledIn.Unix()
		}
		if _, err := st.ExecContext(ctx, checked(r.At.UnixMilli(), r.Cluster, r.Hour.Unix(), r.Team, r.BeforeMicros, r.AfterMicros,
			r.BeforeGPUSeconds, r.AfterGPUSeconds, r.Source, r.By, r.Reason, billed)...); err != nil {
			return fmt.Errorf("record the restatement of %s %s team %s: %w", r.Cluster, r.Hour.Format(time.RFC3339), r.Team, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %d restatements: %w", len(rs), err)
	}
	return nil
}

// Restatements returns those whose hours are in [from, to).
func (s *Store) Restatements(ctx context.Context, cluster string, from, to time.Time) ([]ledger.Restatement, error) {
	where, args := "hour >= ? AND hour < ?", []any{from.Unix(), to.Unix()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	return s.readRestatements(ctx, where, args, from, to)
}

// Adjustments returns the adjustments billed in the month at month.
func (s *Store) Adjustments(ctx context.Context, cluster string, month time.Time) ([]ledger.Restatement, error) {
	month = ledger.StepMonth.Truncate(month.UTC())
	where, args := "billed_in = ?", []any{month.Unix()}
	if cluster != "" {
		where, args = where+" AND cluster = ?", append(args, cluster)
	}
	return s.readRestatements(ctx, where, args, month, month.AddDate(0, 1, 0))
}

func (s *Store) readRestatements(ctx context.Context, where string, args []any, from, to time.Time) ([]ledger.Restatement, error) {
	if err := s.checkRange(ctx, "restatements", where, args, from, to); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT at, cluster, hour, team, before_micros, after_micros, before_gpu_seconds, after_gpu_seconds,
		source, by, reason, billed_in FROM restatements WHERE `+where+` ORDER BY cluster, hour, team, at`, args...)
	if err != nil {
		return nil, s.readErr("read restatements", "restatements", from, to, err)
	}
	defer rows.Close()
	var out []ledger.Restatement
	for rows.Next() {
		var r ledger.Restatement
		var at, hour, billed int64
		if err := rows.Scan(&at, &r.Cluster, &hour, &r.Team, &r.BeforeMicros, &r.AfterMicros, &r.BeforeGPUSeconds, &r.AfterGPUSeconds,
			&r.Source, &r.By, &r.Reason, &billed); err != nil {
			return nil, s.readErr("scan a restatement", "restatements", from, to, err)
		}
		r.At, r.Hour = time.UnixMilli(at).UTC(), time.Unix(hour, 0).UTC()
		if billed != 0 {
			r.BilledIn = time.Unix(billed, 0).UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CloseMonth records a month's close.
func (s *Store) CloseMonth(ctx context.Context, c ledger.MonthClose) error {
	if err := c.Check(); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO month_closes (month, at, by, note, row_check) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (month) DO NOTHING`, checked(c.Month.Unix(), c.At.UnixMilli(), c.By, c.Note)...)
	if err != nil {
		return fmt.Errorf("close %s: %w", c.Month.Format("2006-01"), err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("close %s: %w", c.Month.Format("2006-01"), ledger.ErrMonthClosed)
	}
	return nil
}

// ClosedMonths returns the closes, by month.
func (s *Store) ClosedMonths(ctx context.Context) ([]ledger.MonthClose, error) {
	var bad int64
	if err := s.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(`+badExpr("month_closes")+`), 0) FROM month_closes`).Scan(&bad); err != nil {
		return nil, s.readErr("check month_closes", "month_closes", time.Time{}, time.Time{}, err)
	}
	if err := damaged("month_closes", bad, time.Time{}, time.Time{}); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT month, at, by, note FROM month_closes ORDER BY month`)
	if err != nil {
		return nil, s.readErr("read month_closes", "month_closes", time.Time{}, time.Time{}, err)
	}
	defer rows.Close()
	var out []ledger.MonthClose
	for rows.Next() {
		var c ledger.MonthClose
		var month, at int64
		if err := rows.Scan(&month, &at, &c.By, &c.Note); err != nil {
			return nil, s.readErr("scan a month close", "month_closes", time.Time{}, time.Time{}, err)
		}
		c.Month, c.At = time.Unix(month, 0).UTC(), time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}
