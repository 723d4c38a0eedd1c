package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer secret-"+b.token)
	return b.next.RoundTrip(r)
}

// mcpSession connects the SDK's client to the server's POST /mcp with a
// token.
func mcpSession(t *testing.T, ts *httptest.Server, token string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: ts.URL + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v", token, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPOverHTTP: the tools at POST /mcp answer what their routes answer
// for the same token, byte for byte; a team's token sees its team only;
// no token, no session.
func TestMCPOverHTTP(t *testing.T) {
	srv := explainServer(t)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := context.Background()
	cs := mcpSession(t, ts, "ml-dash")
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("tool %s is not marked read-only", tl.Name)
		}
	}
	if got := strings.Join(names, ","); got != "budgets,capacity,cost,explain,idle_workloads,scale_to_zero" {
		t.Errorf("tools %s", got)
	}
	for _, c := range []struct {
		tool  string
		args  map[string]any
		route string
	}{
		{"cost", map[string]any{"from": "2026-10-01", "to": "2026-10-03", "groupBy": []string{"team", "flavor"}, "step": "day"},
			"/api/v1/cost?from=2026-10-01&groupBy=team%2Cflavor&step=day&to=2026-10-03"},
		{"explain", map[string]any{"from": "2026-10-01", "to": "2026-10-02", "limit": 3}, "/api/v1/explain?from=2026-10-01&limit=3&to=2026-10-02"},
		{"idle_workloads", map[string]any{"from": "2026-10-01", "to": "2026-10-03"}, "/api/v1/workloads?from=2026-10-01&to=2026-10-03"},
		{"budgets", map[string]any{"at": "2026-10-02T00:00:00Z"}, "/api/v1/budgets?at=2026-10-02T00%3A00%3A00Z"},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		code, want := call(t, srv, "GET", c.route, "ml-dash")
		got := res.Content[0].(*sdk.TextContent).Text
		if res.IsError || code != http.StatusOK || got != strings.TrimSpace(want) {
			t.Errorf("tool %s answered (error %v)\n%s\nthe API (%d)\n%s", c.tool, res.IsError, got, code, want)
		}
	}
	// Another team's figures: refused as the API refuses them.
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "cost", Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-02", "team": "vision"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.Contains(text, "403") || strings.Contains(text, "costMicros") {
		t.Errorf("ml's token asked for vision's cost: %v %s", res.IsError, text)
	}
	// Capacity is for viewers: a team's token is refused, a viewer's
	// gets the route's answer, and scale_to_zero its endpoints.
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "capacity", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Errorf("ml's token read the capacity verdicts: %v %+v", err, res)
	}
	viewer := mcpSession(t, ts, "finops")
	res, err = viewer.CallTool(ctx, &sdk.CallToolParams{Name: "scale_to_zero", Arguments: map[string]any{"at": "2026-10-03T00:00:00Z"}})
	if err != nil {
		t.Fatal(err)
	}
	_, body := call(t, srv, "GET", "/api/v1/capacity?at=2026-10-03T00%3A00%3A00Z", "finops")
	var all, got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &got); err != nil || res.IsError || len(got) != 1 ||
		string(got["endpoints"]) != string(all["endpoints"]) {
		t.Errorf("scale_to_zero %s; the API's endpoints %s", res.Content[0].(*sdk.TextContent).Text, all["endpoints"])
	}
	// No token: the route refuses before MCP answers.
	if code, _ := call(t, srv, "POST", "/mcp", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /mcp without a token: %d", code)
	}
}
