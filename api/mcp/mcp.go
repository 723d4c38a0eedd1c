// Package mcp serves gpuledger's read API to agents as a Model Context
// Protocol server (the official Go SDK): each tool calls one read route of
// the API in-process with the caller's token and answers with its JSON,
// so a tool's answer is the API's answer, scoped by the same tokens (a
// team's token sees its team only). Nothing writes.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures a server.
type Options struct {
	// API is gpuledger's HTTP API (api.Server.Handler), called in-process.
	API http.Handler
	// Authorization is sent to the API when the client's own request has
	// none (stdio): "Bearer <token>". Over HTTP the client's header is
	// forwarded instead.
	Authorization string
	// Version is the server's version, as gpuledger version prints it.
	Version string
}

// NewServer returns the MCP server with gpuledger's tools.
func NewServer(o Options) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "gpuledger", Title: "gpuledger: GPU cost per team", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "gpuledger attributes a Kubernetes cluster's GPU cost to teams, hour by hour, to the micro-unit. " +
			"Money fields ending in Micros are integer millionths of the currency; the other money fields are the same as decimals. " +
			"Times are RFC 3339, a date (2026-10-01) or a month (2026-10), UTC; to is exclusive. " +
			"Every answer is the answer of the HTTP API route the tool names, with the token's scope.",
	})
	c := caller{o}
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	sdk.AddTool(s, &sdk.Tool{Name: "cost", Title: "GPU cost by any grouping and period", Annotations: ro,
		Description: "GET /api/v1/cost: cost, idle, unmeasured and unallocated cost and GPU-hours per step (hour, day, month) and group " +
			"(cluster, team, namespace, localQueue, clusterQueue, flavor, borrowed); totalCost sums every point."},
		func(ctx context.Context, req *sdk.CallToolRequest, in CostInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/cost", in.query(), "")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "explain", Title: "Explain a bill line down to GPUs and pods", Annotations: ro,
		Description: "GET /api/v1/explain: why a team, or one of its workloads, paid what it did over a period: the lines per GPU " +
			"(node, index, MIG profiles) and holder (pod, workload) with held, busy, idle and unmeasured hours, the rate, the " +
			"unallocated shares and restatements; reconciled says the lines sum to the ledger's figure to the micro-unit."},
		func(ctx context.Context, req *sdk.CallToolRequest, in ExplainInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/explain", in.query(), "")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "idle_workloads", Title: "Workloads that hold GPUs idle", Annotations: ro,
		Description: "GET /api/v1/workloads: the workloads (Job, JobSet, RayCluster, ReplicaSet, …) with the most idle GPU cost over a period."},
		func(ctx context.Context, req *sdk.CallToolRequest, in WorkloadsInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/workloads", in.query(), "")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "budgets", Title: "Budgets and forecasts", Annotations: ro,
		Description: "GET /api/v1/budgets: each budgeted team's month-to-date spend, its forecast for the month, and the share of its budget reached."},
		func(ctx context.Context, req *sdk.CallToolRequest, in BudgetsInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/budgets", in.query(), "")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "capacity", Title: "Capacity verdicts: buy or reclaim", Annotations: ro,
		Description: "GET /api/v1/capacity: per GPU flavor whether to buy more (utilisation held over the threshold for the window) or " +
			"reclaim idle GPUs first, and per ClusterQueue its wait for admission against the 30-minute trigger (a viewer's token)."},
		func(ctx context.Context, req *sdk.CallToolRequest, in AtInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/capacity", in.query(), "")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "scale_to_zero", Title: "Inference endpoints to scale to zero", Annotations: ro,
		Description: "The endpoints of GET /api/v1/capacity: per inference endpoint whether to scale to zero, the KEDA cooldown, " +
			"the GPU-hours it would save and the cold starts it would cost (a viewer's token)."},
		func(ctx context.Context, req *sdk.CallToolRequest, in AtInput) (*sdk.CallToolResult, any, error) {
			return c.call(ctx, req, "/api/v1/capacity", in.query(), "endpoints")
		})
	return s
}

// caller calls the API for the tools.
type caller struct{ o Options }

