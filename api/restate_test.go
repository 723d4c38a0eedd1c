package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// TestRestatedAndClosed: a backfill restates an hour of October (the cost
// API marks it and the admin route says what changed); October is closed
// through the API in the name of the admin's token; a correction after it
// leaves October's figures as invoiced (marked adjusted) and bills the
// difference in November's chargeback.
func TestRestatedAndClosed(t *testing.T) {
	srv, _ := authServer(t)
	ctx := context.Background()
	h := time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)
	hour := func(h time.Time, ml, unalloc int64) []ledger.Row {
		return []ledger.Row{
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: "ml", Flavor: "h100"}, GPUSeconds: float64(ml) / 1911, CostMicros: ml},
			{Key: ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: float64(unalloc) / 1911, CostMicros: unalloc, UnallocatedCostMicros: unalloc},
		}
	}
	prov := ledger.Provenance{Source: "backfill:file:///a.jsonl", By: "ops", Reason: "exporter down"}
	if _, err := ledger.Rewrite(ctx, srv.opts.Store, hour(h, 13_760_000, 0), nil, prov); err != nil {
		t.Fatal(err)
	}
	var cost CostResponse
	code, body := call(t, srv, "GET", "/api/v1/cost?from=2026-10-01&to=2026-10-02&step=hour&groupBy=team", "finops")
	if err := json.Unmarshal([]byte(body), &cost); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	marked := map[string]bool{}
	for _, p := range cost.Points {
		if p.Restated {
			marked[p.Start.Format("15")+" "+p.Team] = true
		}
		if p.Adjusted {
			t.Errorf("point %+v adjusted: October is open", p)
		}
	}
	if len(marked) != 2 || !marked["05 ml"] || !marked["05 _unallocated"] {
		t.Errorf("restated points: %v, want 05:00's ml and _unallocated only", marked)
	}
	code, body = call(t, srv, "GET", "/api/v1/admin/restatements?from=2026-10-01&to=2026-10-02&team=ml", "root")
	if code != 200 || !strings.Contains(body, `"before":"6.880000","after":"13.760000","change":"6.880000"`) || !strings.Contains(body, `"by":"ops"`) ||
		strings.Contains(body, "_unallocated") {
		t.Errorf("ml's restatements: %d %s", code, body)
	}

	code, body = call(t, srv, "POST", "/api/v1/admin/close?month=2026-10&note=INV-10", "root")
	if code != 200 || !strings.Contains(body, `"by":"root"`) {
		t.Fatalf("close October: %d %s", code, body)
	}
	if code, body = call(t, srv, "POST", "/api/v1/admin/close?month=2026-10", "root"); code != http.StatusConflict {
		t.Errorf("close October again: %d %s, want 409", code, body)
	}
	if code, body = call(t, srv, "POST", "/api/v1/admin/close?month=2026-10", "finops"); code != http.StatusForbidden {
		t.Errorf("a viewer closing a month: %d %s, want 403", code, body)
	}
	if code, body = call(t, srv, "POST", "/api/v1/admin/close?month=2999-01", "root"); code != http.StatusBadRequest || !strings.Contains(body, "not over") {
		t.Errorf("closing a month not over: %d %s, want 400 saying so", code, body)
	}
	if _, err := ledger.Rewrite(ctx, srv.opts.Store, hour(h, 6_880_000, 6_880_000), nil, prov); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, srv, "GET", "/api/v1/cost?from=2026-10-01T05:00:00Z&to=2026-10-01T06:00:00Z&step=hour&groupBy=team&team=ml", "finops")
	if err := json.Unmarshal([]byte(body), &cost); code != 200 || err != nil || len(cost.Points) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	if p := cost.Points[0]; p.CostMicros != 13_760_000 || !p.Adjusted {
		t.Errorf("ml at 05:00 after the close and a correction: %+v, want the invoiced 13.76, marked adjusted", p)
	}
	code, body = call(t, srv, "GET", "/api/v1/reports/chargeback/2026-11?format=csv", "finops")
	if code != 200 || !strings.Contains(body, "adjustment:ml,") || !strings.Contains(body, "-6.880000 after") && !strings.Contains(body, "(-6.880000)") {
		t.Errorf("November's chargeback: %d\n%s", code, body)
	}
	code, body = call(t, srv, "GET", "/api/v1/admin/closes", "root")
	if code != 200 || !strings.Contains(body, `"month":"2026-10"`) || !strings.Contains(body, `"note":"INV-10"`) {
		t.Errorf("closes: %d %s", code, body)
	}
}
