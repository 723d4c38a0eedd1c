package api

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// allocationServer holds two days of a cluster: two teams in their
// namespaces (one with a queue label, one without), pods of no team, and
// capacity nobody held; workload rows for part of the teams' time.
func allocationServer(t *testing.T) *Server {
	t.Helper()
	s := testStore(t)
	var rows []ledger.Row
	var wls []ledger.WorkloadRow
	for h := 0; h < 48; h++ {
		hour := time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC)
		k := func(team, ns, lq string) ledger.Key {
			return ledger.Key{Hour: hour, Cluster: "c1", Team: team, Namespace: ns, LocalQueue: lq, Flavor: "h100"}
		}
		rows = append(rows,
			ledger.Row{Key: k("ml", "ml-train", "lq-train"), GPUSeconds: 7200, ActiveGPUSeconds: 5400, CostMicros: 13_760_001, IdleCostMicros: 3_440_000},
			ledger.Row{Key: k("nlp", "nlp-serving", ""), GPUSeconds: 3600, ActiveGPUSeconds: 360, CostMicros: 6_880_000, IdleCostMicros: 6_192_000},
			ledger.Row{Key: k(ledger.TeamUnowned, "sandbox", ""), GPUSeconds: 1800, ActiveGPUSeconds: 0, UnmeasuredGPUSeconds: 1800, CostMicros: 3_440_000, UnmeasuredCostMicros: 3_440_000},
			ledger.Row{Key: k(ledger.TeamUnallocated, "", ""), GPUSeconds: 3600 * 5, CostMicros: 34_399_999, UnallocatedCostMicros: 34_399_999},
		)
		wls = append(wls,
			ledger.WorkloadRow{Hour: hour, Cluster: "c1", Team: "ml", Namespace: "ml-train", Kind: "Job", Name: "train-1", GPUSeconds: 7200, ActiveGPUSeconds: 5400, CostMicros: 13_760_001, IdleCostMicros: 3_440_000},
			ledger.WorkloadRow{Hour: hour, Cluster: "c1", Team: "nlp", Namespace: "nlp-serving", Kind: "Pod", Name: "adhoc", GPUSeconds: 3600, ActiveGPUSeconds: 360, CostMicros: 6_880_000, IdleCostMicros: 6_192_000},
		)
	}
	if err := s.WriteHours(context.Background(), rows, wls); err != nil {
		t.Fatal(err)
	}
	return New(Options{Store: s, MaxRange: 400 * 24 * time.Hour, Report: reports.Options{Currency: "USD", Teams: []string{"ml", "nlp"}}})
}

func allocations(t *testing.T, srv *Server, query string) AllocationResponse {
	t.Helper()
	code, _, body := get(t, srv, "/allocation?"+query)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", query, code, body)
	}
	var r AllocationResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %v\n%s", query, err, body)
	}
	return r
}

func setMicros(set map[string]*Allocation) int64 {
	var sum int64
	for _, a := range set {
		sum += int64(math.Round(a.TotalCost * 1e6))
	}
	return sum
}

