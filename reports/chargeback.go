// Package reports renders the monthly chargeback from the ledger: a CSV with
// exact decimal amounts and an XLSX workbook (excelize) with a summary sheet,
// a chart of cost by team, daily costs and a sheet explaining the method.
//
// It reads ledger.Store only; it computes no cost itself, it sums rows.
package reports

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// Options says how to label and budget a report.
type Options struct {
	// Currency of the amounts, such as USD.
	Currency string
	// Teams lists the configured teams in the order the report shows them;
	// a team with no usage still gets a line.
	Teams []string
	// Budgets maps a team to its monthly budget in micro-units.
	Budgets map[string]int64
	// Cluster restricts the report to one cluster; empty for all.
	Cluster string
	// Team restricts the report to one team: its line only, and its
	// workloads (what a team's own token may read).
	Team string
	// Capacity, when set, adds the expansion trigger's verdict per flavor
	// at the month's end (not to a one-team report: capacity is the
	// cluster's), with each flavor's price per GPU-hour.
	Capacity     *capacity.Rule
	PricesMicros map[string]int64
	// Wait, when set, adds the queue-wait trigger's verdict per
	// ClusterQueue at the month's end (to the same sheet).
	Wait *capacity.WaitRule
	// Endpoints, when set, adds scale-to-zero's recommendation for each
	// inference endpoint over the month (to the same sheet).
	Endpoints *capacity.EndpointOptions
	// FOCUS, when set, adds the month's FOCUS 1.3 rows (Chargeback.Focus,
	// WriteFOCUS): one more query, by day, holder and flavor.
	FOCUS bool
}

// Line is one team's month.
type Line struct {
	Team             string
	GPUHoursByFlavor map[string]float64
	GPUHours         float64
	ActiveGPUHours   float64
	// UnmeasuredGPUHours is the part of GPUHours no telemetry measured the
	// activity of (see ledger.Row.UnmeasuredGPUSeconds).
	UnmeasuredGPUHours float64
	CostMicros         int64
	IdleCostMicros     int64
	// UnmeasuredCostMicros is the cost of UnmeasuredGPUHours: neither active
	// nor idle.
	UnmeasuredCostMicros int64
	// UnallocatedCostMicros is capacity nobody held, charged to this line
	// by the unallocated policy (all of the _unallocated line's cost).
	UnallocatedCostMicros int64
	// BorrowedCostMicros is the part of CostMicros run on capacity
	// borrowed from the cohort, beyond the team's nominal quota.
	BorrowedCostMicros int64
	EnergyKWh          float64
	EnergyCostMicros   int64
	BudgetMicros       int64
	HasBudget          bool
	// BudgetedCostMicros is the cost of the lines with a budget: a team's
	// own cost, the TOTAL's sum over teams with budgets. Variance is taken
	// against it, so that platform overhead (_unowned, _unallocated), which
	// no budget covers, is not in any variance.
	BudgetedCostMicros int64
	// AdjustmentMicros is the sum of the adjustments billed this month:
	// the differences corrections made to hours of closed months
	// (ledger.Rewrite). It is not part of CostMicros, which is this
	// month's hours.
	AdjustmentMicros int64
}

// ChargeMicros is what the line bills: this month's cost and the
// adjustments of closed months billed in it.
func (l *Line) ChargeMicros() int64 { return l.CostMicros + l.AdjustmentMicros }

// ActiveCostMicros is the part of CostMicros paid for busy GPUs.
func (l *Line) ActiveCostMicros() int64 {
	return l.CostMicros - l.IdleCostMicros - l.UnmeasuredCostMicros - l.UnallocatedCostMicros
}

func (l *Line) add(r *ledger.Row) {
	l.GPUHoursByFlavor[r.Flavor] += r.GPUSeconds / 3600
	l.GPUHours += r.GPUSeconds / 3600
	l.ActiveGPUHours += r.ActiveGPUSeconds / 3600
	l.UnmeasuredGPUHours += r.UnmeasuredGPUSeconds / 3600
	l.CostMicros += r.CostMicros
	l.IdleCostMicros += r.IdleCostMicros
	l.UnmeasuredCostMicros += r.UnmeasuredCostMicros
	l.UnallocatedCostMicros += r.UnallocatedCostMicros
	if r.Borrowed {
		l.BorrowedCostMicros += r.CostMicros
	}
	l.EnergyKWh += r.EnergyJoules / 3.6e6
	l.EnergyCostMicros += r.EnergyCostMicros
}

