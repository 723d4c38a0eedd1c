package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Restatement is one team's figures of one cluster-hour as they stood
// before a rewrite of the hour and after it. An hour of an open month is
// rewritten in place and its restatements say what changed. An hour of a
// closed month keeps the figures that were invoiced: the rewrite's rows
// are not written, and its restatements are adjustments, billed in the
// first month open when they were recorded (BilledIn).
type Restatement struct {
	// At is when the rewrite happened.
	At time.Time
	// Cluster, Hour and Team are the figures' row group: Team is a team,
	// TeamUnowned or TeamUnallocated.
	Cluster string
	Hour    time.Time
	Team    string
	// Before and After are the cost and GPU time held. For an adjustment,
	// Before includes the earlier adjustments of the same hour and team.
	BeforeMicros, AfterMicros         int64
	BeforeGPUSeconds, AfterGPUSeconds float64
	// Source is what rewrote the hour (backfill:file:///x.jsonl, live:c1),
	// By who ran it and Reason why, as they said.
	Source, By, Reason string
	// BilledIn is the start of the month the adjustment is billed in; zero
	// for a restatement of an open month.
	BilledIn time.Time
}

// Adjustment says whether r is an adjustment of a closed month.
func (r *Restatement) Adjustment() bool { return !r.BilledIn.IsZero() }

// DeltaMicros is the change of the cost: After less Before.
func (r *Restatement) DeltaMicros() int64 { return r.AfterMicros - r.BeforeMicros }

// Check says what is wrong with a restatement.
func (r *Restatement) Check() error {
	switch {
	case r.Cluster == "" || r.Team == "":
		return fmt.Errorf("restatement of %s: no cluster or team (cluster %q, team %q)", r.Hour.Format(time.RFC3339), r.Cluster, r.Team)
	case !r.Hour.Equal(r.Hour.Truncate(time.Hour)):
		return fmt.Errorf("restatement of %s %s: hour %s is not a whole hour", r.Cluster, r.Team, r.Hour.Format(time.RFC3339))
	case !r.BilledIn.IsZero() && !r.BilledIn.Equal(StepMonth.Truncate(r.BilledIn)):
		return fmt.Errorf("restatement of %s %s: billed in %s, not the start of a month", r.Cluster, r.Team, r.BilledIn.Format(time.RFC3339))
	case r.Source == "":
		return fmt.Errorf("restatement of %s %s at %s: no source", r.Cluster, r.Team, r.Hour.Format(time.RFC3339))
	}
	return nil
}

// MonthClose records that a month's invoice figures are final: no write
// changes its rows again.
type MonthClose struct {
	// Month is the start of the UTC month closed.
	Month time.Time
	// At is when it was closed, By who closed it, Note why or what for.
	At       time.Time
	By, Note string
}

// ErrMonthClosed is returned when a month is closed a second time.
var ErrMonthClosed = errors.New("month already closed")

// Check says what is wrong with a close: its month must be the start of a
// month, and it needs who closed it.
func (c *MonthClose) Check() error {
	if !c.Month.Equal(StepMonth.Truncate(c.Month)) {
		return fmt.Errorf("month close: %s is not the start of a UTC month", c.Month.Format(time.RFC3339))
	}
	if c.By == "" {
		return fmt.Errorf("month close of %s: no one named as closing it; say who (-by)", c.Month.Format("2006-01"))
	}
	return nil
}

// Provenance says who writes hours, with what and why, for the
// restatements a rewrite records.
type Provenance struct {
	Source, By, Reason string
	// Now is the clock of the records; time.Now when nil.
	Now func() time.Time
}

// RewriteResult is what Rewrite did.
type RewriteResult struct {
	// Hours is how many cluster-hours the rows covered; Written those
	// written (the others were in closed months).
	Hours, Written int
	// Restated counts the team-hours of open months whose figures changed,
	// Adjusted those of closed months recorded as adjustments.
	Restated, Adjusted int
}

// Rewrite writes rows and workloads (Store.WriteHours) keeping the
// ledger's promises about hours already written:
//   - an hour of an open month that held rows is replaced, and every team
//     whose cost or GPU time in it changed gets a Restatement with its
//     figures before and after;
//   - an hour of a closed month is not written: each team whose figures
//     differ from what was invoiced (with the adjustments already
//     recorded) gets an adjustment, billed in the first open month after
//     the hour's, so writing the same hours again records nothing twice.
//
// A rewrite that changes nothing records nothing. It is the one way
// every writer of hours (the live path, backfills, replays) writes them.
func Rewrite(ctx context.Context, s Store, rows []Row, workloads []WorkloadRow, p Provenance) (RewriteResult, error) {
	return RewriteLines(ctx, s, rows, workloads, nil, p)
}