// TestAllocation: OpenCost's /allocation over the ledger. Every
// aggregate's sets add up to the month's chargeback TOTAL to the
// micro-unit; capacity nobody held is __idle__, cost lacking the
// aggregate's property __unallocated__; steps split the window.
func TestAllocation(t *testing.T) {
	srv := allocationServer(t)
	// The chargeback's TOTAL for October.
	_, _, body := get(t, srv, "/api/v1/reports/chargeback/2026-10?format=csv")
	total := csvSum(t, body, "cost", true)
	if total != 48*(13_760_001+6_880_000+3_440_000+34_399_999) {
		t.Fatalf("chargeback TOTAL %d; want every row's cost", total)
	}
	const month = "window=2026-10-01T00:00:00Z,2026-11-01T00:00:00Z"
	for _, c := range []struct {
		aggregate string
		names     []string
	}{
		{"", []string{"__idle__", "c1"}},
		{"cluster", []string{"__idle__", "c1"}},
		{"namespace", []string{"__idle__", "ml-train", "nlp-serving", "sandbox"}},
		{"team", []string{"__idle__", "__unallocated__", "ml", "nlp"}},
		{"label:kueue.x-k8s.io/queue-name", []string{"__idle__", "__unallocated__", "lq-train"}},
		{"cluster,namespace", []string{"__idle__", "c1/ml-train", "c1/nlp-serving", "c1/sandbox"}},
		{"controller", []string{"__idle__", "__unallocated__", "job:train-1"}},
		{"namespace,controller", []string{"__idle__", "__unallocated__", "ml-train/job:train-1"}},
	} {
		r := allocations(t, srv, month+"&aggregate="+c.aggregate)
		if r.Code != 200 || len(r.Data) != 1 {
			t.Fatalf("aggregate=%s: code %d, %d sets; want 200 and one", c.aggregate, r.Code, len(r.Data))
		}
		set := r.Data[0]
		var names []string
		for n := range set {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, c.names) {
			t.Errorf("aggregate=%s: names %v; want %v", c.aggregate, names, c.names)
		}
		if got := setMicros(set); got != total {
			t.Errorf("aggregate=%s: totalCost sums to %d micros; want the chargeback TOTAL, %d", c.aggregate, got, total)
		}
		if idle := set["__idle__"]; idle == nil || idle.GPUHours != 240 || idle.GPUCount != 240.0/744 || idle.Minutes != 744*60 {
			t.Errorf("aggregate=%s: __idle__ %+v; want 240 GPU-hours, 240/744 GPUs over the month's 44,640 minutes", c.aggregate, idle)
		}
	}
	// A namespace's figures.
	r := allocations(t, srv, month+"&aggregate=namespace")
	ml := r.Data[0]["ml-train"]
	if ml.GPUHours != 96 || ml.GPUEfficiency != 0.75 || ml.TotalCost != 48*13.760001 || ml.Properties.Namespace != "ml-train" || ml.Window.Start != time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("ml-train: %+v", ml)
	}
	q := allocations(t, srv, month+"&aggregate=label:kueue.x-k8s.io/queue-name").Data[0]["lq-train"]
	if q.Properties.Labels[queueLabel] != "lq-train" {
		t.Errorf("lq-train's properties %+v; want the queue label", q.Properties)
	}
	// Steps: a set a day, each adding up to its day; accumulate folds them.
	r = allocations(t, srv, "window=2026-10-01T00:00:00Z,2026-10-03T00:00:00Z&aggregate=team&step=1d")
	if len(r.Data) != 2 || setMicros(r.Data[0]) != total/2 || r.Data[1]["ml"].Start != "2026-10-02T00:00:00Z" {
		t.Errorf("step=1d: %d sets; want 2 of a day each", len(r.Data))
	}
	if r = allocations(t, srv, "window=2026-10-01T00:00:00Z,2026-10-03T00:00:00Z&aggregate=team&step=1d&accumulate=true"); len(r.Data) != 1 || setMicros(r.Data[0]) != total {
		t.Errorf("accumulate=true: %d sets; want one", len(r.Data))
	}
	if r = allocations(t, srv, month+"&aggregate=team&includeIdle=false"); r.Data[0]["__idle__"] != nil || setMicros(r.Data[0]) != total-48*34_399_999 {
		t.Errorf("includeIdle=false: %v", r.Data[0]["__idle__"])
	}
	for q, want := range map[string]string{
		"aggregate=team":                         "window is required",
		month + "&aggregate=label:app":           "is not one gpuledger can aggregate by",
		month + "&shareIdle=true":                "shareIdle=true is not supported",
		month + "&step=90m":                      "not whole hours",
		"window=2026-10-02T00:00:00Z,2026-10-01": "neither RFC 3339 nor Unix seconds",
		"window=lastyear":                        "is not a duration",
		month + "&filter=namespace:x":            "unknown parameter(s) filter",
	} {
		if code, _, body := get(t, srv, "/allocation?"+q); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s; want 400 saying %q", q, code, body, want)
		}
	}
}