func (l *Line) addLine(o *Line) {
	for f, h := range o.GPUHoursByFlavor {
		l.GPUHoursByFlavor[f] += h
	}
	l.GPUHours += o.GPUHours
	l.ActiveGPUHours += o.ActiveGPUHours
	l.UnmeasuredGPUHours += o.UnmeasuredGPUHours
	l.CostMicros += o.CostMicros
	l.IdleCostMicros += o.IdleCostMicros
	l.UnmeasuredCostMicros += o.UnmeasuredCostMicros
	l.UnallocatedCostMicros += o.UnallocatedCostMicros
	l.BorrowedCostMicros += o.BorrowedCostMicros
	l.EnergyKWh += o.EnergyKWh
	l.EnergyCostMicros += o.EnergyCostMicros
	l.AdjustmentMicros += o.AdjustmentMicros
	if o.HasBudget {
		l.BudgetMicros += o.BudgetMicros
		l.BudgetedCostMicros += o.CostMicros
		l.HasBudget = true
	}
}

// EfficiencyPct is active GPU-hours over measured GPU-hours (held, less
// unmeasured), in percent: time whose activity nobody measured is left out
// rather than counted idle or busy.
func (l *Line) EfficiencyPct() float64 {
	measured := l.GPUHours - l.UnmeasuredGPUHours
	if measured <= 0 {
		return 0
	}
	return 100 * l.ActiveGPUHours / measured
}

// VarianceMicros is budget minus the budgeted cost: positive when under
// budget.
func (l *Line) VarianceMicros() int64 { return l.BudgetMicros - l.BudgetedCostMicros }

// Chargeback is one month's report.
type Chargeback struct {
	Month    time.Time
	Currency string
	Cluster  string
	Flavors  []string
	// Lines holds the teams in configured order, then any other team seen,
	// then ledger.TeamUnowned and ledger.TeamUnallocated.
	Lines []Line
	Total Line
	// Days holds each day's cost per team, for the daily sheet.
	Days []Day
	// Workloads lists the month's most idle workloads, most idle cost
	// first.
	Workloads []ledger.WorkloadRow
	// Capacity is the expansion trigger per flavor at the month's end
	// (Options.Capacity).
	Capacity []capacity.Recommendation
	// Queues is the queue-wait trigger per ClusterQueue at the month's
	// end (Options.Wait).
	Queues []capacity.QueueWait
	// Endpoints is scale-to-zero's recommendation per inference endpoint
	// over the month (Options.Endpoints).
	Endpoints []capacity.EndpointAdvice
	// Adjustments are the adjustments billed this month, per team-hour of
	// the closed months they correct; their sums per team are the Lines'
	// AdjustmentMicros.
	Adjustments []ledger.Restatement
	// Restatements are the rewrites of this month's hours: restatements
	// while it was open (its figures are the ones after them) and
	// adjustments recorded after it closed (billed in a later month).
	Restatements []ledger.Restatement
	// Focus holds the FOCUS export's rows (Options.FOCUS): each day's
	// origin charges split to their holders, then the adjustments.
	Focus []FocusRow
}

// TopWorkloads is how many workloads a report lists.
const TopWorkloads = 25

// Day is one day's cost per team.
type Day struct {
	Date       time.Time
	CostMicros map[string]int64
}

// ErrNoData is returned for a month the ledger holds no rows of: a
// chargeback of zeros would read as an invoice.
var ErrNoData = errors.New("no ledger rows")

// NoDataError says which month and ledger had no rows.
type NoDataError struct {
	Month         time.Time
	Cluster, Team string
}

func (e *NoDataError) Error() string {
	where := "the ledger"
	if e.Cluster != "" {
		where += " for cluster " + e.Cluster
	}
	if e.Team != "" {
		where += " for team " + e.Team
	}
	return fmt.Sprintf("%s holds no rows for %s: nothing to charge back; check the month, -ledger.path or -cluster, or ingest it first (gpuledger ingest)",
		where, e.Month.Format("2006-01"))
}

func (e *NoDataError) Is(target error) bool { return target == ErrNoData }

