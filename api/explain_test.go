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

// explainServer is authServer with the lines of testServer's rows: ml's
// GPU n1/0 held by pod a-0 of Job a, n1/1 unallocated, every hour.
func explainServer(t *testing.T) *Server {
	t.Helper()
	srv, _ := authServer(t)
	var lines []ledger.Line
	for h := 0; h < 48; h++ {
		hour := time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC)
		lines = append(lines,
			ledger.Line{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: "ml", Namespace: "ml", Flavor: "h100"}, Kind: ledger.LineUsage, Node: "n1", GPU: "0",
				Pod: "a-0", WorkloadKind: "Job", Workload: "a", RateMicrosPerHour: 6_880_000, GPUSeconds: 3600, ActiveGPUSeconds: 1800,
				CostMicros: 6_880_000, IdleCostMicros: 3_440_000},
			ledger.Line{Key: ledger.Key{Hour: hour, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, Kind: ledger.LineUnallocated,
				Node: "n1", GPU: "1", RateMicrosPerHour: 6_880_000, GPUSeconds: 3600, CostMicros: 6_880_000, UnallocatedCostMicros: 6_880_000})
	}
	if err := srv.opts.Store.(ledger.LineStore).WriteLineHours(context.Background(), lines); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestExplain: the lines of a team's range sum to its ledger figure; a
// team's token explains its own team only; a bad workload or limit is
// refused naming it; a ledger without lines answers 501.
func TestExplain(t *testing.T) {
	srv := explainServer(t)
	code, body := call(t, srv, "GET", "/api/v1/explain?from=2026-10-01&to=2026-10-02&limit=1", "ml-dash")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var r ExplainResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Team != "ml" || !r.Reconciled || r.Ledger.CostMicros != 24*6_880_000 || r.Lines.CostMicros != r.Ledger.CostMicros ||
		r.LineCount != 1 || len(r.Top) != 1 || r.Top[0].Node != "n1" || r.Top[0].Pod != "a-0" || r.Top[0].IdleGPUHours != 12 || r.Top[0].Rate != "6.880000" {
		t.Errorf("ml's day: %+v", r)
	}
	// Every team, for a viewer: the unallocated GPU's line first (the
	// same cost as ml's, ordered by team name after it), both reconcile.
	code, body = call(t, srv, "GET", "/api/v1/explain?from=2026-10-01&to=2026-10-03", "finops")
	if err := json.Unmarshal([]byte(body), &r); code != http.StatusOK || err != nil || !r.Reconciled || r.LineCount != 2 ||
		r.Ledger.CostMicros != 2*48*6_880_000 {
		t.Errorf("every team: %d %s", code, body)
	}
	for _, c := range []struct {
		url, token string
		code       int
		says       string
	}{
		{"/api/v1/explain?from=2026-10-01&to=2026-10-02&team=vision", "ml-dash", http.StatusForbidden, "may read team(s) ml only"},
		{"/api/v1/explain?from=2026-10-01&to=2026-10-02&workload=a", "ml-dash", http.StatusBadRequest, "want namespace/name"},
		{"/api/v1/explain?from=2026-10-01&to=2026-10-02&limit=0", "ml-dash", http.StatusBadRequest, "is not a line count"},
		{"/api/v1/explain?from=2026-10-01&to=2026-10-02", "", http.StatusUnauthorized, ""},
	} {
		code, body := call(t, srv, "GET", c.url, c.token)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s as %q: %d %s; want %d saying %q", c.url, c.token, code, body, c.code, c.says)
		}
	}
	opts := srv.opts
	opts.Store = struct{ ledger.Store }{srv.opts.Store}
	if code, body := call(t, New(opts), "GET", "/api/v1/explain?from=2026-10-01&to=2026-10-04", "ml-dash"); code != http.StatusNotImplemented {
		t.Errorf("a ledger without lines: %d %s; want 501", code, body)
	}
}

// TestExplainPages: the team page lists the month's largest lines and
// links each workload to its explanation; the explanation page says the
// lines reconcile; the CSV has every line; another team's are refused.
func TestExplainPages(t *testing.T) {
	srv := explainServer(t)
	code, body := call(t, srv, "GET", "/team/ml?month=2026-10", "ml-dash")
	if code != http.StatusOK || !strings.Contains(body, `id="toplines"`) || !strings.Contains(body, "n1/0") ||
		!strings.Contains(body, `href="/team/ml/explain?month=2026-10&amp;workload=ml%2Fa"`) {
		t.Errorf("team page: %d\n%s", code, body)
	}
	code, body = call(t, srv, "GET", "/team/ml/explain?month=2026-10&workload=ml/a", "ml-dash")
	// testServer's workload rows of Job a are not its lines (2 micros):
	// the page says they do not reconcile.
	if code != http.StatusOK || !strings.Contains(body, "Why ml/a of ml paid") || !strings.Contains(body, "ml/a-0 (Job a)") ||
		!strings.Contains(body, `id="verdict" class="bad"`) {
		t.Errorf("workload explanation page: %d\n%s", code, body)
	}
	code, body = call(t, srv, "GET", "/team/ml/explain?month=2026-10", "ml-dash")
	if code != http.StatusOK || !strings.Contains(body, `id="verdict" class="ok"`) || !strings.Contains(body, "330.24") {
		t.Errorf("team explanation page: %d\n%s", code, body)
	}
	code, body = call(t, srv, "GET", "/team/ml/lines.csv?month=2026-10", "ml-dash")
	rows := strings.Split(strings.TrimSpace(body), "\n")
	if code != http.StatusOK || len(rows) != 2 || !strings.HasPrefix(rows[0], "from,to,cluster,team") || !strings.Contains(rows[1], ",ml,,,h100,usage,n1,0,,a-0,Job,a,6.880000,,48,24,0,330.240000,165.120000,") {
		t.Errorf("lines CSV: %d\n%s", code, body)
	}
	// The overview links each idle workload to its explanation.
	code, body = call(t, srv, "GET", "/?month=2026-10", "finops")
	if code != http.StatusOK || !strings.Contains(body, `href="/team/ml/explain?month=2026-10&amp;workload=ml%2Fa"`) {
		t.Errorf("overview: %d\n%s", code, body)
	}
	if code, _ := call(t, srv, "GET", "/team/vision/explain?month=2026-10", "ml-dash"); code != http.StatusForbidden {
		t.Errorf("ml's token opened vision's explanation: %d", code)
	}
}
