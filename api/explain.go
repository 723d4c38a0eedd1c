package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// ExplainLine is one line of an explanation (ledger.Line).
type ExplainLine struct {
	Kind         string `json:"kind"`
	Cluster      string `json:"cluster"`
	Team         string `json:"team"`
	Namespace    string `json:"namespace,omitempty"`
	LocalQueue   string `json:"localQueue,omitempty"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Flavor       string `json:"flavor"`
	Node         string `json:"node,omitempty"`
	GPU          string `json:"gpu,omitempty"`
	MIG          string `json:"mig,omitempty"`
	Pod          string `json:"pod,omitempty"`
	WorkloadKind string `json:"workloadKind,omitempty"`
	Workload     string `json:"workload,omitempty"`
	// RateMicrosPerHour is the whole GPU's hourly price.
	RateMicrosPerHour int64  `json:"rateMicrosPerHour,omitempty"`
	Rate              string `json:"rate,omitempty"`
	// RateSource says where the rate comes from: the price book entry,
	// the on-prem amortisation's terms, or a configured price.
	RateSource         string  `json:"rateSource,omitempty"`
	GPUHours           float64 `json:"gpuHours"`
	ActiveGPUHours     float64 `json:"activeGpuHours"`
	IdleGPUHours       float64 `json:"idleGpuHours"`
	UnmeasuredGPUHours float64 `json:"unmeasuredGpuHours"`
	ExplainFigures
}

// ExplainFigures are the money of a line or of a total.
type ExplainFigures struct {
	CostMicros            int64  `json:"costMicros"`
	IdleCostMicros        int64  `json:"idleCostMicros"`
	UnmeasuredCostMicros  int64  `json:"unmeasuredCostMicros"`
	UnallocatedCostMicros int64  `json:"unallocatedCostMicros"`
	EnergyCostMicros      int64  `json:"energyCostMicros"`
	Cost                  string `json:"cost"`
}

func figuresOf(cost, idle, unmeasured, unallocated, energy int64) ExplainFigures {
	return ExplainFigures{CostMicros: cost, IdleCostMicros: idle, UnmeasuredCostMicros: unmeasured, UnallocatedCostMicros: unallocated,
		EnergyCostMicros: energy, Cost: ledger.FormatMicros(cost)}
}

// ExplainResponse is GET /api/v1/explain's answer (and gpuledger explain
// -format json's).
type ExplainResponse struct {
	Currency  string    `json:"currency"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Cluster   string    `json:"cluster,omitempty"`
	Team      string    `json:"team,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Workload  string    `json:"workload,omitempty"`
	// Ledger is the figure explained: the team's (or every team's) rows,
	// or the workload's rows.
	Ledger ExplainFigures `json:"ledger"`
	// Lines sums every line; LineCount counts them; Reconciled says the
	// lines sum to the ledger's figure to the micro-unit.
	Lines      ExplainFigures `json:"lines"`
	LineCount  int            `json:"lineCount"`
	Reconciled bool           `json:"reconciled"`
	// Top are the largest lines, at most limit of them.
	Top          []ExplainLine      `json:"top"`
	Restatements []RestatementPoint `json:"restatements"`
	// Rule says how a line's money is made.
	Rule string `json:"rule"`
}

// explainRule says how the lines' money is made.
const explainRule = "Each GPU's hour costs its rate (the flavor's price, from the price book or the on-prem amortisation). " +
	"Its holders pay for the part of the hour each held (a MIG slice its share of the GPU's compute slices), split into busy, " +
	"idle and unmeasured time, by largest remainder so that the parts sum to the rate to the micro-unit; what nobody held is an " +
	"unallocated line, which the configured unallocated policy (platform, quota or usage) may share out to teams " +
	"(unallocated-share lines, and a shared-out line taking it back from the unallocated team). Energy is priced once for the " +
	"cluster's hour and split over the lines by the energy each drew, beside the cost, not part of it."

// NewExplainResponse is the API's form of an explanation.
func NewExplainResponse(ex *reports.Explanation, currency string) ExplainResponse {
	q := &ex.Query
	l, t := &ex.Ledger, &ex.Total
	r := ExplainResponse{Currency: currency, From: q.From, To: q.To, Cluster: q.Cluster, Team: q.Team, Namespace: q.Namespace, Workload: q.Workload,
		Ledger:     figuresOf(l.CostMicros, l.IdleCostMicros, l.UnmeasuredCostMicros, l.UnallocatedCostMicros, l.EnergyCostMicros),
		Lines:      figuresOf(t.CostMicros, t.IdleCostMicros, t.UnmeasuredCostMicros, t.UnallocatedCostMicros, t.EnergyCostMicros),
		LineCount:  ex.LineCount,
		Reconciled: ex.Reconciled, Top: []ExplainLine{}, Restatements: []RestatementPoint{}, Rule: explainRule}
	for i := range ex.Lines {
		x := &ex.Lines[i]
		el := ExplainLine{Kind: string(x.Kind), Cluster: x.Cluster, Team: x.Team, Namespace: x.Namespace, LocalQueue: x.LocalQueue,
			ClusterQueue: x.ClusterQueue, Flavor: x.Flavor, Node: x.Node, GPU: x.GPU, MIG: x.MIG, Pod: x.Pod, WorkloadKind: x.WorkloadKind,
			Workload: x.Workload, RateMicrosPerHour: x.RateMicrosPerHour, RateSource: x.RateSource, GPUHours: x.GPUSeconds / 3600, ActiveGPUHours: x.ActiveGPUSeconds / 3600,
			IdleGPUHours:       max(x.GPUSeconds-x.ActiveGPUSeconds-x.UnmeasuredGPUSeconds, 0) / 3600,
			UnmeasuredGPUHours: x.UnmeasuredGPUSeconds / 3600,
			ExplainFigures:     figuresOf(x.CostMicros, x.IdleCostMicros, x.UnmeasuredCostMicros, x.UnallocatedCostMicros, x.EnergyCostMicros)}
		if x.RateMicrosPerHour > 0 {
			el.Rate = ledger.FormatMicros(x.RateMicrosPerHour)
		}
		r.Top = append(r.Top, el)
	}
	r.Restatements = restatementPoints(ex.Restatements)
	return r
}

// explain answers GET /api/v1/explain?from=&to=&team=&cluster=&workload=namespace/name&limit=
func (s *Server) explain(c echo.Context) error {
	v, from, to, team, err := s.readQuery(c, "workload", "limit")
	if err != nil {
		return err
	}
	q := reports.ExplainQuery{From: from, To: to, Cluster: v.Get("cluster"), Team: team}
	if w := v.Get("workload"); w != "" {
		ns, name, ok := strings.Cut(w, "/")
		if !ok || ns == "" || name == "" {
			return badf("workload=%q is not a workload; want namespace/name, such as ml/train-0042", w)
		}
		q.Namespace, q.Workload = ns, name
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10_000 {
			return badf("limit=%q is not a line count; want 1 to 10000", l)
		}
		q.Limit = n
	}
	ex, err := reports.Explain(c.Request().Context(), s.opts.Store, q)
	if errors.Is(err, reports.ErrNoLines) {
		return echo.NewHTTPError(http.StatusNotImplemented, "this ledger keeps no lines to explain its figures: GET /api/v1/cost answers per team, queue and flavor")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, NewExplainResponse(&ex, s.opts.Report.Currency))
}