// Build sums the ledger's rows of the month that contains month. A month
// with no rows is a *NoDataError (errors.Is ErrNoData).
func Build(ctx context.Context, store ledger.Store, month time.Time, opts Options) (*Chargeback, error) {
	from := ledger.StepMonth.Truncate(month)
	to := from.AddDate(0, 1, 0)
	rows, err := store.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepMonth,
		GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimFlavor, ledger.DimBorrowed}, Cluster: opts.Cluster, Team: opts.Team})
	if err != nil {
		return nil, fmt.Errorf("chargeback for %s: %w", from.Format("2006-01"), err)
	}
	adj, err := store.Adjustments(ctx, opts.Cluster, from)
	if err != nil {
		return nil, fmt.Errorf("adjustments billed in %s: %w", from.Format("2006-01"), err)
	}
	restated, err := store.Restatements(ctx, opts.Cluster, from, to)
	if err != nil {
		return nil, fmt.Errorf("restatements of %s: %w", from.Format("2006-01"), err)
	}
	if opts.Team != "" {
		adj, restated = ofTeam(adj, opts.Team), ofTeam(restated, opts.Team)
	}
	if len(rows) == 0 && len(adj) == 0 {
		return nil, &NoDataError{Month: from, Cluster: opts.Cluster, Team: opts.Team}
	}
	cb := &Chargeback{Month: from, Currency: opts.Currency, Cluster: opts.Cluster}
	lines := make(map[string]*Line)
	order := slices.Clone(opts.Teams)
	if opts.Team != "" {
		order = []string{opts.Team}
	}
	line := func(team string) *Line {
		l := lines[team]
		if l == nil {
			l = &Line{Team: team, GPUHoursByFlavor: make(map[string]float64)}
			l.BudgetMicros, l.HasBudget = opts.Budgets[team]
			lines[team] = l
		}
		return l
	}
	for _, t := range order {
		line(t)
	}
	flavors := make(map[string]bool)
	for i := range rows {
		r := &rows[i]
		if _, ok := lines[r.Team]; !ok && r.Team != ledger.TeamUnowned && r.Team != ledger.TeamUnallocated {
			order = append(order, r.Team)
		}
		line(r.Team).add(r)
		flavors[r.Flavor] = true
	}
	for i := range adj {
		a := &adj[i]
		if _, ok := lines[a.Team]; !ok && a.Team != ledger.TeamUnowned && a.Team != ledger.TeamUnallocated {
			order = append(order, a.Team)
		}
		line(a.Team).AdjustmentMicros += a.DeltaMicros()
	}
	cb.Adjustments, cb.Restatements = adj, restated
	for _, l := range lines {
		if l.HasBudget {
			l.BudgetedCostMicros = l.CostMicros
		}
	}
	if opts.Team == "" {
		order = append(order, ledger.TeamUnowned, ledger.TeamUnallocated)
	}
	cb.Total = Line{Team: "TOTAL", GPUHoursByFlavor: make(map[string]float64)}
	for _, t := range order {
		l := line(t)
		cb.Lines = append(cb.Lines, *l)
		cb.Total.addLine(l)
	}
	for f := range flavors {
		cb.Flavors = append(cb.Flavors, f)
	}
	slices.Sort(cb.Flavors)

	days, err := store.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepDay,
		GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: opts.Cluster, Team: opts.Team})
	if err != nil {
		return nil, fmt.Errorf("daily costs for %s: %w", from.Format("2006-01"), err)
	}
	for i := range days {
		r := &days[i]
		if n := len(cb.Days); n == 0 || !cb.Days[n-1].Date.Equal(r.Hour) {
			cb.Days = append(cb.Days, Day{Date: r.Hour, CostMicros: make(map[string]int64)})
		}
		cb.Days[len(cb.Days)-1].CostMicros[r.Team] += r.CostMicros
	}
	if opts.FOCUS {
		if err := cb.buildFocus(ctx, store, opts); err != nil {
			return nil, err
		}
	}
	cb.Workloads, err = store.TopWorkloads(ctx, ledger.Query{From: from, To: to, Cluster: opts.Cluster, Team: opts.Team}, TopWorkloads)
	if err != nil {
		return nil, fmt.Errorf("workloads for %s: %w", from.Format("2006-01"), err)
	}
	if opts.Capacity != nil && opts.Team == "" {
		if cb.Capacity, err = capacity.Evaluate(ctx, store, opts.Cluster, to, *opts.Capacity, opts.PricesMicros); err != nil {
			return nil, err
		}
	}
	if opts.Wait != nil && opts.Team == "" {
		if cb.Queues, err = capacity.EvaluateWaits(ctx, store, opts.Cluster, to, *opts.Wait, opts.PricesMicros); err != nil {
			return nil, err
		}
	}
	if opts.Endpoints != nil && opts.Team == "" {
		if cb.Endpoints, _, err = capacity.EvaluateEndpoints(ctx, store, opts.Cluster, from, to, *opts.Endpoints); err != nil {
			return nil, err
		}
	}
	return cb, nil
}

