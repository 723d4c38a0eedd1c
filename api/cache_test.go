package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
