// Package capacity turns the ledger's hours into capacity decisions: the
// expansion trigger (a flavor whose GPUs have been allocated at or above a
// threshold over a whole window, with enough data to say so) with the
// block to buy, its monthly cost and the evidence, a forecast of when a
// flavor will cross the threshold, and the teams' budget burn. The alerts
// go to Alertmanager (alertmanager.go). Everything here is computed from
// the ledger: what Kubernetes allocated and what DCGM measured.
package capacity

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// FlavorHour is one hour of one flavor's GPUs, in GPU-seconds: what
// existed (held or not), what pods held (Kubernetes' allocation) and
// what was busy (DCGM's activity).
type FlavorHour struct {
	Hour                                    time.Time
	Flavor                                  string
	Existing, Allocated, Active, Unmeasured float64
}

// ReadFacts reads each flavor's hours in [from, to) of the cluster from
// the ledger, in hour order: every row counts towards what existed, the
// rows of a team (not the unallocated ones) towards what was allocated.
func ReadFacts(ctx context.Context, s ledger.Store, cluster string, from, to time.Time) ([]FlavorHour, error) {
	rows, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepHour, Cluster: cluster,
		GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimFlavor}})
	if err != nil {
		return nil, fmt.Errorf("read the flavors' hours from the ledger: %w", err)
	}
	type key struct {
		hour   time.Time
		flavor string
	}
	byKey := map[key]*FlavorHour{}
	for _, r := range rows {
		k := key{r.Hour.UTC(), r.Flavor}
		fh := byKey[k]
		if fh == nil {
			fh = &FlavorHour{Hour: k.hour, Flavor: k.flavor}
			byKey[k] = fh
		}
		fh.Existing += r.GPUSeconds
		fh.Active += r.ActiveGPUSeconds
		fh.Unmeasured += r.UnmeasuredGPUSeconds
		if r.Team != ledger.TeamUnallocated {
			fh.Allocated += r.GPUSeconds
		}
	}
	out := make([]FlavorHour, 0, len(byKey))
	for _, fh := range byKey {
		out = append(out, *fh)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Hour.Equal(out[j].Hour) {
			return out[i].Hour.Before(out[j].Hour)
		}
		return out[i].Flavor < out[j].Flavor
	})
	return out, nil
}

// Rule is the expansion trigger: buy when a flavor's GPUs, over the whole
// Window, were both held (allocated, as Kubernetes says) and busy (active,
// as DCGM says) for at least Threshold of their time, by Measure; provided
// the ledger has the flavor from before the window began and for
// MinCoverage of its hours (a cluster with 3 days of history cannot fire
// a 30-day rule, nor can one whose exporter was down for a week of it).
// A flavor held at least Threshold of its time but busy less than that is
// not short of GPUs but of idle ones given back: the verdict is reclaim,
// with the namespaces that hold them idle.
type Rule struct {
	Threshold   float64
	Window      time.Duration
	MinCoverage float64
	// Measure is what Threshold is of: MeasureActive (the default, the
	// design's "utilisation": the GPUs busy) or MeasureAllocated (held,
	// busy or not: what rules that rewarded holding GPUs idle bought on).
	Measure Measure
	// PurchaseGPUs is the block an expansion buys.
	PurchaseGPUs int
}

// Measure is what a rule's threshold is of.
type Measure string

// Measures of a Rule.
const (
	MeasureActive    Measure = "active"
	MeasureAllocated Measure = "allocated"
)

// Actions a verdict calls for.
const (
	ActionBuy     = "buy"
	ActionReclaim = "reclaim"
)

// DefaultRule is the rule of the product's design: 80% utilisation (busy)
// over 30 days, 95% of the hours present, blocks of 72 GPUs (nine 8-GPU
// nodes).
var DefaultRule = Rule{Threshold: 0.8, Window: 30 * 24 * time.Hour, MinCoverage: 0.95, Measure: MeasureActive, PurchaseGPUs: 72}

// HoursPerMonth prices a month: 8,760 hours a year over 12.
const HoursPerMonth = 730

