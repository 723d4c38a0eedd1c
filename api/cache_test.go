package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

func callH(t *testing.T, srv *Server, url, token string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer secret-"+token)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

// TestAnswerCache: the second identical read is served from the cache; a
// ledger write (the generation) or the TTL drops it; teams never share an
// answer.
func TestAnswerCache(t *testing.T) {
	base, _ := authServer(t)
	var gen atomic.Uint64
	opts := base.opts
	opts.CacheTTL = time.Hour
	opts.Generation = gen.Load
	srv := New(opts)
	url := "/api/v1/cost?from=2026-10-01&to=2026-10-03&groupBy=team"
	hit := func(token string) bool {
		t.Helper()
		code, h, body := callH(t, srv, url, token)
		if code != 200 {
			t.Fatalf("%s: %d %s", token, code, body)
		}
		return h.Get("X-Gpuledger-Cache") == "hit"
	}
	if hit("finops") || !hit("finops") {
		t.Error("the second read was not served from the cache")
	}
	if hit("ml-dash") {
		t.Error("a team's token got the viewer's cached answer")
	}
	_, _, mlBody := callH(t, srv, url, "ml-dash")
	if strings.Contains(mlBody, "_unallocated") {
		t.Errorf("ml's cached answer holds other teams: %s", mlBody)
	}
	gen.Add(1) // the pipeline wrote an hour
	if hit("finops") {
		t.Error("an answer made before a ledger write was served")
	}
	srv.results.ttl = time.Nanosecond
	time.Sleep(time.Millisecond)
	if hit("finops") {
		t.Error("an answer older than the TTL was served")
	}
}

// TestAnswerCacheStrictQuery: a query the route refuses is refused whether
// or not the cache holds the answer to the query without its bad pair (a
// team's filter dropped by a lenient parse served every team's lines).
func TestAnswerCacheStrictQuery(t *testing.T) {
	base, _ := authServer(t)
	opts := base.opts
	opts.CacheTTL = time.Hour
	srv := New(opts)
	good := "/api/v1/cost?from=2026-10-01&to=2026-10-03&groupBy=team"
	for i := 0; i < 2; i++ {
		if code, _, body := callH(t, srv, good, "finops"); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	for _, bad := range []string{good + "&team=ml;", good + ";team=ml", good + "&team=%zz"} {
		code, h, body := callH(t, srv, bad, "finops")
		if code != http.StatusBadRequest || h.Get("X-Gpuledger-Cache") == "hit" {
			t.Errorf("%s: %d (cache %q), want 400 from the route: %s", bad, code, h.Get("X-Gpuledger-Cache"), body)
		}
	}
	// Parameters in another order are another key, never a wrong answer.
	code, _, body := callH(t, srv, "/api/v1/cost?groupBy=team&to=2026-10-03&from=2026-10-01", "finops")
	if code != 200 || !strings.Contains(body, "_unallocated") {
		t.Errorf("reordered query: %d %s", code, body)
	}
}

// TestStoreGeneration: on the embedded ledger the answer cache's
// generation moves when another process commits to the file (a backfill
// by gpuledger ingest), not only when serve's pipeline writes.
func TestStoreGeneration(t *testing.T) {
	dir := t.TempDir()
	served, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	other, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	gen := generation(served, func() uint64 { return 0 })
	g0 := gen()
	if g := gen(); g != g0 {
		t.Fatalf("generation moved from %d to %d with nothing written", g0, g)
	}
	row := ledger.Row{Key: ledger.Key{Hour: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), Cluster: "c1", Team: "ml", Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 1}
	if err := other.WriteHours(context.Background(), []ledger.Row{row}, nil); err != nil {
		t.Fatal(err)
	}
	if g := gen(); g == g0 {
		t.Errorf("generation %d unchanged after another process rewrote an hour", g)
	}
}
