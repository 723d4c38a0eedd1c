package api

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuledger/gpuledger/reports"
)

// authServer is testServer with tokens of every kind, and two teams.
func authServer(t *testing.T) (*Server, *fakeIngest) {
	t.Helper()
	base := testServer(t)
	fi := &fakeIngest{}
	tok := func(name string, scopes ...Scope) Token {
		return Token{Name: name, SHA256: HashToken("secret-" + name), Scopes: scopes}
	}
	opts := base.opts
	opts.Ingest = fi
	opts.Report = reports.Options{Currency: "USD", Teams: []string{"ml", "vision"}}
	opts.Auth = NewAuth([]Token{
		tok("vmagent", ScopeWrite),
		tok("finops", ScopeViewer),
		tok("root", ScopeAdmin),
		tok("ml-dash", "team:ml"),
		tok("vision-dash", "team:vision"),
		tok("both", "team:ml", "team:vision"),
	})
	return New(opts), fi
}

func call(t *testing.T, srv *Server, method, url, token string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("\x00")
	}
	req := httptest.NewRequest(method, url, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer secret-"+token)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestRoutesByToken walks every route with every kind of token.
func TestRoutesByToken(t *testing.T) {
	srv, _ := authServer(t)
	routes := []struct {
		method, url string
	}{
		{"GET", "/api/v1/cost?from=2026-10-01&to=2026-10-03"},
		{"GET", "/api/v1/workloads?from=2026-10&to=2026-11"},
		{"GET", "/api/v1/reports/chargeback/2026-10?format=csv"},
		{"GET", "/metrics"},
		{"POST", "/api/v1/write"},
		{"GET", "/healthz"},
		{"GET", "/debug/pprof/heap"},
		{"GET", "/api/v1/admin/restatements?from=2026-10-01&to=2026-10-03"},
		{"GET", "/api/v1/admin/closes"},
	}
	// want[token][route] is the status.
	want := map[string][]int{
		"":            {401, 401, 401, 401, 401, 200, 401, 401, 401},
		"nobody":      {401, 401, 401, 401, 401, 200, 401, 401, 401},
		"vmagent":     {403, 403, 403, 403, 204, 200, 403, 403, 403},
		"finops":      {200, 200, 200, 200, 403, 200, 403, 403, 403},
		"root":        {200, 200, 200, 200, 204, 200, 200, 200, 200},
		"ml-dash":     {200, 200, 200, 403, 403, 200, 403, 403, 403},
		"vision-dash": {200, 200, 404, 403, 403, 200, 403, 403, 403}, // vision has no rows in October
		"both":        {400, 400, 400, 403, 403, 200, 403, 403, 403}, // several teams: name one
	}
	for token, codes := range want {
		for i, r := range routes {
			code, body := call(t, srv, r.method, r.url, token)
			if code != codes[i] {
				t.Errorf("token %q, %s %s: %d %s; want %d", token, r.method, r.url, code, body, codes[i])
			}
			if code == 401 && !strings.Contains(body, "bearer token") || code == 403 && !strings.Contains(body, `"error"`) {
				t.Errorf("token %q, %s %s: %d without a JSON error saying why: %s", token, r.method, r.url, code, body)
			}
		}
	}
}

// TestNoCrossTeamRead: a team's token reads its own team's rows only,
// whatever it asks for; asking for another team is 403.
func TestNoCrossTeamRead(t *testing.T) {
	srv, _ := authServer(t)
	for _, url := range []string{
		"/api/v1/cost?from=2026-10-01&to=2026-10-03&team=ml",
		"/api/v1/workloads?from=2026-10&to=2026-11&team=ml",
		"/api/v1/reports/chargeback/2026-10?format=csv&team=ml",
	} {
		if code, body := call(t, srv, "GET", url, "vision-dash"); code != http.StatusForbidden || !strings.Contains(body, `not team=\"ml\"`) {
			t.Errorf("vision's token reading ml, %s: %d %s", url, code, body)
		}
	}
	// Unfiltered, grouped by anything: ml's rows only.
	code, body := call(t, srv, "GET", "/api/v1/cost?from=2026-10-01&to=2026-10-03&groupBy=team,cluster", "ml-dash")
	var resp CostResponse
	if err := json.Unmarshal([]byte(body), &resp); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	for _, p := range resp.Points {
		if p.Team != "ml" {
			t.Errorf("ml's token got a row of %q", p.Team)
		}
	}
	if len(resp.Points) == 0 {
		t.Error("ml's token got nothing")
	}
	// The chargeback holds ml's line only: no other team, no overhead, and
	// a TOTAL that is ml's.
	_, body = call(t, srv, "GET", "/api/v1/reports/chargeback/2026-10?format=csv", "ml-dash")
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "ml,") || !strings.HasPrefix(lines[2], "TOTAL,") || strings.Contains(body, "_unallocated") {
		t.Errorf("ml's chargeback:\n%s", body)
	}
	code, body = call(t, srv, "GET", "/api/v1/workloads?from=2026-10&to=2026-11", "both")
	if code != http.StatusBadRequest || !strings.Contains(body, "name one with team=") {
		t.Errorf("a token of two teams without team=: %d %s", code, body)
	}
	if code, _ := call(t, srv, "GET", "/api/v1/workloads?from=2026-10&to=2026-11&team=vision", "both"); code != 200 {
		t.Errorf("a token of two teams naming one: %d", code)
	}
}