// Verdict is what a rule decided over its window, on what evidence,
// and the block it would buy: the part the utilisation and the wait
// rules share.
type Verdict struct {
	// Fired is set when the verdict is to buy (Action is ActionBuy).
	Fired bool
	// Action is ActionBuy, ActionReclaim or empty (nothing to do).
	Action string
	// Reclaim is the evidence of a reclaim verdict.
	Reclaim *Reclaim
	// Why says what fired it, or what kept it from firing.
	Why string
	// From and To bound the window evaluated; Hours is its length in
	// hours, HoursWithData how many of them the ledger has data for;
	// FirstData the first hour the ledger has.
	From, To             time.Time
	Hours, HoursWithData int
	FirstData            time.Time
	// Forecast, when the rule has not fired and the daily values rise,
	// is the day their trend crosses the threshold (zero otherwise).
	Forecast time.Time
	// PurchaseGPUs and MonthlyCostMicros: the block to buy and what it
	// costs a month at the flavor's price.
	PurchaseGPUs      int
	MonthlyCostMicros int64
	// WhatIf says, when set, what the block would have done to the last
	// month's workloads (a replay through the admission core, which the
	// caller runs).
	WhatIf string
}

// newVerdict starts the verdict on the window of the given length ending
// at to, for data from first, pricing a block of gpus at the price of a
// GPU-hour.
func newVerdict(to time.Time, window time.Duration, first time.Time, gpus int, priceMicrosPerGPUHour int64) Verdict {
	return Verdict{From: to.Add(-window), To: to, Hours: int(window / time.Hour), FirstData: first, PurchaseGPUs: gpus,
		MonthlyCostMicros: int64(gpus) * priceMicrosPerGPUHour * HoursPerMonth}
}

// Reclaim is what a reclaim verdict rests on: GPUs held and idle.
type Reclaim struct {
	// IdleGPUs is how many GPUs were held and idle on average over the
	// window (busy neither per DCGM, nor unmeasured): what giving them
	// back would free. HeldActive is the busy share of the GPU time held.
	IdleGPUs, HeldActive float64
	// IdleCostMonthlyMicros is what the idle GPUs cost a month at the
	// flavor's price.
	IdleCostMonthlyMicros int64
	// Holders are the namespaces that held the most idle GPU time in the
	// window, most first (at most five).
	Holders []IdleHolder
}

// IdleHolder is a namespace's GPUs held and idle on a flavor over a window.
type IdleHolder struct {
	Team, Namespace, ClusterQueue string
	// IdleGPUs is the idle GPUs it held on average; HeldGPUs all it held.
	IdleGPUs, HeldGPUs    float64
	IdleCostMonthlyMicros int64
	// Workloads are the namespace's workloads (its pods' owners) that
	// held the most idle GPU time in the window, most first (at most
	// three), from the ledger's idle leaderboard: the ones to give back.
	// The ledger's workload rows carry no flavor: these are over all the
	// namespace's flavors.
	Workloads []ledger.WorkloadRow
}

// Recommendation is the trigger's verdict on one flavor.
type Recommendation struct {
	Flavor string
	Verdict
	// Allocated and Active are the window's shares of the GPU time that
	// existed (allocated / existing, active / existing), 0-1;
	// DailyMin and DailyMax the range of the daily allocated shares.
	Allocated, Active  float64
	DailyMin, DailyMax float64
	// GPUs is the flavor's GPUs in the window's last hour with data.
	GPUs float64
}

