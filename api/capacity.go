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
type CapacityOptions capacity.Settings

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

// VerdictPoint is a trigger's verdict (capacity.Verdict), as both the
// flavors' and the queues' points give it.
type VerdictPoint struct {
	Fired bool `json:"fired"`
	// Action is buy, reclaim (held but not busy: give the idle GPUs
	// back before buying), or absent.
	Action            string        `json:"action,omitempty"`
	Reclaim           *ReclaimPoint `json:"reclaim,omitempty"`
	Why               string        `json:"why"`
	From              time.Time     `json:"from"`
	To                time.Time     `json:"to"`
	Hours             int           `json:"hours"`
	HoursWithData     int           `json:"hoursWithData"`
	Forecast          string        `json:"forecast,omitempty"`
	PurchaseGPUs      int           `json:"purchaseGpus"`
	MonthlyCostMicros int64         `json:"monthlyCostMicros"`
	MonthlyCost       string        `json:"monthlyCost"`
}

// verdictPoint is v as a point.
func verdictPoint(v *capacity.Verdict) VerdictPoint {
	p := VerdictPoint{Fired: v.Fired, Action: v.Action, Reclaim: reclaimPoint(v.Reclaim), Why: v.Why, From: v.From, To: v.To, Hours: v.Hours,
		HoursWithData: v.HoursWithData, PurchaseGPUs: v.PurchaseGPUs, MonthlyCostMicros: v.MonthlyCostMicros, MonthlyCost: ledger.FormatMicros(v.MonthlyCostMicros)}
	if !v.Forecast.IsZero() {
		p.Forecast = v.Forecast.Format(time.DateOnly)
	}
	return p
}

// QueueWaitPoint is the wait trigger's verdict on one ClusterQueue. Waits
// are seconds, absent when nothing was admitted or pending.
type QueueWaitPoint struct {
	ClusterQueue string `json:"clusterQueue"`
	Flavor       string `json:"flavor"`
	VerdictPoint
	WaitSeconds    *float64   `json:"waitSeconds,omitempty"`
	LastDaySeconds *float64   `json:"lastDayWaitSeconds,omitempty"`
	Admitted       float64    `json:"admitted"`
	Pending        float64    `json:"pending"`
	PendingGPUs    float64    `json:"pendingGpus"`
	Daily          []DayPoint `json:"daily"`
}

// EndpointPoint is scale-to-zero's recommendation for one inference
// endpoint over the window (vLLM's series in the ledger), beside KEDA's
// default cooldown.
type EndpointPoint struct {
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	Workload  string `json:"workload"`
	// SLAClass is the endpoint's class (capacity.slaClasses); empty for
	// the default.
	SLAClass        string   `json:"slaClass"`
	GPUsPerReplica  float64  `json:"gpusPerReplica"`
	LoadSeconds     float64  `json:"loadSeconds"`
	BusyShare       float64  `json:"busyShare"`
	Requests        float64  `json:"requests"`
	IdleGPUHours    float64  `json:"idleGpuHours"`
	IdleCostMicros  int64    `json:"idleCostMicros"`
	IdleCost        string   `json:"idleCost"`
	MinReplicas     int      `json:"minReplicas"`
	CooldownSeconds float64  `json:"cooldownSeconds"`
	PreWarmUTC      []string `json:"preWarmUtc"`
	SavedGPUHours   float64  `json:"savedGpuHours"`
	// ColdStartsPerDay is over DaysReported, the days the endpoint
	// reported.
	ColdStartsPerDay float64 `json:"coldStartsPerDay"`
	DaysReported     int     `json:"daysReported"`
	// P95ExtraSeconds and WaitingRequests are upper bounds (what the
	// ledger counted within the load after each gap it scales down in;
	// every request where it counted none).
	P95ExtraSeconds       float64 `json:"p95ExtraSecondsAtMost"`
	WaitingRequests       float64 `json:"waitingRequestsAtMost"`
	NetSavingMicros       int64   `json:"netSavingMicros"`
	NetSaving             string  `json:"netSaving"`
	KEDADefaultSaved      float64 `json:"kedaDefaultSavedGpuHours"`
	KEDADefaultColdPerDay float64 `json:"kedaDefaultColdStartsPerDay"`
	KEDADefaultNetSaving  string  `json:"kedaDefaultNetSaving"`
}

