package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ledger"
)

// parseTime accepts RFC 3339, a date (YYYY-MM-DD) or a month (YYYY-MM), in UTC.
func parseTime(field, v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02", "2006-01"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badf("%s=%q is not a time; want RFC 3339 (2026-10-01T00:00:00Z), a date (2026-10-01) or a month (2026-10)", field, v)
}

// CostPoint is one bucket of the cost API's answer.
type CostPoint struct {
	Start                 time.Time `json:"start"`
	Cluster               string    `json:"cluster,omitempty"`
	Team                  string    `json:"team,omitempty"`
	Namespace             string    `json:"namespace,omitempty"`
	LocalQueue            string    `json:"localQueue,omitempty"`
	ClusterQueue          string    `json:"clusterQueue,omitempty"`
	Flavor                string    `json:"flavor,omitempty"`
	Borrowed              bool      `json:"borrowed,omitempty"`
	GPUHours              float64   `json:"gpuHours"`
	ActiveGPUHours        float64   `json:"activeGpuHours"`
	UnmeasuredGPUHours    float64   `json:"unmeasuredGpuHours"`
	CostMicros            int64     `json:"costMicros"`
	IdleCostMicros        int64     `json:"idleCostMicros"`
	UnmeasuredCostMicros  int64     `json:"unmeasuredCostMicros"`
	UnallocatedCostMicros int64     `json:"unallocatedCostMicros"`
	Cost                  string    `json:"cost"`
	ActiveCost            string    `json:"activeCost"`
	IdleCost              string    `json:"idleCost"`
	UnmeasuredCost        string    `json:"unmeasuredCost"`
	UnallocatedCost       string    `json:"unallocatedCost"`
	EnergyKWh             float64   `json:"energyKWh"`
	EnergyCostMicros      int64     `json:"energyCostMicros"`
	EnergyCost            string    `json:"energyCost"`
	// Flagged is set when an hour of the bucket is flagged (see
	// CostResponse.Flags): its figures may be short.
	Flagged bool `json:"flagged,omitempty"`
	// Restated is set when a rewrite changed the figures of an hour of the
	// bucket (of its team and cluster, where the point has them) after
	// they were first written: these are the figures after it. Adjusted is
	// set when a correction came after the hour's month was closed: these
	// are the figures invoiced, and the difference is billed in a later
	// month. GET /api/v1/admin/restatements says what changed.
	Restated bool `json:"restated,omitempty"`
	Adjusted bool `json:"adjusted,omitempty"`
}