// Expansion evaluates the rule for every flavor in facts at now (the
// window ends at now's hour), with each flavor's price per GPU-hour and,
// for a reclaim verdict, the namespaces holding each flavor idle over the
// window (ReadHolders; nil: none named).
func Expansion(facts []FlavorHour, holders map[string][]IdleHolder, now time.Time, r Rule, priceMicrosPerGPUHour map[string]int64) []Recommendation {
	if r.Measure == "" {
		r.Measure = MeasureActive
	}
	to := now.UTC().Truncate(time.Hour)
	from := to.Add(-r.Window)
	byFlavor := map[string][]FlavorHour{}
	for _, f := range facts {
		if f.Hour.Before(to) && f.Existing > 0 {
			byFlavor[f.Flavor] = append(byFlavor[f.Flavor], f)
		}
	}
	flavors := make([]string, 0, len(byFlavor))
	for f := range byFlavor {
		flavors = append(flavors, f)
	}
	sort.Strings(flavors)
	var out []Recommendation
	for _, flavor := range flavors {
		hours := byFlavor[flavor]
		sort.Slice(hours, func(i, j int) bool { return hours[i].Hour.Before(hours[j].Hour) })
		rec := Recommendation{Flavor: flavor, Verdict: newVerdict(to, r.Window, hours[0].Hour, r.PurchaseGPUs, priceMicrosPerGPUHour[flavor]),
			DailyMin: math.Inf(1), DailyMax: math.Inf(-1)}
		var existing, allocated, active, unmeasured float64
		seen := map[time.Time]bool{}
		days := map[time.Time]*[2]float64{}
		for _, h := range hours {
			day := h.Hour.Truncate(24 * time.Hour)
			d := days[day]
			if d == nil {
				d = &[2]float64{}
				days[day] = d
			}
			d[0] += h.Allocated
			d[1] += h.Existing
			if h.Hour.Before(from) {
				continue
			}
			existing += h.Existing
			allocated += h.Allocated
			active += h.Active
			unmeasured += h.Unmeasured
			seen[h.Hour] = true
			rec.GPUs = h.Existing / 3600
		}
		rec.HoursWithData = len(seen)
		if existing > 0 {
			rec.Allocated, rec.Active = allocated/existing, active/existing
		}
		var xs, ys []float64
		for day, d := range days {
			share := d[0] / d[1]
			if !day.Before(from) {
				rec.DailyMin, rec.DailyMax = math.Min(rec.DailyMin, share), math.Max(rec.DailyMax, share)
			}
			xs = append(xs, day.Sub(from).Hours()/24)
			ys = append(ys, share)
		}
		if rec.HoursWithData == 0 {
			rec.DailyMin, rec.DailyMax = 0, 0
		}
		util := rec.Active
		if r.Measure == MeasureAllocated {
			util = rec.Allocated
		}
		span := fmt.Sprintf("from %s to %s (%d of %d hours with data)", from.Format(time.DateOnly), to.Format(time.DateOnly), rec.HoursWithData, rec.Hours)
		switch short := rec.notEnough(flavor, r.MinCoverage); {
		case short != "":
			rec.Why = short
		case util >= r.Threshold:
			rec.Fired, rec.Action = true, ActionBuy
			rec.Why = fmt.Sprintf("%s's GPU time %.1f%% allocated (daily %.1f%%-%.1f%%) and %.1f%% active %s: %s at or above %.0f%%",
				flavor, 100*rec.Allocated, 100*rec.DailyMin, 100*rec.DailyMax, 100*rec.Active, span, r.Measure, 100*r.Threshold)
		case rec.Allocated >= r.Threshold:
			rec.Action = ActionReclaim
			rec.Reclaim = reclaimOf(allocated, active, unmeasured, rec.HoursWithData, holders[flavor], priceMicrosPerGPUHour[flavor])
			rec.Why = fmt.Sprintf("%s's GPU time %.1f%% allocated but %.1f%% active %s: held, not busy; %.1f GPUs held idle on average, %s a month",
				flavor, 100*rec.Allocated, 100*rec.Active, span, rec.Reclaim.IdleGPUs, ledger.FormatCents(rec.Reclaim.IdleCostMonthlyMicros))
		default:
			rec.Why = fmt.Sprintf("%s's GPU time %.1f%% allocated and %.1f%% active over the window: %s below %.0f%%", flavor, 100*rec.Allocated,
				100*rec.Active, r.Measure, 100*r.Threshold)
		}
		if !rec.Fired && rec.Action != ActionReclaim {
			rec.Forecast = forecast(xs, ys, r.Threshold, from, to)
		}
		out = append(out, rec)
	}
	return out
}

// reclaimOf is the evidence of a reclaim verdict from the window's GPU
// time held, busy and unmeasured (seconds) over hours with data, its idle
// holders and the price.
func reclaimOf(allocated, active, unmeasured float64, hours int, holders []IdleHolder, price int64) *Reclaim {
	rc := &Reclaim{}
	if hours > 0 {
		rc.IdleGPUs = max(allocated-active-unmeasured, 0) / 3600 / float64(hours)
	}
	if measured := allocated - unmeasured; measured > 0 {
		rc.HeldActive = active / measured
	}
	rc.IdleCostMonthlyMicros = int64(math.Round(rc.IdleGPUs * float64(price) * HoursPerMonth))
	rc.Holders = holders[:min(len(holders), 5)]
	return rc
}