// endpointPoints recommends for the endpoints of [from, to).
func (s *Server) endpointPoints(c echo.Context, from, to time.Time) ([]EndpointPoint, error) {
	o := s.opts.Capacity.Endpoints
	if o.Default <= 0 {
		o = capacity.DefaultEndpointOptions
	}
	advice, _, err := capacity.EvaluateEndpoints(c.Request().Context(), s.opts.Store, s.opts.Capacity.Cluster, from, to, o)
	if err != nil {
		return nil, err
	}
	out := []EndpointPoint{}
	for _, a := range advice {
		r := a.Rec
		p := EndpointPoint{Namespace: a.Namespace, Model: a.Model, SLAClass: a.Class, GPUsPerReplica: r.ColdStart.GPUsPerReplica, LoadSeconds: r.ColdStart.Load.Seconds(),
			Requests: a.Requests, IdleGPUHours: a.IdleGPUSeconds / 3600, IdleCostMicros: a.IdleCostMicros, IdleCost: ledger.FormatMicros(a.IdleCostMicros),
			MinReplicas: r.MinReplicas, PreWarmUTC: []string{}, SavedGPUHours: r.Best.SavedGPUHours, ColdStartsPerDay: r.Best.ColdStartsPerDay,
			DaysReported: a.Days, P95ExtraSeconds: r.Best.P95ExtraLatency.Seconds(), WaitingRequests: r.Best.AffectedRequests, NetSavingMicros: r.Best.NetSavingMicros, NetSaving: ledger.FormatMicros(r.Best.NetSavingMicros),
			KEDADefaultSaved: r.Default.SavedGPUHours, KEDADefaultColdPerDay: r.Default.ColdStartsPerDay, KEDADefaultNetSaving: ledger.FormatMicros(r.Default.NetSavingMicros)}
		if a.Name != "" {
			p.Workload = a.Kind + "/" + a.Name
		}
		if a.ReportedSeconds > 0 {
			p.BusyShare = a.BusySeconds / a.ReportedSeconds
		}
		if r.MinReplicas == 0 {
			p.CooldownSeconds = r.Best.Policy.Cooldown.Seconds()
		}
		for _, w := range r.Best.Policy.PreWarm {
			p.PreWarmUTC = append(p.PreWarmUTC, w.String())
		}
		out = append(out, p)
	}
	return out, nil
}

// DayPoint is one day's quantile wait of a ClusterQueue.
type DayPoint struct {
	Day         string   `json:"day"`
	WaitSeconds *float64 `json:"waitSeconds,omitempty"`
	Admitted    float64  `json:"admitted"`
}

// ReclaimPoint is the evidence of a reclaim verdict.
type ReclaimPoint struct {
	IdleGPUs              float64       `json:"idleGpus"`
	HeldActive            float64       `json:"heldActiveShare"`
	IdleCostMonthlyMicros int64         `json:"idleCostMonthlyMicros"`
	IdleCostMonthly       string        `json:"idleCostMonthly"`
	Holders               []HolderPoint `json:"holders"`
}

// HolderPoint is a namespace holding GPUs idle.
type HolderPoint struct {
	Team                  string  `json:"team"`
	Namespace             string  `json:"namespace"`
	ClusterQueue          string  `json:"clusterQueue,omitempty"`
	IdleGPUs              float64 `json:"idleGpus"`
	HeldGPUs              float64 `json:"heldGpus"`
	IdleCostMonthlyMicros int64   `json:"idleCostMonthlyMicros"`
	IdleCostMonthly       string  `json:"idleCostMonthly"`
	// Workloads are its most idle workloads over the window (over all the
	// namespace's flavors).
	Workloads []IdleWorkloadPoint `json:"workloads"`
}

// IdleWorkloadPoint is a workload that held GPUs idle over the window.
type IdleWorkloadPoint struct {
	Kind           string  `json:"kind"`
	Name           string  `json:"name"`
	IdleGPUHours   float64 `json:"idleGpuHours"`
	IdleCostMicros int64   `json:"idleCostMicros"`
	IdleCost       string  `json:"idleCost"`
}

func reclaimPoint(rc *capacity.Reclaim) *ReclaimPoint {
	if rc == nil {
		return nil
	}
	p := &ReclaimPoint{IdleGPUs: rc.IdleGPUs, HeldActive: rc.HeldActive, IdleCostMonthlyMicros: rc.IdleCostMonthlyMicros,
		IdleCostMonthly: ledger.FormatMicros(rc.IdleCostMonthlyMicros), Holders: []HolderPoint{}}
	for _, h := range rc.Holders {
		hp := HolderPoint{Team: h.Team, Namespace: h.Namespace, ClusterQueue: h.ClusterQueue, IdleGPUs: h.IdleGPUs,
			HeldGPUs: h.HeldGPUs, IdleCostMonthlyMicros: h.IdleCostMonthlyMicros, IdleCostMonthly: ledger.FormatMicros(h.IdleCostMonthlyMicros),
			Workloads: []IdleWorkloadPoint{}}
		for _, w := range h.Workloads {
			hp.Workloads = append(hp.Workloads, IdleWorkloadPoint{Kind: w.Kind, Name: w.Name, IdleGPUHours: w.IdleGPUSeconds() / 3600,
				IdleCostMicros: w.IdleCostMicros, IdleCost: ledger.FormatMicros(w.IdleCostMicros)})
		}
		p.Holders = append(p.Holders, hp)
	}
	return p
}

