package api

import (
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// CapacityOptions are what the capacity routes need: the cluster, the
// expansion rule, the flavors' prices and the teams' budgets.
type CapacityOptions struct {
	Cluster      string
	Rule         capacity.Rule
	WaitRule     capacity.WaitRule
	PricesMicros map[string]int64
	Budgets      map[string]int64
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// rule is the expansion rule, capacity.DefaultRule when none is set.
func (o CapacityOptions) rule() capacity.Rule {
	if o.Rule.Window <= 0 {
		return capacity.DefaultRule
	}
	return o.Rule
}

// waitRule is the queue-wait rule, capacity.DefaultWaitRule when none is
// set.
func (o CapacityOptions) waitRule() capacity.WaitRule {
	if o.WaitRule.Window <= 0 {
		return capacity.DefaultWaitRule
	}
	return o.WaitRule
}

// QueueWaitPoint is the wait trigger's verdict on one ClusterQueue. Waits
// are seconds, absent when nothing was admitted or pending.
type QueueWaitPoint struct {
	ClusterQueue      string     `json:"clusterQueue"`
	Flavor            string     `json:"flavor"`
	Fired             bool       `json:"fired"`
	Why               string     `json:"why"`
	From              time.Time  `json:"from"`
	To                time.Time  `json:"to"`
	Hours             int        `json:"hours"`
	HoursWithData     int        `json:"hoursWithData"`
	WaitSeconds       *float64   `json:"waitSeconds,omitempty"`
	LastDaySeconds    *float64   `json:"lastDayWaitSeconds,omitempty"`
	Admitted          float64    `json:"admitted"`
	Pending           float64    `json:"pending"`
	PendingGPUs       float64    `json:"pendingGpus"`
	Daily             []DayPoint `json:"daily"`
	Forecast          string     `json:"forecast,omitempty"`
	PurchaseGPUs      int        `json:"purchaseGpus"`
	MonthlyCostMicros int64      `json:"monthlyCostMicros"`
	MonthlyCost       string     `json:"monthlyCost"`
}

// DayPoint is one day's quantile wait of a ClusterQueue.
type DayPoint struct {
	Day         string   `json:"day"`
	WaitSeconds *float64 `json:"waitSeconds,omitempty"`
	Admitted    float64  `json:"admitted"`
}

func seconds(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// ExpansionPoint is the expansion trigger's verdict on one flavor.
type ExpansionPoint struct {
	Flavor            string    `json:"flavor"`
	Fired             bool      `json:"fired"`
	Why               string    `json:"why"`
	From              time.Time `json:"from"`
	To                time.Time `json:"to"`
	Hours             int       `json:"hours"`
	HoursWithData     int       `json:"hoursWithData"`
	GPUs              float64   `json:"gpus"`
	Allocated         float64   `json:"allocatedShare"`
	Active            float64   `json:"activeShare"`
	DailyMin          float64   `json:"dailyAllocatedMin"`
	DailyMax          float64   `json:"dailyAllocatedMax"`
	Forecast          string    `json:"forecast,omitempty"`
	PurchaseGPUs      int       `json:"purchaseGpus"`
	MonthlyCostMicros int64     `json:"monthlyCostMicros"`
	MonthlyCost       string    `json:"monthlyCost"`
}

// BudgetPoint is one team's spend this month against its budget.
type BudgetPoint struct {
	Team              string `json:"team"`
	BudgetMicros      int64  `json:"budgetMicros"`
	MonthToDateMicros int64  `json:"monthToDateMicros"`
	ForecastMicros    int64  `json:"forecastMicros"`
	Budget            string `json:"budget"`
	MonthToDate       string `json:"monthToDate"`
	Forecast          string `json:"forecast"`
	Level             int    `json:"levelPercent"`
	ForecastLevel     int    `json:"forecastLevelPercent"`
}

func (s *Server) capacityNow(v string) (time.Time, error) {
	if v != "" {
		return parseTime("at", v)
	}
	if s.opts.Capacity.Now != nil {
		return s.opts.Capacity.Now(), nil
	}
	return time.Now(), nil
}

// capacity answers GET /api/v1/capacity?at=: the expansion trigger per
// flavor of the cluster, as of at (default now).
func (s *Server) capacity(c echo.Context) error {
	v, err := params(c, "at")
	if err != nil {
		return err
	}
	at, err := s.capacityNow(v.Get("at"))
	if err != nil {
		return err
	}
	o := s.opts.Capacity
	rule := o.rule()
	recs, err := capacity.Evaluate(c.Request().Context(), s.opts.Store, o.Cluster, at, rule, o.PricesMicros)
	if err != nil {
		return err
	}
	out := []ExpansionPoint{}
	for _, r := range recs {
		p := ExpansionPoint{Flavor: r.Flavor, Fired: r.Fired, Why: r.Why, From: r.From, To: r.To, Hours: r.Hours, HoursWithData: r.HoursWithData,
			GPUs: r.GPUs, Allocated: r.Allocated, Active: r.Active, DailyMin: r.DailyMin, DailyMax: r.DailyMax, PurchaseGPUs: r.PurchaseGPUs,
			MonthlyCostMicros: r.MonthlyCostMicros, MonthlyCost: ledger.FormatMicros(r.MonthlyCostMicros)}
		if !r.Forecast.IsZero() {
			p.Forecast = r.Forecast.Format(time.DateOnly)
		}
		out = append(out, p)
	}
	wr := o.waitRule()
	waits, err := capacity.EvaluateWaits(c.Request().Context(), s.opts.Store, o.Cluster, at, wr, o.PricesMicros)
	if err != nil {
		return err
	}
	queues := []QueueWaitPoint{}
	for _, w := range waits {
		p := QueueWaitPoint{ClusterQueue: w.ClusterQueue, Flavor: w.Flavor, Fired: w.Fired, Why: w.Why, From: w.From, To: w.To, Hours: w.Hours,
			HoursWithData: w.HoursWithData, WaitSeconds: seconds(w.Wait), LastDaySeconds: seconds(w.LastDay), Admitted: w.Admitted,
			Pending: w.Pending, PendingGPUs: w.PendingGPUs, Daily: []DayPoint{}, PurchaseGPUs: w.PurchaseGPUs,
			MonthlyCostMicros: w.MonthlyCostMicros, MonthlyCost: ledger.FormatMicros(w.MonthlyCostMicros)}
		for _, d := range w.Daily {
			p.Daily = append(p.Daily, DayPoint{Day: d.Day.Format(time.DateOnly), WaitSeconds: seconds(d.Wait), Admitted: d.Admitted})
		}
		if !w.Forecast.IsZero() {
			p.Forecast = w.Forecast.Format(time.DateOnly)
		}
		queues = append(queues, p)
	}
	return c.JSON(http.StatusOK, map[string]any{"cluster": o.Cluster, "at": at.UTC(), "currency": s.opts.Report.Currency,
		"thresholdShare": rule.Threshold, "windowDays": rule.Window.Hours() / 24, "flavors": out,
		"waitQuantile": wr.Quantile, "waitThresholdSeconds": wr.Threshold.Seconds(), "waitWindowDays": wr.Window.Hours() / 24, "queues": queues})
}

// budgets answers GET /api/v1/budgets?at=&team=: each budgeted team's
// month-to-date and forecast spend as of at; a team-scoped token sees its
// own team only.
func (s *Server) budgets(c echo.Context) error {
	v, err := params(c, "at", "team")
	if err != nil {
		return err
	}
	at, err := s.capacityNow(v.Get("at"))
	if err != nil {
		return err
	}
	team, err := teamFilter(c, v.Get("team"))
	if err != nil {
		return err
	}
	o := s.opts.Capacity
	budgets := o.Budgets
	if team != "" {
		budgets = map[string]int64{}
		if b, ok := o.Budgets[team]; ok {
			budgets[team] = b
		}
	}
	bs, err := capacity.Budgets(c.Request().Context(), s.opts.Store, o.Cluster, budgets, at)
	if err != nil {
		return err
	}
	out := []BudgetPoint{}
	for _, b := range bs {
		out = append(out, BudgetPoint{Team: b.Team, BudgetMicros: b.BudgetMicros, MonthToDateMicros: b.MonthToDateMicros, ForecastMicros: b.ForecastMicros,
			Budget: ledger.FormatMicros(b.BudgetMicros), MonthToDate: ledger.FormatMicros(b.MonthToDateMicros), Forecast: ledger.FormatMicros(b.ForecastMicros),
			Level: b.Level, ForecastLevel: b.ForecastLevel})
	}
	return c.JSON(http.StatusOK, map[string]any{"cluster": o.Cluster, "at": at.UTC(), "currency": s.opts.Report.Currency,
		"month": ledger.StepMonth.Truncate(at).Format("2006-01"), "budgets": out})
}