// ReadHolders reads, per flavor, the namespaces that held its GPUs idle in
// [from, to): held GPU time neither busy nor unmeasured, as average GPUs
// over the span, with what that costs a month at the flavor's price; most
// idle first.
func ReadHolders(ctx context.Context, s ledger.Store, cluster string, from, to time.Time, priceMicrosPerGPUHour map[string]int64) (map[string][]IdleHolder, error) {
	rows, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepMonth, Cluster: cluster,
		GroupBy: []ledger.Dimension{ledger.DimTeam, ledger.DimNamespace, ledger.DimClusterQueue, ledger.DimFlavor}})
	if err != nil {
		return nil, fmt.Errorf("read the idle holders from the ledger: %w", err)
	}
	type key struct{ team, ns, cq, flavor string }
	idle, held := map[key]float64{}, map[key]float64{}
	for _, r := range rows {
		if r.Team == ledger.TeamUnallocated {
			continue
		}
		k := key{r.Team, r.Namespace, r.ClusterQueue, r.Flavor}
		idle[k] += max(r.GPUSeconds-r.ActiveGPUSeconds-r.UnmeasuredGPUSeconds, 0)
		held[k] += r.GPUSeconds
	}
	span := to.Sub(from).Seconds()
	out := map[string][]IdleHolder{}
	for k, v := range idle {
		if v <= 0 || span <= 0 {
			continue
		}
		gpus := v / span
		out[k.flavor] = append(out[k.flavor], IdleHolder{Team: k.team, Namespace: k.ns, ClusterQueue: k.cq, IdleGPUs: gpus, HeldGPUs: held[k] / span,
			IdleCostMonthlyMicros: int64(math.Round(gpus * float64(priceMicrosPerGPUHour[k.flavor]) * HoursPerMonth))})
	}
	byTeam := map[string][]ledger.WorkloadRow{}
	for f := range out {
		sort.Slice(out[f], func(i, j int) bool {
			a, b := out[f][i], out[f][j]
			if a.IdleGPUs != b.IdleGPUs {
				return a.IdleGPUs > b.IdleGPUs
			}
			return a.Team+"/"+a.Namespace+"/"+a.ClusterQueue < b.Team+"/"+b.Namespace+"/"+b.ClusterQueue
		})
		// The workloads of the holders a verdict names (Reclaim keeps five).
		for i := range out[f][:min(len(out[f]), 5)] {
			h := &out[f][i]
			wl, ok := byTeam[h.Team]
			if !ok {
				if wl, err = s.TopWorkloads(ctx, ledger.Query{From: from, To: to, Step: ledger.StepMonth, Cluster: cluster, Team: h.Team}, 100); err != nil {
					return nil, fmt.Errorf("read the idle workloads of team %s from the ledger: %w", h.Team, err)
				}
				byTeam[h.Team] = wl
			}
			for _, w := range wl {
				if w.Namespace == h.Namespace && w.IdleCostMicros > 0 && len(h.Workloads) < 3 {
					h.Workloads = append(h.Workloads, w)
				}
			}
		}
	}
	return out, nil
}

// notEnough says why the ledger cannot support the verdict on what (a
// flavor, a queue): its data starts inside the window, or fewer than
// minCoverage of the window's hours have data. Empty when it can.
func (v *Verdict) notEnough(what string, minCoverage float64) string {
	coverage := float64(v.HoursWithData) / float64(v.Hours)
	switch {
	case v.FirstData.After(v.From):
		return fmt.Sprintf("not enough history: the ledger has %s since %s, %.1f days; the rule needs %.0f", what,
			v.FirstData.Format(time.DateOnly), v.To.Sub(v.FirstData).Hours()/24, v.To.Sub(v.From).Hours()/24)
	case coverage < minCoverage:
		return fmt.Sprintf("not enough data: %d of the window's %d hours (%.0f%%; the rule needs %.0f%%)",
			v.HoursWithData, v.Hours, 100*coverage, 100*minCoverage)
	}
	return ""
}

// forecast is the day the daily values' trend (xs in days from from)
// crosses threshold, no earlier than to's day; zero when it does not
// (see crossing).
func forecast(xs, ys []float64, threshold float64, from, to time.Time) time.Time {
	at, ok := crossing(xs, ys, threshold)
	if !ok {
		return time.Time{}
	}
	day := from.Add(time.Duration(at * 24 * float64(time.Hour))).Truncate(24 * time.Hour)
	if day.Before(to) {
		return to.Truncate(24 * time.Hour)
	}
	return day
}

