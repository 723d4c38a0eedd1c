package api

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ledger"
)

// OpenCost's allocation API (GET /allocation), for the dashboards and
// tools built on it: the same query parameters (window, aggregate, step,
// accumulate, includeIdle) and the same answer, {code, data: [set, …]},
// each set a map from the aggregate's name to an allocation whose GPU
// fields are the ledger's and whose other resources are 0. Names follow
// OpenCost: several aggregates joined by "/", "__idle__" for capacity
// nobody held (the ledger's _unallocated), "__unallocated__" for cost that
// lacks the aggregate's property (pods of no team, without a queue label,
// without an owning controller). Over a window every set's totalCost adds
// up to the ledger's cost, to the micro-unit: the chargeback's TOTAL for a
// month.

// Allocation is one entry of an allocation set, in OpenCost's field names.
type Allocation struct {
	Name       string               `json:"name"`
	Properties AllocationProperties `json:"properties"`
	Window     AllocationWindow     `json:"window"`
	Start      string               `json:"start"`
	End        string               `json:"end"`
	Minutes    float64              `json:"minutes"`
	// The GPU fields: GPUCount is the GPUs held on average over the set
	// (whole-GPU equivalents), GPUHours their hours, GPUCost their cost
	// (held: active, idle and unmeasured; or unallocated, for __idle__),
	// GPUEfficiency the busy share of the measured hours held.
	GPUCount      float64 `json:"gpuCount"`
	GPUHours      float64 `json:"gpuHours"`
	GPUCost       float64 `json:"gpuCost"`
	GPUEfficiency float64 `json:"gpuEfficiency"`
	// gpuledger measures GPUs only: the other resources are 0.
	CPUCores         float64 `json:"cpuCores"`
	CPUCoreHours     float64 `json:"cpuCoreHours"`
	CPUCost          float64 `json:"cpuCost"`
	RAMBytes         float64 `json:"ramBytes"`
	RAMByteHours     float64 `json:"ramByteHours"`
	RAMCost          float64 `json:"ramCost"`
	PVCost           float64 `json:"pvCost"`
	NetworkCost      float64 `json:"networkCost"`
	LoadBalancerCost float64 `json:"loadBalancerCost"`
	SharedCost       float64 `json:"sharedCost"`
	ExternalCost     float64 `json:"externalCost"`
	TotalCost        float64 `json:"totalCost"`
	TotalEfficiency  float64 `json:"totalEfficiency"`

	micros, activeSec, heldSec, unmeasuredSec int64
}