// TestAllocationOpenCostShape: every field of an allocation is one of
// OpenCost's (testdata/opencost-allocation-fields.txt, from its source),
// with the ones its UI and tools read present, and the answer is
// {code, data: [sets]}.
func TestAllocationOpenCostShape(t *testing.T) {
	b, err := os.ReadFile("testdata/opencost-allocation-fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			fields = append(fields, line)
		}
	}
	srv := allocationServer(t)
	_, _, body := get(t, srv, "/allocation?window=2026-10-01T00:00:00Z,2026-10-02T00:00:00Z&aggregate=namespace")
	var raw struct {
		Code int                                     `json:"code"`
		Data []map[string]map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil || raw.Code != 200 || len(raw.Data) != 1 {
		t.Fatalf("answer %s: %v; want {code: 200, data: [one set]}", body, err)
	}
	a := raw.Data[0]["ml-train"]
	for f := range a {
		if !slices.Contains(fields, f) {
			t.Errorf("field %q is not one of OpenCost's allocation fields", f)
		}
	}
	for _, f := range []string{"name", "properties", "window", "start", "end", "minutes", "gpuCount", "gpuHours", "gpuCost", "gpuEfficiency", "cpuCost", "ramCost", "totalCost", "totalEfficiency"} {
		if _, ok := a[f]; !ok {
			t.Errorf("allocation lacks %q", f)
		}
	}
	var name string
	if err := json.Unmarshal(a["name"], &name); err != nil || name != "ml-train" {
		t.Errorf("name %s; want the set's key", a["name"])
	}
}

// TestAllocationWindow: OpenCost's window words and durations, in UTC,
// widened to the ledger's hours.
func TestAllocationWindow(t *testing.T) {
	now := time.Date(2026, 11, 4, 10, 30, 0, 0, time.UTC) // a Wednesday
	d := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }
	for w, want := range map[string][2]time.Time{
		"today":                 {d(4, 0), d(5, 0)},
		"yesterday":             {d(3, 0), d(4, 0)},
		"week":                  {d(1, 0), d(4, 11)},
		"lastweek":              {time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), d(1, 0)},
		"month":                 {d(1, 0), d(4, 11)},
		"lastmonth":             {time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), d(1, 0)},
		"7d":                    {time.Date(2026, 10, 28, 10, 0, 0, 0, time.UTC), d(4, 11)},
		"90m":                   {d(4, 9), d(4, 11)},
		"1793779200,1793865600": {time.Unix(1793779200, 0).UTC(), time.Unix(1793865600, 0).UTC()},
	} {
		from, to, err := parseWindow(w, now)
		if err != nil || !from.Equal(want[0]) || !to.Equal(want[1]) {
			t.Errorf("window %s: %s to %s, %v; want %s to %s", w, from, to, err, want[0], want[1])
		}
	}
}

// TestAllocationTeamToken: a team's token reads its own team's
// allocations, without the cluster's __idle__, and cannot ask for it.
func TestAllocationTeamToken(t *testing.T) {
	base := allocationServer(t)
	opts := base.opts
	opts.Auth = NewAuth([]Token{{Name: "ml-dash", SHA256: HashToken("secret-ml-dash"), Scopes: []Scope{"team:ml"}}})
	srv := New(opts)
	const w = "/allocation?window=2026-10-01T00:00:00Z,2026-10-03T00:00:00Z&aggregate=namespace"
	code, body := call(t, srv, "GET", w, "ml-dash")
	var r AllocationResponse
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	if len(r.Data[0]) != 1 || r.Data[0]["ml-train"] == nil || setMicros(r.Data[0]) != 48*13_760_001 {
		t.Errorf("ml's token sees %v; want ml-train alone", slices.Sorted(maps.Keys(r.Data[0])))
	}
	if code, body := call(t, srv, "GET", w+"&includeIdle=true", "ml-dash"); code != http.StatusBadRequest {
		t.Errorf("includeIdle=true with a team token: %d %s; want 400", code, body)
	}
	if code, _ := call(t, srv, "GET", w+"&team=nlp", "ml-dash"); code != http.StatusForbidden {
		t.Errorf("another team: %d; want 403", code)
	}
}