// call GETs route with q, with the client's Authorization header (over
// HTTP) or the server's (stdio), and answers with the API's JSON; with
// pick, only that field of it. An API error is the tool's error result,
// with the API's message.
func (c caller) call(ctx context.Context, req *sdk.CallToolRequest, route string, q url.Values, pick string) (*sdk.CallToolResult, any, error) {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, route+"?"+q.Encode(), nil)
	r.RemoteAddr = "127.0.0.1:0"
	auth := c.o.Authorization
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		auth = req.Extra.Header.Get("Authorization")
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	c.o.API.ServeHTTP(rec, r)
	body := bytes.TrimSpace(rec.Body.Bytes())
	if rec.Code != http.StatusOK {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{
			Text: fmt.Sprintf("GET %s: %d %s: %s", r.URL.RequestURI(), rec.Code, http.StatusText(rec.Code), body)}}}, nil, nil
	}
	if pick != "" {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(body, &all); err != nil {
			return nil, nil, fmt.Errorf("GET %s: %w", route, err)
		}
		body = []byte(`{"` + pick + `":` + string(all[pick]) + `}`)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}, StructuredContent: json.RawMessage(body)}, nil, nil
}

// CostInput is the cost tool's arguments.
type CostInput struct {
	From    string   `json:"from" jsonschema:"start of the period: RFC 3339, a date (2026-10-01) or a month (2026-10), UTC"`
	To      string   `json:"to" jsonschema:"end of the period, exclusive, in the same forms"`
	Step    string   `json:"step,omitempty" jsonschema:"hour, day (default) or month"`
	GroupBy []string `json:"groupBy,omitempty" jsonschema:"dimensions: cluster, team, namespace, localQueue, clusterQueue, flavor, borrowed (default team)"`
	Team    string   `json:"team,omitempty" jsonschema:"one team; a team's token reads its own only"`
	Cluster string   `json:"cluster,omitempty" jsonschema:"one cluster; empty for all"`
}

func (in CostInput) query() url.Values {
	q := period(in.From, in.To, in.Team, in.Cluster)
	set(q, "step", in.Step)
	set(q, "groupBy", strings.Join(in.GroupBy, ","))
	return q
}

// ExplainInput is the explain tool's arguments.
type ExplainInput struct {
	From     string `json:"from" jsonschema:"start of the period: RFC 3339, a date or a month, UTC"`
	To       string `json:"to" jsonschema:"end of the period, exclusive"`
	Team     string `json:"team,omitempty" jsonschema:"the team explained; a team's token explains its own only"`
	Cluster  string `json:"cluster,omitempty" jsonschema:"one cluster; empty for all"`
	Workload string `json:"workload,omitempty" jsonschema:"one workload, namespace/name, such as research/train-0042"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many of the largest lines (1-10000, default 100); the totals are over all"`
}

func (in ExplainInput) query() url.Values {
	q := period(in.From, in.To, in.Team, in.Cluster)
	set(q, "workload", in.Workload)
	if in.Limit != 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	return q
}

// WorkloadsInput is the idle_workloads tool's arguments.
type WorkloadsInput struct {
	From    string `json:"from" jsonschema:"start of the period: RFC 3339, a date or a month, UTC"`
	To      string `json:"to" jsonschema:"end of the period, exclusive"`
	Team    string `json:"team,omitempty" jsonschema:"one team; a team's token reads its own only"`
	Cluster string `json:"cluster,omitempty" jsonschema:"one cluster; empty for all"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many workloads, 1-1000 (default 20)"`
}

func (in WorkloadsInput) query() url.Values {
	q := period(in.From, in.To, in.Team, in.Cluster)
	if in.Limit != 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	return q
}

// BudgetsInput is the budgets tool's arguments.
type BudgetsInput struct {
	At    string `json:"at,omitempty" jsonschema:"the moment of the forecast, RFC 3339 (default now, or the ledger's end)"`
	Team  string `json:"team,omitempty" jsonschema:"one team; a team's token reads its own only"`
	Month string `json:"month,omitempty" jsonschema:"the month, YYYY-MM (default at's)"`
}

func (in BudgetsInput) query() url.Values {
	q := url.Values{}
	set(q, "at", in.At)
	set(q, "team", in.Team)
	set(q, "month", in.Month)
	return q
}

// AtInput is the capacity tools' arguments.
type AtInput struct {
	At string `json:"at,omitempty" jsonschema:"the moment of the verdicts, RFC 3339 (default now, or the ledger's end)"`
}

func (in AtInput) query() url.Values {
	q := url.Values{}
	set(q, "at", in.At)
	return q
}

func period(from, to, team, cluster string) url.Values {
	q := url.Values{}
	set(q, "from", from)
	set(q, "to", to)
	set(q, "team", team)
	set(q, "cluster", cluster)
	return q
}

func set(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// Handler serves the tools as MCP's streamable HTTP transport, stateless
// (each POST stands alone), answering JSON: the caller's Authorization
// header goes to the API with every call.
func Handler(o Options) http.Handler {
	srv := NewServer(o)
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// ServeStdio serves the tools over stdin and stdout until the client
// closes them or ctx ends.
func ServeStdio(ctx context.Context, o Options) error {
	return NewServer(o).Run(ctx, &sdk.StdioTransport{})
}