// ofTeam keeps the restatements of team.
func ofTeam(rs []ledger.Restatement, team string) []ledger.Restatement {
	return slices.DeleteFunc(rs, func(r ledger.Restatement) bool { return r.Team != team })
}

// FileBase returns the report's file name without extension:
// chargeback-YYYY-MM.
func (cb *Chargeback) FileBase() string { return "chargeback-" + cb.Month.Format("2006-01") }

func (cb *Chargeback) header() []string {
	h := []string{"team"}
	for _, f := range cb.Flavors {
		h = append(h, "gpu_hours_"+f)
	}
	return append(h, "gpu_hours", "active_gpu_hours", "unmeasured_gpu_hours", "efficiency_pct", "cost", "active_cost", "idle_cost",
		"unmeasured_cost", "unallocated_cost", "borrowed_cost", "energy_kwh", "energy_cost", "budget", "variance", "currency", "adjustment", "charge", "note")
}

func (cb *Chargeback) record(l *Line) []string {
	rec := []string{l.Team}
	for _, f := range cb.Flavors {
		rec = append(rec, strconv.FormatFloat(l.GPUHoursByFlavor[f], 'f', 3, 64))
	}
	rec = append(rec,
		strconv.FormatFloat(l.GPUHours, 'f', 3, 64),
		strconv.FormatFloat(l.ActiveGPUHours, 'f', 3, 64),
		strconv.FormatFloat(l.UnmeasuredGPUHours, 'f', 3, 64),
		strconv.FormatFloat(l.EfficiencyPct(), 'f', 1, 64),
		ledger.FormatMicros(l.CostMicros),
		ledger.FormatMicros(l.ActiveCostMicros()),
		ledger.FormatMicros(l.IdleCostMicros),
		ledger.FormatMicros(l.UnmeasuredCostMicros),
		ledger.FormatMicros(l.UnallocatedCostMicros),
		ledger.FormatMicros(l.BorrowedCostMicros),
		strconv.FormatFloat(l.EnergyKWh, 'f', 3, 64),
		ledger.FormatMicros(l.EnergyCostMicros))
	if l.HasBudget {
		rec = append(rec, ledger.FormatMicros(l.BudgetMicros), ledger.FormatMicros(l.VarianceMicros()))
	} else {
		rec = append(rec, "", "")
	}
	rec = append(rec, cb.Currency, ledger.FormatMicros(l.AdjustmentMicros), ledger.FormatMicros(l.ChargeMicros()))
	if l.AdjustmentMicros != 0 {
		return append(rec, "charge includes adjustments of closed months; see the adjustment: lines")
	}
	return append(rec, "")
}

// noteRecord is a line of the CSV that only says something: its team
// column is kind:team (never a team's name, which holds no ':'), its
// amounts are empty so that a column's sum is still the lines' and the
// TOTAL's, and the note says what happened.
func (cb *Chargeback) noteRecord(kind, team, note string) []string {
	rec := make([]string, len(cb.header()))
	rec[0] = kind + ":" + team
	rec[len(rec)-4] = cb.Currency
	rec[len(rec)-1] = note
	return rec
}

// notes are the CSV's lines after TOTAL: each adjustment billed this month
// and each restatement of this month's hours, grouped per team and
// rewrite into runs of hours.
func (cb *Chargeback) notes() [][]string {
	var out [][]string
	for _, g := range GroupRestatements(cb.Adjustments) {
		out = append(out, cb.noteRecord("adjustment", g.Team, g.Describe()))
	}
	for _, g := range GroupRestatements(cb.Restatements) {
		kind := "restated"
		if g.BilledIn != (time.Time{}) {
			kind = "adjusted-later"
		}
		out = append(out, cb.noteRecord(kind, g.Team, g.Describe()))
	}
	return out
}

// WriteCSV writes one line per team and a TOTAL line, amounts as exact
// decimals with six places.
func (cb *Chargeback) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(cb.header()); err != nil {
		return err
	}
	for i := range cb.Lines {
		if err := cw.Write(cb.record(&cb.Lines[i])); err != nil {
			return err
		}
	}
	if err := cw.Write(cb.record(&cb.Total)); err != nil {
		return err
	}
	for _, rec := range cb.notes() {
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