// TestQueryTraps: a ';' in the query, a parameter given twice, or a
// misspelt one is a 400 naming it; none drops a filter silently.
func TestQueryTraps(t *testing.T) {
	srv, _ := authServer(t)
	f := func(url, want string) {
		t.Helper()
		code, body := call(t, srv, "GET", url, "finops")
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s; want 400 mentioning %q", url, code, body, want)
		}
	}
	f("/api/v1/cost?from=2026-10-01&to=2026-10-03;team=ml", "contains ';'")
	f("/api/v1/cost?from=2026-10-01&to=2026-10-03&team=ml&team=vision", "team is given 2 times")
	f("/api/v1/cost?from=2026-10-01&to=2026-10-03&tem=ml", "unknown parameter(s) tem")
	f("/api/v1/workloads?from=2026-10&to=2026-11&limt=5", "unknown parameter(s) limt")
	f("/api/v1/reports/chargeback/2026-10?format=csv;team=ml", "contains ';'")
	// And a team token cannot escape its filter that way either.
	if code, _ := call(t, srv, "GET", "/api/v1/cost?from=2026-10-01&to=2026-10-03;team=vision", "ml-dash"); code != http.StatusBadRequest {
		t.Errorf("';' with a team token: %d", code)
	}
}

// TestWriteSender: remote write is counted against the token's name.
func TestWriteSender(t *testing.T) {
	srv, fi := authServer(t)
	if code, _ := call(t, srv, "POST", "/api/v1/write", "vmagent"); code != http.StatusNoContent {
		t.Fatalf("write: %d", code)
	}
	if len(fi.senders) != 1 || fi.senders[0] != "vmagent" {
		t.Errorf("senders %v", fi.senders)
	}
}

// TestTokensReload: a token taken out of the tokens file is refused from
// the next check on, with no restart; a file that does not load keeps the
// tokens in force, logged and counted; one added is accepted.
func TestTokensReload(t *testing.T) {
	base, _ := authServer(t)
	opts := base.opts
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	tok := func(name string, scopes ...Scope) Token {
		return Token{Name: name, SHA256: HashToken("secret-" + name), Scopes: scopes}
	}
	// The file's contents stand for the tokens it holds, by name.
	load := func() ([]Token, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var out []Token
		for _, name := range strings.Fields(string(b)) {
			if name == "broken" {
				return nil, errors.New("tokens.yaml: line 1: not YAML")
			}
			out = append(out, tok(name, ScopeViewer))
		}
		return out, nil
	}
	os.WriteFile(file, []byte("finops rotated-out"), 0o600)
	toks, _ := load()
	opts.Auth = NewAuth(toks)
	opts.TokenFiles, opts.ReloadTokens = []string{file}, load
	srv := New(opts)
	w := srv.tokenWatcher()
	if w == nil {
		t.Fatal("no token watcher")
	}
	watch := &contentWatch{paths: opts.TokenFiles}
	watch.read()
	count := srv.reloaded("tokens")
	status := func(token string) int {
		code, _ := call(t, srv, "GET", "/api/v1/cost?from=2026-10-01&to=2026-10-02", token)
		return code
	}
	if status("rotated-out") != 200 {
		t.Fatal("the token is not accepted before it is taken out")
	}
	os.WriteFile(file, []byte("finops"), 0o600)
	srv.reloadTokens(watch, count)
	if c := status("rotated-out"); c != http.StatusUnauthorized {
		t.Errorf("a token taken out of the file: %d, want 401", c)
	}
	os.WriteFile(file, []byte("broken"), 0o600)
	srv.reloadTokens(watch, count)
	srv.reloadTokens(watch, count) // unchanged: not tried again
	if c := status("finops"); c != 200 {
		t.Errorf("after a broken file: finops %d, want the tokens in force kept", c)
	}
	os.WriteFile(file, []byte("finops newcomer"), 0o600)
	srv.reloadTokens(watch, count)
	if c := status("newcomer"); c != 200 {
		t.Errorf("a token added: %d, want 200", c)
	}
	var b strings.Builder
	srv.metrics.WritePrometheus(&b)
	for _, want := range []string{`gpuledger_reloads_total{what="tokens"} 2`, `gpuledger_reload_failures_total{what="tokens"} 1`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}

// TestNewToken: the configuration's hex becomes the hash the server
// compares; a hash that is not 64 hex digits is refused with its name.
func TestNewToken(t *testing.T) {
	h := HashToken("s3cret")
	tok, err := NewToken("ci", hex.EncodeToString(h[:]), []string{"viewer", "team:nlp"})
	if err != nil || tok.SHA256 != h || len(tok.Scopes) != 2 || tok.Scopes[1] != "team:nlp" {
		t.Fatalf("%+v, %v", tok, err)
	}
	for _, bad := range []string{"", "abc", hex.EncodeToString(h[:8]), strings.Repeat("zz", 32)} {
		if _, err := NewToken("ci", bad, nil); err == nil || !strings.Contains(err.Error(), "token ci: sha256") {
			t.Errorf("%q: %v; want an error naming the token and the field", bad, err)
		}
	}
}
