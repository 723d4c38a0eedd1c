package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/reports"
)

// TestMain runs the test binary as gpuledger itself when asked: the MCP
// test starts it as a client starts a server, a subprocess on stdio.
func TestMain(m *testing.M) {
	if os.Getenv("GPULEDGER_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mcpLedger writes two days of two teams, with their lines and workload
// rows, into an embedded ledger at dir.
func mcpLedger(t *testing.T, dir string) {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows []ledger.Row
	var wls []ledger.WorkloadRow
	var lines []ledger.Line
	for h := 0; h < 48; h++ {
		hour := time.Date(2026, 10, 1, h, 0, 0, 0, time.UTC)
		for i, team := range []string{"ml-research", "vision"} {
			k := ledger.Key{Hour: hour, Cluster: "demo", Team: team, Namespace: team, Flavor: "h100"}
			rows = append(rows, ledger.Row{Key: k, GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 6_880_000, IdleCostMicros: 3_440_000})
			wls = append(wls, ledger.WorkloadRow{Hour: hour, Cluster: "demo", Team: team, Namespace: team, Kind: "Job", Name: "train-" + team,
				GPUSeconds: 3600, ActiveGPUSeconds: 1800, CostMicros: 6_880_000, IdleCostMicros: 3_440_000})
			lines = append(lines, ledger.Line{Key: k, Kind: ledger.LineUsage, Node: "gpu-node-1", GPU: string(rune('0' + i)), Pod: "train-" + team + "-0",
				WorkloadKind: "Job", Workload: "train-" + team, RateMicrosPerHour: 6_880_000, GPUSeconds: 3600, ActiveGPUSeconds: 1800,
				CostMicros: 6_880_000, IdleCostMicros: 3_440_000})
		}
	}
	if _, err := ledger.RewriteLines(context.Background(), s, rows, wls, lines, ledger.Provenance{Source: "test"}); err != nil {
		t.Fatal(err)
	}
}

// TestMCPStdio starts gpuledger mcp as an MCP client would (a subprocess
// on stdin and stdout), drives it with the SDK's client, and compares
// every tool's answer with the API's for the same token: without -token
// the whole ledger, with a team's token its team only. The session's
// messages are logged.
func TestMCPStdio(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	ledgerDir := filepath.Join(dir, "ledger")
	mcpLedger(t, ledgerDir)
	sum := sha256.Sum256([]byte("vision-secret"))
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - name: vision-agent\n    sha256: "+hex.EncodeToString(sum[:])+"\n    scopes: [\"team:vision\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	connect := func(transcript *bytes.Buffer, extra ...string) *sdk.ClientSession {
		t.Helper()
		cmd := exec.Command(os.Args[0], append([]string{"mcp", "-config=examples/cluster.yaml", "-ledger.path=" + ledgerDir, "-log.level=warn"}, extra...)...)
		cmd.Env = append(os.Environ(), "GPULEDGER_TEST_AS_MAIN=1", "GPULEDGER_TOKEN=")
		cmd.Stderr = os.Stderr
		c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "v0"}, nil)
		cs, err := c.Connect(ctx, &sdk.LoggingTransport{Transport: &sdk.CommandTransport{Command: cmd}, Writer: transcript}, nil)
		if err != nil {
			t.Fatalf("start gpuledger mcp %v: %v", extra, err)
		}
		return cs
	}
	// The API beside it, on the same ledger, with an admin's token and
	// the team's.
	store, err := embedded.Open(ledgerDir, embedded.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	visionToken := api.Token{Name: "vision-agent", SHA256: sum, Scopes: []api.Scope{"team:vision"}}
	adminToken := api.Token{Name: "admin", SHA256: api.HashToken("admin-secret"), Scopes: []api.Scope{api.ScopeAdmin}}
	srv := api.New(api.Options{Store: store, Auth: api.NewAuth([]api.Token{visionToken, adminToken}), Report: reports.Options{Currency: "USD"}})
	apiGet := func(route, secret string) string {
		r := httptest.NewRequest(http.MethodGet, route, nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", route, rec.Code, rec.Body)
		}
		return strings.TrimSpace(rec.Body.String())
	}
	text := func(res *sdk.CallToolResult, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*sdk.TextContent).Text
	}

	var transcript bytes.Buffer
	cs := connect(&transcript)
	got := text(cs.CallTool(ctx, &sdk.CallToolParams{Name: "explain",
		Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-03", "team": "vision", "workload": "vision/train-vision"}}))
	if want := apiGet("/api/v1/explain?from=2026-10-01&to=2026-10-03&team=vision&workload=vision%2Ftrain-vision", "admin-secret"); got != want {
		t.Errorf("explain over stdio:\n%s\nthe API:\n%s", got, want)
	}
	if !strings.Contains(got, `"reconciled":true`) || !strings.Contains(got, `"node":"gpu-node-1"`) {
		t.Errorf("explain: %s", got)
	}
	got = text(cs.CallTool(ctx, &sdk.CallToolParams{Name: "cost", Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-03"}}))
	if want := apiGet("/api/v1/cost?from=2026-10-01&to=2026-10-03", "admin-secret"); got != want || !strings.Contains(got, "ml-research") {
		t.Errorf("cost over stdio, the whole ledger:\n%s\nthe API:\n%s", got, want)
	}
	got = text(cs.CallTool(ctx, &sdk.CallToolParams{Name: "idle_workloads", Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-03", "limit": 5}}))
	if want := apiGet("/api/v1/workloads?from=2026-10-01&limit=5&to=2026-10-03", "admin-secret"); got != want {
		t.Errorf("idle_workloads over stdio:\n%s\nthe API:\n%s", got, want)
	}
	for _, tool := range []string{"budgets", "capacity", "scale_to_zero"} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"at": "2026-10-03T00:00:00Z"}})
		if err != nil || res.IsError {
			t.Errorf("%s: %v %+v", tool, err, res)
		}
	}
	cs.Close()
	var short []string
	for _, l := range strings.Split(transcript.String(), "\n") {
		if len(l) > 400 {
			l = l[:400] + "…"
		}
		short = append(short, l)
	}
	t.Logf("MCP session over stdio (gpuledger mcp, no token; messages cut at 400 bytes):\n%s", strings.Join(short, "\n"))

	// With the team's token: its team only, as the API answers it.
	var scoped bytes.Buffer
	cs = connect(&scoped, "-token=vision-secret", "-auth.tokensFile="+tokens)
	defer cs.Close()
	got = text(cs.CallTool(ctx, &sdk.CallToolParams{Name: "cost", Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-03"}}))
	if want := apiGet("/api/v1/cost?from=2026-10-01&to=2026-10-03", "vision-secret"); got != want || strings.Contains(got, "ml-research") {
		t.Errorf("cost with vision's token:\n%s\nthe API:\n%s", got, want)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "explain", Arguments: map[string]any{"from": "2026-10-01", "to": "2026-10-03", "team": "ml-research"}})
	if err != nil || !res.IsError || strings.Contains(res.Content[0].(*sdk.TextContent).Text, "costMicros") {
		t.Errorf("vision's token explained ml-research's cost: %v %+v", err, res)
	}
}