// AllocationProperties are the properties an allocation was aggregated by.
type AllocationProperties struct {
	Cluster        string            `json:"cluster,omitempty"`
	Namespace      string            `json:"namespace,omitempty"`
	Controller     string            `json:"controller,omitempty"`
	ControllerKind string            `json:"controllerKind,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// AllocationWindow is a set's window.
type AllocationWindow struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// AllocationResponse is /allocation's answer.
type AllocationResponse struct {
	Code int                      `json:"code"`
	Data []map[string]*Allocation `json:"data"`
}

// queueLabel is the only pod label the ledger keeps: Kueue's queue name.
const queueLabel = "kueue.x-k8s.io/queue-name"

// allocationAggregates maps OpenCost's aggregate names onto the ledger's.
var allocationAggregates = map[string]ledger.Dimension{
	"cluster":                         ledger.DimCluster,
	"namespace":                       ledger.DimNamespace,
	"team":                            ledger.DimTeam,
	"label:" + queueLabel:             ledger.DimLocalQueue,
	"label:kueue_x_k8s_io_queue_name": ledger.DimLocalQueue,
}

// allocation answers GET /allocation?window=&aggregate=&step=&accumulate=&includeIdle=
func (s *Server) allocation(c echo.Context) error {
	v, err := params(c, "window", "aggregate", "step", "accumulate", "includeIdle", "shareIdle", "idleByNode", "resolution", "team", "cluster")
	if err != nil {
		return err
	}
	from, to, err := parseWindow(v.Get("window"), time.Now().UTC())
	if err != nil {
		return err
	}
	if to.Sub(from) > s.opts.MaxRange {
		return badf("window=%q spans %s, longer than the %s allowed", v.Get("window"), to.Sub(from), s.opts.MaxRange)
	}
	team, err := teamFilter(c, v.Get("team"))
	if err != nil {
		return err
	}
	flag := func(name string, def bool) (bool, error) {
		if v.Get(name) == "" {
			return def, nil
		}
		b, err := strconv.ParseBool(v.Get(name))
		if err != nil {
			return false, badf("%s=%q is not a boolean; want true or false", name, v.Get(name))
		}
		return b, nil
	}
	accumulate, err := flag("accumulate", false)
	if err != nil {
		return err
	}
	// __idle__ is the cluster's; a team's token does not see it.
	includeIdle, err := flag("includeIdle", team == "")
	if err != nil {
		return err
	}
	if includeIdle && team != "" {
		return badf("includeIdle=true with a team's token: the cluster's idle capacity is not the team's")
	}
	for _, name := range []string{"shareIdle", "idleByNode"} {
		if b, err := flag(name, false); err != nil {
			return err
		} else if b {
			return badf("%s=true is not supported: who pays for capacity nobody held is the configuration's costPolicy; leave %s out or false", name, name)
		}
	}
	step := to.Sub(from)
	if sv := v.Get("step"); sv != "" && !accumulate {
		if step, err = parseAllocationDuration("step", sv); err != nil {
			return err
		}
		if step%time.Hour != 0 {
			return badf("step=%q is not whole hours; the ledger's resolution is the hour", sv)
		}
	}
	var dims []ledger.Dimension
	controller := false
	aggs := []string{}
	if a := v.Get("aggregate"); a != "" {
		aggs = strings.Split(a, ",")
	}
	for _, a := range aggs {
		a = strings.TrimSpace(a)
		switch {
		case a == "controller" || a == "controllerKind":
			controller = true
		case allocationAggregates[a] != "":
			dims = append(dims, allocationAggregates[a])
		default:
			return badf("aggregate=%q: %q is not one gpuledger can aggregate by; want a comma-separated list of cluster, namespace, team, controller, controllerKind or label:%s (the only pod label the ledger keeps)", v.Get("aggregate"), a, queueLabel)
		}
	}
	if controller && slices.Contains(dims, ledger.DimLocalQueue) {
		return badf("aggregate=%q: controller and the queue label cannot be combined (the ledger's workload rows carry no queue)", v.Get("aggregate"))
	}
	ctx := c.Request().Context()
	resp := AllocationResponse{Code: http.StatusOK, Data: []map[string]*Allocation{}}
	for start := from; start.Before(to); start = start.Add(step) {
		end := start.Add(step)
		if end.After(to) {
			end = to
		}
		set, err := s.allocationSet(ctx, aggs, dims, controller, start, end, team, v.Get("cluster"), includeIdle)
		if err != nil {
			return err
		}
		resp.Data = append(resp.Data, set)
	}
	return c.JSON(http.StatusOK, resp)
}

// allocationSet is one set: the ledger's rows of [from, to) by the
// aggregates.
func (s *Server) allocationSet(ctx context.Context, aggs []string, dims []ledger.Dimension, controller bool, from, to time.Time, team, cluster string, includeIdle bool) (map[string]*Allocation, error) {
	step := ledger.StepHour
	if from.Truncate(24*time.Hour).Equal(from) && to.Truncate(24*time.Hour).Equal(to) {
		step = ledger.StepDay
	}
	group := append(slices.Clone(dims), ledger.DimTeam, ledger.DimCluster)
	if controller {
		group = append(group, ledger.DimNamespace)
	}
	rows, err := s.opts.Store.Query(ctx, ledger.Query{From: from, To: to, Step: step, GroupBy: group, Team: team, Cluster: cluster})
	if err != nil {
		return nil, err
	}
	set := map[string]*Allocation{}
	add := func(name string, p AllocationProperties, micros int64, held, active, unmeasured float64) {
		a := set[name]
		if a == nil {
			a = &Allocation{Name: name, Properties: p, Window: AllocationWindow{from, to},
				Start: from.Format(time.RFC3339), End: to.Format(time.RFC3339), Minutes: to.Sub(from).Minutes()}
			set[name] = a
		}
		a.micros += micros
		a.heldSec += int64(math.Round(held))
		a.activeSec += int64(math.Round(active))
		a.unmeasuredSec += int64(math.Round(unmeasured))
	}
	var heldMicros int64
	for _, r := range rows {
		if r.Team == ledger.TeamUnallocated {
			if includeIdle {
				add("__idle__", AllocationProperties{Cluster: r.Cluster}, r.CostMicros, r.GPUSeconds, r.ActiveGPUSeconds, r.UnmeasuredGPUSeconds)
			}
			continue
		}
		if controller {
			heldMicros += r.CostMicros
			continue
		}
		name, p, ok := allocationName(aggs, r.Cluster, r.Team, r.Namespace, r.LocalQueue, "", "")
		if !ok {
			name = "__unallocated__"
		}
		add(name, p, r.CostMicros, r.GPUSeconds, r.ActiveGPUSeconds, r.UnmeasuredGPUSeconds)
	}
	if controller {
		wls, err := s.opts.Store.TopWorkloads(ctx, ledger.Query{From: from, To: to, Step: ledger.StepHour, Team: team, Cluster: cluster}, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		var wlMicros int64
		for _, w := range wls {
			if w.Team == ledger.TeamUnallocated {
				continue
			}
			wlMicros += w.CostMicros
			kind, name := strings.ToLower(w.Kind), w.Name
			if w.Kind == "" || w.Kind == "Pod" {
				kind, name = "", ""
			}
			n, p, ok := allocationName(aggs, w.Cluster, w.Team, w.Namespace, "", kind, name)
			if !ok {
				n = "__unallocated__"
			}
			add(n, p, w.CostMicros, w.GPUSeconds, w.ActiveGPUSeconds, w.UnmeasuredGPUSeconds)
		}
		// What the workload rows do not hold of the teams' cost is no
		// controller's: the set still adds up to the ledger's cost.
		if rest := heldMicros - wlMicros; rest != 0 {
			add("__unallocated__", AllocationProperties{}, rest, 0, 0, 0)
		}
	}
	hours := to.Sub(from).Hours()
	for _, a := range set {
		a.TotalCost = float64(a.micros) / 1e6
		a.GPUCost = a.TotalCost
		a.GPUHours = float64(a.heldSec) / 3600
		a.GPUCount = a.GPUHours / hours
		if measured := a.heldSec - a.unmeasuredSec; measured > 0 && a.Name != "__idle__" {
			a.GPUEfficiency = float64(a.activeSec) / float64(measured)
		}
		a.TotalEfficiency = a.GPUEfficiency
	}
	return set, nil
}

// allocationName is an allocation's name under the aggregates, OpenCost's
// way (values joined by "/"), and its properties; false when a value is
// missing (no team, no queue label, no controller).
func allocationName(aggs []string, cluster, team, namespace, localQueue, kind, controller string) (string, AllocationProperties, bool) {
	var p AllocationProperties
	var parts []string
	for _, a := range aggs {
		var part string
		switch a = strings.TrimSpace(a); a {
		case "cluster":
			part, p.Cluster = cluster, cluster
		case "namespace":
			part, p.Namespace = namespace, namespace
		case "team":
			part = team
			if team == ledger.TeamUnowned {
				part = ""
			}
		case "controller":
			part, p.Controller, p.ControllerKind = kind+":"+controller, controller, kind
			if controller == "" {
				part = ""
			}
		case "controllerKind":
			part, p.ControllerKind = kind, kind
		default: // the queue label
			part = localQueue
			if localQueue != "" {
				p.Labels = map[string]string{queueLabel: localQueue}
			}
		}
		if part == "" {
			return "", AllocationProperties{}, false
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		// No aggregate: the cluster's allocations as one.
		return cluster, AllocationProperties{Cluster: cluster}, true
	}
	return strings.Join(parts, "/"), p, true
}

// parseWindow reads OpenCost's window: today, yesterday, week, lastweek,
// month, lastmonth (UTC); a duration ending now (30m, 12h, 7d); or a pair
// of RFC 3339 times or Unix seconds, "start,end". The ledger's resolution
// is the hour: the window is widened to whole hours.
func parseWindow(w string, now time.Time) (from, to time.Time, err error) {
	day := now.Truncate(24 * time.Hour)
	switch w {
	case "":
		return from, to, badf("window is required; want today, yesterday, week, lastweek, month, lastmonth, a duration such as 7d, or start,end in RFC 3339 or Unix seconds")
	case "today":
		from, to = day, day.Add(24*time.Hour)
	case "yesterday":
		from, to = day.Add(-24*time.Hour), day
	case "week":
		from, to = day.Add(-24*time.Hour*time.Duration(day.Weekday())), now
	case "lastweek":
		from = day.Add(-24 * time.Hour * time.Duration(day.Weekday()+7))
		to = from.Add(7 * 24 * time.Hour)
	case "month":
		from, to = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), now
	case "lastmonth":
		to = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		from = to.AddDate(0, -1, 0)
	default:
		if a, b, ok := strings.Cut(w, ","); ok {
			if from, err = windowTime(a); err == nil {
				to, err = windowTime(b)
			}
			if err != nil {
				return from, to, badf("window=%q: %v; want start,end in RFC 3339 (2026-10-01T00:00:00Z) or Unix seconds", w, err)
			}
		} else {
			d, err := parseAllocationDuration("window", w)
			if err != nil {
				return from, to, err
			}
			from, to = now.Add(-d), now
		}
	}
	from = from.Truncate(time.Hour)
	if t := to.Truncate(time.Hour); !t.Equal(to) {
		to = t.Add(time.Hour)
	}
	if !to.After(from) {
		return from, to, badf("window=%q is empty; want its end after its start", w)
	}
	return from.UTC(), to.UTC(), nil
}

func windowTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, badf("%q is neither RFC 3339 nor Unix seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// parseAllocationDuration reads OpenCost's durations: Go's (30m, 12h)
// and days (7d).
func parseAllocationDuration(field, s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 {
			return time.Duration(d) * 24 * time.Hour, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, badf("%s=%q is not a duration; want minutes, hours or days such as 30m, 12h or 7d", field, s)
}