// crossing fits a line to the daily shares (at least 7 days) and returns
// the day it reaches threshold, when it rises, has not yet reached it on
// the last day and reaches it within a year of it.
func crossing(xs, ys []float64, threshold float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 7 {
		return 0, false
	}
	var sx, sy, sxx, sxy, last float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
		last = math.Max(last, xs[i])
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	slope := (n*sxy - sx*sy) / den
	intercept := (sy - slope*sx) / n
	if slope <= 0 || intercept+slope*last >= threshold {
		return 0, false
	}
	at := (threshold - intercept) / slope
	if at > last+365 {
		return 0, false
	}
	return at, true
}

// Evaluate reads the cluster's flavor hours from the ledger, as far back as
// the window or a year (the trend the forecast fits), and evaluates the
// rule at now.
func Evaluate(ctx context.Context, s ledger.Store, cluster string, now time.Time, r Rule, priceMicrosPerGPUHour map[string]int64) ([]Recommendation, error) {
	facts, err := ReadFacts(ctx, s, cluster, now.Add(-max(r.Window, 365*24*time.Hour)), now)
	if err != nil {
		return nil, err
	}
	to := now.UTC().Truncate(time.Hour)
	holders, err := ReadHolders(ctx, s, cluster, to.Add(-r.Window), to, priceMicrosPerGPUHour)
	if err != nil {
		return nil, err
	}
	return Expansion(facts, holders, now, r, priceMicrosPerGPUHour), nil
}

// BudgetLevels are the shares of a budget that raise an alert.
var BudgetLevels = []int{50, 80, 100}

// Budget is one team's spend in a month against its budget.
type Budget struct {
	Team                                            string
	BudgetMicros, MonthToDateMicros, ForecastMicros int64
	// Level is the highest of BudgetLevels the month-to-date spend has
	// reached (0: none); ForecastLevel the same for the forecast.
	Level, ForecastLevel int
	// Final is set for a month that has ended: MonthToDateMicros is its
	// whole spend, and the forecast is it.
	Final bool
}

// Budgets is BudgetsFor the month now is in.
func Budgets(ctx context.Context, s ledger.Store, cluster string, budgets map[string]int64, now time.Time) ([]Budget, error) {
	return BudgetsFor(ctx, s, cluster, budgets, ledger.StepMonth.Truncate(now), now)
}

// BudgetsFor reads each budgeted team's spend in month as of now from the
// ledger: for the month now is in, the month to date and a forecast of
// its end, linear in the hours elapsed; for a month that has ended, its
// whole spend, which is the forecast too (Final); for one to come,
// nothing.
func BudgetsFor(ctx context.Context, s ledger.Store, cluster string, budgets map[string]int64, month, now time.Time) ([]Budget, error) {
	month = ledger.StepMonth.Truncate(month)
	end := month.AddDate(0, 1, 0)
	to := now.UTC().Truncate(time.Hour)
	if to.After(end) {
		to = end
	}
	spent := map[string]int64{}
	if to.After(month) {
		rows, err := s.Query(ctx, ledger.Query{From: month, To: to, Step: ledger.StepMonth, Cluster: cluster, GroupBy: []ledger.Dimension{ledger.DimTeam}})
		if err != nil {
			return nil, fmt.Errorf("read the teams' cost in %s from the ledger: %w", month.Format("2006-01"), err)
		}
		for _, r := range rows {
			spent[r.Team] += r.CostMicros
		}
	}
	elapsed := max(to.Sub(month).Hours(), 0)
	total := end.Sub(month).Hours()
	var out []Budget
	for team, limit := range budgets {
		if limit <= 0 {
			continue
		}
		b := Budget{Team: team, BudgetMicros: limit, MonthToDateMicros: spent[team], Final: !to.Before(end)}
		switch {
		case b.Final:
			b.ForecastMicros = b.MonthToDateMicros
		case elapsed > 0:
			b.ForecastMicros = int64(math.Round(float64(b.MonthToDateMicros) * total / elapsed))
		}
		b.Level, b.ForecastLevel = level(b.MonthToDateMicros, limit), level(b.ForecastMicros, limit)
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Team < out[j].Team })
	return out, nil
}

func level(spent, budget int64) int {
	l := 0
	for _, p := range BudgetLevels {
		// spent / budget ≥ p%, in integers.
		if spent*100 >= budget*int64(p) {
			l = p
		}
	}
	return l
}