// FlagPoint is a flag on hours of a cluster: their rows may not say all
// that happened, and why.
type FlagPoint struct {
	Cluster string    `json:"cluster"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Reason  string    `json:"reason"`
	Detail  string    `json:"detail"`
	At      time.Time `json:"at"`
}

// CostResponse is the cost API's answer.
type CostResponse struct {
	Currency string      `json:"currency"`
	Step     string      `json:"step"`
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	GroupBy  []string    `json:"groupBy"`
	Points   []CostPoint `json:"points"`
	// TotalCostMicros sums every point: with no filter it is the cluster's
	// cost over the range.
	TotalCostMicros int64  `json:"totalCostMicros"`
	TotalCost       string `json:"totalCost"`
	// Flags are the flags on hours of the range (of the cluster asked
	// for): acknowledged telemetry lost from the write-ahead log, say.
	// The points over those hours are Flagged.
	Flags []FlagPoint `json:"flags"`
}

// readQuery parses a read route's query strictly (it takes from, to, team,
// cluster and extra) and returns it with the range and the team the read is
// filtered to (see teamFilter).
func (s *Server) readQuery(c echo.Context, extra ...string) (v url.Values, from, to time.Time, team string, err error) {
	if v, err = params(c, append([]string{"from", "to", "team", "cluster"}, extra...)...); err != nil {
		return
	}
	if from, to, err = s.timeRange(v); err != nil {
		return
	}
	team, err = teamFilter(c, v.Get("team"))
	return
}

// timeRange reads the from and to parameters.
func (s *Server) timeRange(v url.Values) (from, to time.Time, err error) {
	if from, err = parseTime("from", v.Get("from")); err != nil {
		return
	}
	if to, err = parseTime("to", v.Get("to")); err != nil {
		return
	}
	if !to.After(from) {
		return from, to, badf("to=%s is not after from=%s; want a non-empty range", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	if to.Sub(from) > s.opts.MaxRange {
		return from, to, badf("range %s is longer than the %s allowed; narrow from/to", to.Sub(from), s.opts.MaxRange)
	}
	return from, to, nil
}

// cost answers GET /api/v1/cost?from=&to=&step=hour|day|month&groupBy=team,flavor&team=&cluster=
func (s *Server) cost(c echo.Context) error {
	v, from, to, team, err := s.readQuery(c, "step", "groupBy")
	if err != nil {
		return err
	}
	stepName := v.Get("step")
	if stepName == "" {
		stepName = "day"
	}
	step, ok := ledger.ParseStep(stepName)
	if !ok {
		return badf("step=%q is not a step; want hour, day or month", stepName)
	}
	group := []ledger.Dimension{ledger.DimTeam}
	if g := v.Get("groupBy"); g != "" {
		group = group[:0]
		for _, d := range strings.Split(g, ",") {
			dim := ledger.Dimension(strings.TrimSpace(d))
			valid := false
			for _, known := range ledger.Dimensions {
				valid = valid || known == dim
			}
			if !valid {
				return badf("groupBy=%q names unknown dimension %q; want a comma-separated list of %v", g, d, ledger.Dimensions)
			}
			group = append(group, dim)
		}
	}
	rows, err := s.opts.Store.Query(c.Request().Context(), ledger.Query{
		From: from, To: to, Step: step, GroupBy: group, Team: team, Cluster: v.Get("cluster"),
	})
	if err != nil {
		return err
	}
	flags, err := s.opts.Store.HourFlags(c.Request().Context(), v.Get("cluster"), from, to)
	if err != nil {
		return err
	}
	restated, err := s.opts.Store.Restatements(c.Request().Context(), v.Get("cluster"), from, to)
	if err != nil {
		return err
	}
	marks := restatedBuckets(restated, step)
	resp := CostResponse{Currency: s.opts.Report.Currency, Step: step.String(), From: from, To: to, Points: []CostPoint{}, Flags: []FlagPoint{}}
	for _, f := range flags {
		resp.Flags = append(resp.Flags, FlagPoint{Cluster: f.Cluster, From: f.From, To: f.To, Reason: f.Reason, Detail: f.Detail, At: f.At})
	}
	for _, d := range group {
		resp.GroupBy = append(resp.GroupBy, string(d))
	}
	for _, r := range rows {
		resp.Points = append(resp.Points, CostPoint{
			Start: r.Hour, Cluster: r.Cluster, Team: r.Team, Namespace: r.Namespace, LocalQueue: r.LocalQueue,
			ClusterQueue: r.ClusterQueue, Flavor: r.Flavor, Borrowed: r.Borrowed,
			GPUHours: r.GPUSeconds / 3600, ActiveGPUHours: r.ActiveGPUSeconds / 3600, UnmeasuredGPUHours: r.UnmeasuredGPUSeconds / 3600,
			CostMicros: r.CostMicros, IdleCostMicros: r.IdleCostMicros, UnmeasuredCostMicros: r.UnmeasuredCostMicros,
			UnallocatedCostMicros: r.UnallocatedCostMicros,
			Cost:                  ledger.FormatMicros(r.CostMicros), ActiveCost: ledger.FormatMicros(r.ActiveCostMicros()),
			IdleCost: ledger.FormatMicros(r.IdleCostMicros), UnmeasuredCost: ledger.FormatMicros(r.UnmeasuredCostMicros),
			UnallocatedCost: ledger.FormatMicros(r.UnallocatedCostMicros),
			EnergyKWh:       r.EnergyJoules / 3.6e6, EnergyCostMicros: r.EnergyCostMicros, EnergyCost: ledger.FormatMicros(r.EnergyCostMicros),
			Flagged: flagged(flags, r.Cluster, r.Hour, step),
		})
		bits := marks[restatedKey{r.Cluster, r.Team, r.Hour.UTC()}]
		p := &resp.Points[len(resp.Points)-1]
		p.Restated, p.Adjusted = bits&1 != 0, bits&2 != 0
		resp.TotalCostMicros += r.CostMicros
	}
	resp.TotalCost = ledger.FormatMicros(resp.TotalCostMicros)
	return c.JSON(http.StatusOK, resp)
}

// flagged says whether a flag covers an hour of the bucket of step that
// starts at start, of cluster (any cluster when the points are not per
// cluster).
func flagged(flags []ledger.HourFlag, cluster string, start time.Time, step ledger.Step) bool {
	end := bucketEnd(start, step)
	for _, f := range flags {
		if (cluster == "" || f.Cluster == cluster) && f.From.Before(end) && f.To.After(start) {
			return true
		}
	}
	return false
}

// restatedBuckets indexes restatements by the bucket of step they fall
// in, per cluster and team and with either or both left out (a point
// that is not grouped by them has them empty): bit 1 restated, bit 2
// adjusted.
func restatedBuckets(rs []ledger.Restatement, step ledger.Step) map[restatedKey]uint8 {
	out := make(map[restatedKey]uint8)
	for i := range rs {
		r := &rs[i]
		bit := uint8(1)
		if r.Adjustment() {
			bit = 2
		}
		start := step.Truncate(r.Hour)
		for _, c := range []string{r.Cluster, ""} {
			for _, t := range []string{r.Team, ""} {
				out[restatedKey{c, t, start}] |= bit
			}
		}
	}
	return out
}

type restatedKey struct {
	cluster, team string
	start         time.Time
}

// bucketEnd is the end of the bucket of step that starts at start.
func bucketEnd(start time.Time, step ledger.Step) time.Time {
	switch step {
	case ledger.StepDay:
		return start.AddDate(0, 0, 1)
	case ledger.StepMonth:
		return start.AddDate(0, 1, 0)
	}
	return start.Add(time.Hour)
}

// WorkloadPoint is one workload of the workloads API's answer.
type WorkloadPoint struct {
	Cluster              string  `json:"cluster"`
	Team                 string  `json:"team"`
	Namespace            string  `json:"namespace"`
	Kind                 string  `json:"kind"`
	Name                 string  `json:"name"`
	GPUHours             float64 `json:"gpuHours"`
	ActiveGPUHours       float64 `json:"activeGpuHours"`
	IdleGPUHours         float64 `json:"idleGpuHours"`
	UnmeasuredGPUHours   float64 `json:"unmeasuredGpuHours"`
	CostMicros           int64   `json:"costMicros"`
	IdleCostMicros       int64   `json:"idleCostMicros"`
	UnmeasuredCostMicros int64   `json:"unmeasuredCostMicros"`
	Cost                 string  `json:"cost"`
	IdleCost             string  `json:"idleCost"`
	UnmeasuredCost       string  `json:"unmeasuredCost"`
}

// workloads answers GET /api/v1/workloads?from=&to=&team=&cluster=&limit=20:
// the workloads that paid the most for GPUs held idle.
func (s *Server) workloads(c echo.Context) error {
	v, from, to, team, err := s.readQuery(c, "limit")
	if err != nil {
		return err
	}
	limit := 20
	if l := v.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 1000 {
			return badf("limit=%q is not a count; want 1 to 1000", l)
		}
	}
	rows, err := s.opts.Store.TopWorkloads(c.Request().Context(), ledger.Query{From: from, To: to, Team: team, Cluster: v.Get("cluster")}, limit)
	if err != nil {
		return err
	}
	out := make([]WorkloadPoint, 0, len(rows))
	for _, w := range rows {
		out = append(out, WorkloadPoint{Cluster: w.Cluster, Team: w.Team, Namespace: w.Namespace, Kind: w.Kind, Name: w.Name,
			GPUHours: w.GPUSeconds / 3600, ActiveGPUHours: w.ActiveGPUSeconds / 3600,
			IdleGPUHours: idleGPUHours(w), UnmeasuredGPUHours: w.UnmeasuredGPUSeconds / 3600,
			CostMicros: w.CostMicros, IdleCostMicros: w.IdleCostMicros, UnmeasuredCostMicros: w.UnmeasuredCostMicros,
			Cost: ledger.FormatMicros(w.CostMicros), IdleCost: ledger.FormatMicros(w.IdleCostMicros), UnmeasuredCost: ledger.FormatMicros(w.UnmeasuredCostMicros)})
	}
	return c.JSON(http.StatusOK, WorkloadsResponse{Currency: s.opts.Report.Currency, From: from, To: to, Workloads: out})
}

// WorkloadsResponse is GET /api/v1/workloads's answer.
type WorkloadsResponse struct {
	Currency  string          `json:"currency"`
	From      time.Time       `json:"from"`
	To        time.Time       `json:"to"`
	Workloads []WorkloadPoint `json:"workloads"`
}

// idleGPUHours is a workload's held GPU time that was neither active nor
// unmeasured, never below zero: the three are sums of floats, and a fully
// busy workload's difference can round to a hair under it.
func idleGPUHours(w ledger.WorkloadRow) float64 {
	return max(w.GPUSeconds-w.ActiveGPUSeconds-w.UnmeasuredGPUSeconds, 0) / 3600
}