// RewriteLines is Rewrite with the lines of the same hours (ledger.Line),
// written with them where s is a LineStore: lines of closed months are
// not written, as their rows are not, and the lines go before the rows,
// so that a writer's checkpoint never passes hours whose lines are
// missing. A crash between the two leaves lines newer than their rows
// until the hours are written again; Explain says when lines and rows
// disagree.
func RewriteLines(ctx context.Context, s Store, rows []Row, workloads []WorkloadRow, lines []Line, p Provenance) (RewriteResult, error) {
	var res RewriteResult
	if len(rows) == 0 && len(workloads) == 0 {
		return res, nil
	}
	type ch struct {
		cluster string
		hour    time.Time
	}
	// The hours written, as Store.WriteHours replaces them.
	hours := map[ch]bool{}
	for i := range rows {
		hours[ch{rows[i].Cluster, rows[i].Hour.UTC()}] = true
	}
	for i := range workloads {
		hours[ch{workloads[i].Cluster, workloads[i].Hour.UTC()}] = true
	}
	res.Hours = len(hours)
	closes, err := s.ClosedMonths(ctx)
	if err != nil {
		return res, fmt.Errorf("read the closed months: %w", err)
	}
	closed := make(map[time.Time]bool, len(closes))
	for _, c := range closes {
		closed[c.Month.UTC()] = true
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	at := now().UTC()
	// What is there now, per cluster over the span of its hours.
	before := map[teamHour]figures{}
	clusters := map[string]HourSpan{}
	for h := range hours {
		clusters[h.cluster] = clusters[h.cluster].Widen(h.hour)
	}
	present := map[ch]bool{}
	for _, c := range slices.Sorted(maps.Keys(clusters)) {
		span := clusters[c]
		got, err := s.Query(ctx, Query{From: span.From, To: span.To, Step: StepHour, GroupBy: []Dimension{DimTeam}, Cluster: c})
		if err != nil {
			return res, fmt.Errorf("read %s's hours %s to %s before rewriting them: %w", c, span.From.Format(time.RFC3339), span.To.Format(time.RFC3339), err)
		}
		for _, r := range got {
			k := teamHour{c, r.Hour.UTC(), r.Team}
			if !hours[ch{c, k.hour}] {
				continue
			}
			present[ch{c, k.hour}] = true
			before[k] = before[k].add(r.CostMicros, r.GPUSeconds)
		}
		if len(closed) > 0 {
			adj, err := s.Restatements(ctx, c, span.From, span.To)
			if err != nil {
				return res, fmt.Errorf("read %s's adjustments %s to %s: %w", c, span.From.Format(time.RFC3339), span.To.Format(time.RFC3339), err)
			}
			for _, a := range adj {
				if a.Adjustment() {
					k := teamHour{c, a.Hour.UTC(), a.Team}
					before[k] = before[k].add(a.DeltaMicros(), a.AfterGPUSeconds-a.BeforeGPUSeconds)
				}
			}
		}
	}
	after := map[teamHour]figures{}
	for i := range rows {
		r := &rows[i]
		k := teamHour{r.Cluster, r.Hour.UTC(), r.Team}
		after[k] = after[k].add(r.CostMicros, r.GPUSeconds)
	}
	var keepRows []Row
	var keepWls []WorkloadRow
	for i := range rows {
		if !closed[StepMonth.Truncate(rows[i].Hour.UTC())] {
			keepRows = append(keepRows, rows[i])
		}
	}
	for i := range workloads {
		if !closed[StepMonth.Truncate(workloads[i].Hour.UTC())] {
			keepWls = append(keepWls, workloads[i])
		}
	}
	var recs []Restatement
	teams := map[teamHour]bool{}
	for k := range before {
		teams[k] = true
	}
	for k := range after {
		teams[k] = true
	}
	for _, k := range slices.SortedFunc(maps.Keys(teams), teamHour.compare) {
		h := ch{k.cluster, k.hour}
		isClosed := closed[StepMonth.Truncate(k.hour)]
		if !present[h] && !isClosed {
			continue // a first write
		}
		b, a := before[k], after[k]
		if b.same(a) {
			continue
		}
		r := Restatement{At: at, Cluster: k.cluster, Hour: k.hour, Team: k.team, BeforeMicros: b.micros, AfterMicros: a.micros,
			BeforeGPUSeconds: b.gpuSeconds, AfterGPUSeconds: a.gpuSeconds, Source: p.Source, By: p.By, Reason: p.Reason}
		if isClosed {
			r.BilledIn = firstOpen(StepMonth.Truncate(k.hour), closed)
			res.Adjusted++
		} else {
			res.Restated++
		}
		recs = append(recs, r)
	}
	// The record goes first: a crash between the two leaves a record of a
	// rewrite that did not happen, which the next run's identical rewrite
	// finds already true, never a rewrite without its record.
	if len(recs) > 0 {
		if err := s.RecordRestatements(ctx, recs); err != nil {
			return res, fmt.Errorf("record the restatements of %d team-hour(s): %w", len(recs), err)
		}
	}
	if ls, ok := s.(LineStore); ok && len(lines) > 0 {
		var keepLines []Line
		for i := range lines {
			if !closed[StepMonth.Truncate(lines[i].Hour.UTC())] {
				keepLines = append(keepLines, lines[i])
			}
		}
		if err := ls.WriteLineHours(ctx, keepLines); err != nil {
			return res, fmt.Errorf("write the lines of %d hour(s): %w", len(hours), err)
		}
	}
	if len(keepRows) > 0 || len(keepWls) > 0 {
		if err := s.WriteHours(ctx, keepRows, keepWls); err != nil {
			return res, err
		}
	}
	for h := range hours {
		if !closed[StepMonth.Truncate(h.hour)] {
			res.Written++
		}
	}
	return res, nil
}

// teamHour is one team's row group of a cluster-hour.
type teamHour struct {
	cluster string
	hour    time.Time
	team    string
}

func (a teamHour) compare(b teamHour) int {
	return cmp.Or(cmp.Compare(a.cluster, b.cluster), a.hour.Compare(b.hour), cmp.Compare(a.team, b.team))
}

// figures are a team-hour's cost and GPU time.
type figures struct {
	micros     int64
	gpuSeconds float64
}

func (f figures) add(micros int64, gpuSeconds float64) figures {
	return figures{f.micros + micros, f.gpuSeconds + gpuSeconds}
}

// same says whether two figures are equal: the cost to the micro, the GPU
// time to a millisecond (sums of floats in another order differ in their
// last bits).
func (f figures) same(o figures) bool {
	d := f.gpuSeconds - o.gpuSeconds
	return f.micros == o.micros && d < 1e-3 && d > -1e-3
}

// firstOpen is the first month after month that is not closed.
func firstOpen(month time.Time, closed map[time.Time]bool) time.Time {
	m := month.AddDate(0, 1, 0)
	for closed[m] {
		m = m.AddDate(0, 1, 0)
	}
	return m
}

// ClosedMonth says whether t falls in a closed month of closes.
func ClosedMonth(closes []MonthClose, t time.Time) bool {
	m := StepMonth.Truncate(t.UTC())
	for _, c := range closes {
		if c.Month.Equal(m) {
			return true
		}
	}
	return false
}

// CloseMonth closes c.Month in s once it is over: every cluster with rows
// in it whose live path (gpuledger serve) keeps a checkpoint must have
// settled past its end, so that the live path, which writes only past its
// checkpoint, never writes into a closed month. Later rewrites of its
// hours are adjustments (Rewrite).
func CloseMonth(ctx context.Context, s Store, c MonthClose, now time.Time) error {
	if err := c.Check(); err != nil {
		return err
	}
	end := c.Month.AddDate(0, 1, 0)
	if now.Before(end) {
		return fmt.Errorf("close %s: the month is not over (it ends %s); close it after that, once its hours are settled",
			c.Month.Format("2006-01"), end.Format(time.RFC3339))
	}
	rows, err := s.Query(ctx, Query{From: c.Month, To: end, Step: StepMonth, GroupBy: []Dimension{DimCluster}})
	if err != nil {
		return fmt.Errorf("close %s: read its clusters: %w", c.Month.Format("2006-01"), err)
	}
	for _, r := range rows {
		live, err := s.Checkpoint(ctx, LiveCheckpoint(r.Cluster))
		if err != nil {
			return fmt.Errorf("close %s: %w", c.Month.Format("2006-01"), err)
		}
		if !live.IsZero() && live.Before(end) {
			return fmt.Errorf("close %s: cluster %s's live path has settled the hours up to %s only; close the month once it passes %s (gpuledger serve settles an hour a few minutes after it ends)",
				c.Month.Format("2006-01"), r.Cluster, live.Format(time.RFC3339), end.Format(time.RFC3339))
		}
	}
	if c.At.IsZero() {
		c.At = now
	}
	return s.CloseMonth(ctx, c)
}

// HourSpan is [From, To) over whole hours; the zero HourSpan is empty.
type HourSpan struct{ From, To time.Time }

// Widen returns s widened to cover the hour that starts at h.
func (s HourSpan) Widen(h time.Time) HourSpan {
	if s.From.IsZero() || h.Before(s.From) {
		s.From = h
	}
	if end := h.Add(time.Hour); s.To.IsZero() || end.After(s.To) {
		s.To = end
	}
	return s
}