func seconds(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// ExpansionPoint is the expansion trigger's verdict on one flavor.
type ExpansionPoint struct {
	Flavor string `json:"flavor"`
	VerdictPoint
	GPUs      float64 `json:"gpus"`
	Allocated float64 `json:"allocatedShare"`
	Active    float64 `json:"activeShare"`
	DailyMin  float64 `json:"dailyAllocatedMin"`
	DailyMax  float64 `json:"dailyAllocatedMax"`
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
	// Final is set for a month that has ended: monthToDate is its whole
	// spend, and the forecast is it.
	Final bool `json:"final"`
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
		out = append(out, ExpansionPoint{Flavor: r.Flavor, VerdictPoint: verdictPoint(&r.Verdict), GPUs: r.GPUs, Allocated: r.Allocated,
			Active: r.Active, DailyMin: r.DailyMin, DailyMax: r.DailyMax})
	}
	wr := o.waitRule()
	waits, err := capacity.EvaluateWaits(c.Request().Context(), s.opts.Store, o.Cluster, at, wr, o.PricesMicros)
	if err != nil {
		return err
	}
	queues := []QueueWaitPoint{}
	for _, w := range waits {
		p := QueueWaitPoint{ClusterQueue: w.ClusterQueue, Flavor: w.Flavor, VerdictPoint: verdictPoint(&w.Verdict), WaitSeconds: seconds(w.Wait),
			LastDaySeconds: seconds(w.LastDay), Admitted: w.Admitted, Pending: w.Pending, PendingGPUs: w.PendingGPUs, Daily: []DayPoint{}}
		for _, d := range w.Daily {
			p.Daily = append(p.Daily, DayPoint{Day: d.Day.Format(time.DateOnly), WaitSeconds: seconds(d.Wait), Admitted: d.Admitted})
		}
		queues = append(queues, p)
	}
	// Scale-to-zero over the utilisation rule's window.
	eps, err := s.endpointPoints(c, at.Add(-rule.Window), at)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, CapacityResponse{Cluster: o.Cluster, At: at.UTC(), Currency: s.opts.Report.Currency,
		ThresholdShare: rule.Threshold, Measure: string(rule.Measure), WindowDays: rule.Window.Hours() / 24, Flavors: out,
		WaitQuantile: wr.Quantile, WaitThresholdSeconds: wr.Threshold.Seconds(), WaitWindowDays: wr.Window.Hours() / 24, Queues: queues,
		Endpoints: eps})
}

// CapacityResponse is GET /api/v1/capacity's answer: the expansion
// trigger per flavor with its rule, the queue-wait trigger per
// ClusterQueue with its rule, and scale-to-zero per inference endpoint.
type CapacityResponse struct {
	Cluster              string           `json:"cluster"`
	At                   time.Time        `json:"at"`
	Currency             string           `json:"currency"`
	ThresholdShare       float64          `json:"thresholdShare"`
	Measure              string           `json:"measure"`
	WindowDays           float64          `json:"windowDays"`
	Flavors              []ExpansionPoint `json:"flavors"`
	WaitQuantile         float64          `json:"waitQuantile"`
	WaitThresholdSeconds float64          `json:"waitThresholdSeconds"`
	WaitWindowDays       float64          `json:"waitWindowDays"`
	Queues               []QueueWaitPoint `json:"queues"`
	Endpoints            []EndpointPoint  `json:"endpoints"`
}

// budgets answers GET /api/v1/budgets?at=&team=: each budgeted team's
// month-to-date and forecast spend as of at; a team-scoped token sees its
// own team only.
func (s *Server) budgets(c echo.Context) error {
	v, err := params(c, "at", "team", "month")
	if err != nil {
		return err
	}
	at, err := s.capacityNow(v.Get("at"))
	if err != nil {
		return err
	}
	month := ledger.StepMonth.Truncate(at)
	if m := v.Get("month"); m != "" {
		if month, err = time.Parse("2006-01", m); err != nil {
			return badf("month=%q is not a month; want YYYY-MM such as 2026-10", m)
		}
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
	bs, err := capacity.BudgetsFor(c.Request().Context(), s.opts.Store, o.Cluster, budgets, month, at)
	if err != nil {
		return err
	}
	out := []BudgetPoint{}
	for _, b := range bs {
		out = append(out, BudgetPoint{Team: b.Team, BudgetMicros: b.BudgetMicros, MonthToDateMicros: b.MonthToDateMicros, ForecastMicros: b.ForecastMicros,
			Budget: ledger.FormatMicros(b.BudgetMicros), MonthToDate: ledger.FormatMicros(b.MonthToDateMicros), Forecast: ledger.FormatMicros(b.ForecastMicros),
			Level: b.Level, ForecastLevel: b.ForecastLevel, Final: b.Final})
	}
	return c.JSON(http.StatusOK, BudgetsResponse{Cluster: o.Cluster, At: at.UTC(), Currency: s.opts.Report.Currency,
		Month: month.Format("2006-01"), Budgets: out})
}

// BudgetsResponse is GET /api/v1/budgets's answer.
type BudgetsResponse struct {
	Cluster  string        `json:"cluster"`
	At       time.Time     `json:"at"`
	Currency string        `json:"currency"`
	Month    string        `json:"month"`
	Budgets  []BudgetPoint `json:"budgets"`
}
