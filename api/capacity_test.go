package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// TestCapacityRoutes: the expansion trigger for viewers, the budgets for
// each team's own token only, on the test ledger (Oct 1-2: ml holds one of
// two H100s).
func TestCapacityRoutes(t *testing.T) {
	base, _ := authServer(t)
	opts := base.opts
	opts.Capacity = CapacityOptions{Cluster: "c1", Rule: capacity.DefaultRule, PricesMicros: map[string]int64{"h100": 6_880_000},
		Budgets: map[string]int64{"ml": 500_000_000, "vision": 100_000_000}}
	srv := New(opts)
	const at = "at=2026-10-02T12:00:00Z"
	// A day of a queue whose 8 workloads an hour waited 2 hours.
	var qs []ledger.QueueRow
	for h := 0; h < 24; h++ {
		qs = append(qs, ledger.QueueRow{Hour: time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC), Cluster: "c1", ClusterQueue: "cq-ml", Admitted: 8,
			AdmittedWait: ledger.Histogram{Bounds: []float64{3600, 10240, math.Inf(1)}, Counts: []float64{0, 8, 8}}})
	}
	if err := opts.Store.WriteQueueHours(context.Background(), qs); err != nil {
		t.Fatal(err)
	}

	// An inference endpoint idle every night from 0:00 to 8:00, busy a
	// quarter of each other hour.
	var eps []ledger.EndpointRow
	for h := 0; h < 36; h++ {
		e := ledger.EndpointRow{Hour: time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC), Cluster: "c1", Namespace: "serve", Model: "llama", Pods: 1, ReportedSeconds: 3600}
		switch hod := h % 24; {
		case hod < 8:
			e.IdleSince = time.Date(2026, 10, 1, h-hod, 0, 0, 0, time.UTC).Add(-time.Minute)
		case hod == 8:
			// 12 requests within 2 minutes of the night's end.
			e.Gaps.Add(8*3600 + 60)
			e.Gaps.AddWoken(ledger.Bucket(8*3600+60), []float64{3, 6, 12, 20, 40}, 5)
			fallthrough
		default:
			e.BusySeconds, e.Requests = 900, 400
		}
		eps = append(eps, e)
	}
	if err := opts.Store.WriteEndpointHours(context.Background(), eps); err != nil {
		t.Fatal(err)
	}

	code, body := call(t, srv, http.MethodGet, "/api/v1/capacity?"+at, "finops")
	var cp struct {
		Flavors   []ExpansionPoint
		Queues    []QueueWaitPoint
		Endpoints []EndpointPoint
	}
	if err := json.Unmarshal([]byte(body), &cp); code != http.StatusOK || err != nil || len(cp.Flavors) != 1 || len(cp.Queues) != 1 || len(cp.Endpoints) != 1 {
		t.Fatalf("capacity: %d %s", code, body)
	}
	// Scale to zero with the shortest cooldown: two nights of 8 h, each
	// down 8 h + 1 min less 30 s and twice the 2-minute load (the load,
	// and the work it delays): one cold start a day reported, 12 requests
	// waiting at most each, 24 of 8,000.
	if e := cp.Endpoints[0]; e.Namespace != "serve" || e.Model != "llama" || e.MinReplicas != 0 || e.CooldownSeconds != 30 ||
		math.Abs(e.SavedGPUHours-2*(8*3600+60-30-2*120)/3600.0) > 1e-9 || math.Abs(e.BusyShare-0.25*20/36) > 1e-12 || e.P95ExtraSeconds != 0 ||
		e.WaitingRequests != 24 || e.DaysReported != 2 || e.ColdStartsPerDay != 1 {
		t.Errorf("endpoint: %+v", e)
	}
	if q := cp.Queues[0]; q.ClusterQueue != "cq-ml" || q.Fired || !strings.Contains(q.Why, "not enough history") || q.Admitted != 192 ||
		q.WaitSeconds == nil || *q.WaitSeconds < 3600 || len(q.Daily) != 1 {
		t.Errorf("cq-ml: %+v", q)
	}
	if f := cp.Flavors[0]; f.Flavor != "h100" || f.Fired || f.Allocated != 0.5 || !strings.Contains(f.Why, "not enough history") || f.MonthlyCost != "361612.800000" {
		t.Errorf("h100: %+v", f)
	}
	if code, _ := call(t, srv, http.MethodGet, "/api/v1/capacity?"+at, "ml-dash"); code != http.StatusForbidden {
		t.Errorf("a team's token read the cluster's capacity: %d", code)
	}

	budgets := func(token, query string) (int, []BudgetPoint) {
		code, body := call(t, srv, http.MethodGet, "/api/v1/budgets?"+at+query, token)
		var b struct{ Budgets []BudgetPoint }
		json.Unmarshal([]byte(body), &b)
		return code, b.Budgets
	}
	// ml: 36 hours of one H100 in October: 247.68 of 500 (49%), on course
	// for 247.68 × 744 / 36 = 5118.72 (over 100%).
	code, bs := budgets("ml-dash", "")
	if code != http.StatusOK || len(bs) != 1 || bs[0].Team != "ml" || bs[0].MonthToDate != "247.680000" || bs[0].Level != 0 ||
		bs[0].Forecast != "5118.720000" || bs[0].ForecastLevel != 100 {
		t.Errorf("ml's budget: %d %+v", code, bs)
	}
	if code, bs := budgets("vision-dash", ""); code != http.StatusOK || len(bs) != 1 || bs[0].Team != "vision" {
		t.Errorf("vision's token: %d %+v", code, bs)
	}
	if code, _ := budgets("ml-dash", "&team=vision"); code != http.StatusForbidden {
		t.Errorf("ml's token read vision's budget: %d", code)
	}
	if code, bs := budgets("finops", ""); code != http.StatusOK || len(bs) != 2 {
		t.Errorf("a viewer: %d %+v", code, bs)
	}
	if code, _ := call(t, srv, http.MethodGet, "/api/v1/budgets?at=yesterday", "finops"); code != http.StatusBadRequest {
		t.Errorf("at=yesterday: %d", code)
	}
	// September asked on October 2nd: ended, nothing spent, final.
	if code, bs := budgets("ml-dash", "&month=2026-09"); code != http.StatusOK || len(bs) != 1 || bs[0].MonthToDateMicros != 0 || !bs[0].Final {
		t.Errorf("ml's September: %d %+v", code, bs)
	}
}
