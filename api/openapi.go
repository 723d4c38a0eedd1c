package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// The OpenAPI 3 document of every route, served at /api/v1/openapi.json.
// It is built from apiRoutes, and the response schemas from the Go types
// the handlers answer with (by reflection over their JSON tags), so that
// a field cannot be added to an answer without appearing in the document.
// TestOpenAPIRoutes fails when a route of the server is not in apiRoutes
// (or one there is not served), TestOpenAPIParams when a route's query
// parameters differ from the ones its handler takes, and
// TestOpenAPIResponses when an answer does not validate against its
// documented schema.

// apiRoute documents one route.
type apiRoute struct {
	// Method and Path as the server registers them (echo's syntax:
	// /team/:team, /debug/pprof/*).
	Method, Path string
	Summary      string
	// Access says who may call: "public", or the token scopes ("viewer",
	// "team", "admin", "write").
	Access []string
	// Query are the query parameters the handler takes.
	Query []apiParam
	// Response is a value of the JSON answer's type; nil for other
	// answers, whose content types are in Content.
	Response any
	Content  []string
	// Status is the answer's status on success; 200 when zero.
	Status int
	// Example is a query string the route answers successfully in the
	// tests (TestOpenAPIResponses), shown in the document.
	Example string
}

type apiParam struct {
	Name, Description string
	Required          bool
}

var (
	pFrom      = apiParam{"from", "start of the range: RFC 3339, YYYY-MM-DD or YYYY-MM, in UTC", true}
	pTo        = apiParam{"to", "end of the range (exclusive), as from", true}
	pTeam      = apiParam{"team", "one team only (a team's token: its own team, the default)", false}
	pCluster   = apiParam{"cluster", "one cluster only; empty for all", false}
	pAt        = apiParam{"at", "the time of the verdict (RFC 3339); default now", false}
	pMonth     = apiParam{"month", "a month, YYYY-MM", false}
	allocation = []apiParam{
		{"window", "OpenCost's window: today, yesterday, week, lastweek, month, lastmonth, a duration such as 7d, or start,end in RFC 3339 or Unix seconds", true},
		{"aggregate", "cluster, namespace, team, controller, controllerKind or label:kueue.x-k8s.io/queue-name; several joined by ','", false},
		{"step", "a duration; the window is split into sets of this width", false},
		{"accumulate", "true: one set over the whole window", false},
		{"includeIdle", "false: leave out __idle__ (default true; false for a team's token)", false},
		{"shareIdle", "refused: the configuration's costPolicy decides who pays for unallocated capacity", false},
		{"idleByNode", "refused, as shareIdle", false},
		{"resolution", "taken and ignored: the ledger is hourly", false},
		pTeam, pCluster,
	}
)

var (
	readers = []string{"viewer", "team"}
	csvXLSX = []string{"text/csv", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}
)

// apiRoutes are the server's routes, as New registers them.
var apiRoutes = []apiRoute{
	{Method: "GET", Path: "/healthz", Summary: "readiness: ok, or 503 with the reason (the ledger or the write-ahead log is failing)",
		Access: []string{"public"}, Content: []string{"text/plain"}},
	{Method: "GET", Path: "/livez", Summary: "liveness: ok while the process serves HTTP, whatever fails behind it (for a liveness probe; /healthz is for readiness)",
		Access: []string{"public"}, Content: []string{"text/plain"}},
	{Method: "GET", Path: "/api/v1/openapi.json", Summary: "this document", Access: []string{"public"}, Content: []string{"application/json"}},
	{Method: "GET", Path: "/", Summary: "the overview page: the month's cost per team, idle cost, budgets, capacity (signs in by token cookie; a team's token goes to its team's page)",
		Access: readers, Query: []apiParam{pMonth}, Content: []string{"text/html"}},
	{Method: "GET", Path: "/team/:team", Summary: "one team's month: cost, idle cost, budget, cost by day, workloads, its chargeback to download",
		Access: readers, Query: []apiParam{pMonth}, Content: []string{"text/html"}},
	{Method: "GET", Path: "/team/:team/explain", Summary: "the explanation of a team's (or one workload's) month: its lines per GPU and holder, and whether they reconcile with the ledger (as GET /api/v1/explain)",
		Access: readers, Query: []apiParam{pMonth, {"workload", "one workload, namespace/name", false}}, Content: []string{"text/html"}},
	{Method: "GET", Path: "/team/:team/lines.csv", Summary: "every line of a team's (or one workload's) month, as CSV, by the sign-in cookie",
		Access: readers, Query: []apiParam{pMonth, {"workload", "one workload, namespace/name", false}}, Content: []string{"text/csv"}},
	{Method: "GET", Path: "/reports/chargeback/:month", Summary: "the pages' chargeback download, by the sign-in cookie (as /api/v1/reports/chargeback/{month})",
		Access: readers, Query: []apiParam{{"format", "csv, xlsx (default) or focus (FOCUS 1.3 cost and usage rows, CSV)", false}, pCluster, pTeam}, Content: csvXLSX},
	{Method: "POST", Path: "/login", Summary: "signs a browser in: the form field token becomes an HttpOnly cookie; redirects to /",
		Access: []string{"public"}, Status: http.StatusSeeOther, Content: []string{"text/html"}},
	{Method: "GET", Path: "/metrics", Summary: "gpuledger's own metrics in Prometheus' text exposition format", Access: []string{"viewer"},
		Content: []string{"text/plain"}},
	{Method: "GET", Path: "/api/v1/cost", Summary: "cost and GPU-hours per step and group; totalCost sums every point",
		Access: readers, Response: CostResponse{},
		Query: []apiParam{pFrom, pTo, pTeam, pCluster, {"step", "hour, day (default) or month", false},
			{"groupBy", "comma-separated dimensions: cluster, team, namespace, localQueue, clusterQueue, flavor, borrowed", false}},
		Example: "from=2026-10-01&to=2026-10-03&step=day&groupBy=team"},
	{Method: "GET", Path: "/api/v1/reports/chargeback/:month", Summary: "the month's chargeback (csv, xlsx) or its FOCUS 1.3 export (format=focus); 404 for a month with no ledger rows",
		Access: readers, Query: []apiParam{{"format", "csv, xlsx (default) or focus", false}, pCluster, pTeam}, Content: csvXLSX},
	{Method: "GET", Path: "/api/v1/workloads", Summary: "the workloads (Job, JobSet, RayCluster, …) with the most idle cost",
		Access: readers, Response: WorkloadsResponse{}, Query: []apiParam{pFrom, pTo, pTeam, pCluster, {"limit", "how many, 1-1000 (default 20)", false}},
		Example: "from=2026-10-01&to=2026-10-03&limit=5"},
	{Method: "GET", Path: "/api/v1/explain", Summary: "why a team, or one of its workloads, paid what it did: the lines per GPU and holder (pod, workload) with held, busy, idle and unmeasured time, the rate, the unallocated shares and restatements; reconciled says the lines sum to the ledger's figure to the micro-unit; 501 where the ledger keeps no lines",
		Access: readers, Response: ExplainResponse{}, Query: []apiParam{pFrom, pTo, pTeam, pCluster,
			{"workload", "one workload, namespace/name (its pods' lines, without the team's unallocated share)", false},
			{"limit", "how many of the largest lines, 1-10000 (default 100); the totals are over all", false}},
		Example: "from=2026-10-01&to=2026-10-03&team=ml&limit=5"},
	{Method: "GET", Path: "/allocation", Summary: "OpenCost's allocation API over the ledger (GPU fields; other resources 0)",
		Access: readers, Response: AllocationResponse{}, Query: allocation, Example: "window=2026-10-01T00:00:00Z,2026-10-03T00:00:00Z&aggregate=team"},
	{Method: "GET", Path: "/allocation/compute", Summary: "the same as /allocation", Access: readers, Response: AllocationResponse{}, Query: allocation,
		Example: "window=2026-10-01T00:00:00Z,2026-10-02T00:00:00Z&aggregate=namespace&accumulate=true"},
	{Method: "GET", Path: "/api/v1/capacity", Summary: "capacity verdicts: buy or reclaim per flavor, queue waits per ClusterQueue, scale-to-zero per inference endpoint",
		Access: []string{"viewer"}, Response: CapacityResponse{}, Query: []apiParam{pAt}, Example: "at=2026-10-03T00:00:00Z"},
	{Method: "GET", Path: "/api/v1/budgets", Summary: "each budgeted team's month-to-date spend and forecast",
		Access: readers, Response: BudgetsResponse{}, Query: []apiParam{pAt, pTeam, {"month", "the month, YYYY-MM; default at's", false}},
		Example: "at=2026-10-03T00:00:00Z"},
	{Method: "POST", Path: "/api/v1/write", Summary: "Prometheus remote write (1.0 protobuf, snappy; or 2.0, Content-Type proto=io.prometheus.write.v2.Request): dcgm-exporter, kube-state-metrics and Kueue series into the ledger; 204 once durable, 415 for another Content-Type or Content-Encoding",
		Access: []string{"write"}, Status: http.StatusNoContent},
	{Method: "GET", Path: "/api/v1/admin/restatements", Summary: "every team-hour of the range a rewrite changed: before, after, who, with what, why",
		Access: []string{"admin"}, Response: RestatementsResponse{}, Query: []apiParam{pFrom, pTo, pTeam, pCluster},
		Example: "from=2026-10-01&to=2026-11-01"},
	{Method: "GET", Path: "/api/v1/admin/closes", Summary: "the closed months", Access: []string{"admin"}, Response: ClosesResponse{}},
	{Method: "POST", Path: "/api/v1/admin/close", Summary: "closes a month in the token's name; 409 when closed, 400 when not over or not settled",
		Access: []string{"admin"}, Response: ClosePoint{}, Query: []apiParam{{"month", "the month, YYYY-MM", true}, {"note", "an invoice number or remark", false}}},
	{Method: "POST", Path: "/mcp", Summary: "the read routes as Model Context Protocol tools for agents (streamable HTTP, stateless, JSON answers): cost, explain, idle_workloads, budgets, capacity, scale_to_zero; each tool answers what its route answers for the same token",
		Access: readers, Content: []string{"application/json"}},
	{Method: "GET", Path: "/debug/pprof/*", Summary: "Go's profiles (net/http/pprof)", Access: []string{"admin"},
		Content: []string{"application/octet-stream", "text/plain"}},
}

var (
	openAPIOnce sync.Once
	openAPIJSON []byte
)

// openAPI answers GET /api/v1/openapi.json.
func (s *Server) openAPI(c echo.Context) error {
	openAPIOnce.Do(func() {
		// Maps of strings, bools and slices always marshal.
		openAPIJSON, _ = json.MarshalIndent(openAPIDocument(), "", "  ")
	})
	return c.Blob(http.StatusOK, "application/json", openAPIJSON)
}

var echoParam = regexp.MustCompile(`:([A-Za-z]+)`)

// openAPIPath converts echo's path syntax to OpenAPI's.
func openAPIPath(p string) string {
	p = echoParam.ReplaceAllString(p, "{$1}")
	if strings.HasSuffix(p, "/*") {
		p = strings.TrimSuffix(p, "*") + "{profile}"
	}
	return p
}

// openAPIDocument builds the document from apiRoutes.
func openAPIDocument() map[string]any {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	errorSchema := map[string]any{"type": "object", "required": []string{"error"},
		"properties": map[string]any{"error": map[string]any{"type": "string", "description": "what is wrong and what to do"}}}
	schemas["Error"] = errorSchema
	for _, r := range apiRoutes {
		path := openAPIPath(r.Path)
		var params []any
		for _, m := range echoParam.FindAllStringSubmatch(r.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if strings.HasSuffix(r.Path, "/*") {
			params = append(params, map[string]any{"name": "profile", "in": "path", "required": true, "schema": map[string]any{"type": "string"},
				"description": "profile, cmdline, symbol, trace, heap, goroutine, …"})
		}
		for _, q := range r.Query {
			params = append(params, map[string]any{"name": q.Name, "in": "query", "required": q.Required,
				"description": q.Description, "schema": map[string]any{"type": "string"}})
		}
		status := r.Status
		if status == 0 {
			status = http.StatusOK
		}
		resp := map[string]any{"description": http.StatusText(status)}
		content := map[string]any{}
		if r.Response != nil {
			content["application/json"] = map[string]any{"schema": schemaOf(reflect.TypeOf(r.Response), schemas)}
		}
		for _, ct := range r.Content {
			content[ct] = map[string]any{"schema": map[string]any{"type": "string"}}
		}
		if len(content) > 0 {
			resp["content"] = content
		}
		errResp := func(what string) map[string]any {
			return map[string]any{"description": what, "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
		}
		responses := map[string]any{strconv.Itoa(status): resp, "default": errResp("an error: 400 for a bad parameter, 404 for no data, 5xx for the server")}
		op := map[string]any{
			"summary":     r.Summary,
			"operationId": operationID(r),
			"responses":   responses,
			"x-access":    r.Access,
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if r.Access[0] == "public" {
			op["security"] = []any{}
		} else {
			responses["401"] = errResp("no token, or an unknown one")
			responses["403"] = errResp("the token's scopes do not allow this route, or another team's data")
		}
		if r.Path == "/login" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-www-form-urlencoded": map[string]any{
				"schema": map[string]any{"type": "object", "required": []string{"token"},
					"properties": map[string]any{"token": map[string]any{"type": "string"}}}}}}
		}
		if r.Path == "/api/v1/write" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-protobuf": map[string]any{
				"schema": map[string]any{"type": "string", "format": "binary"}}}}
		}
		if r.Example != "" {
			op["x-example"] = r.Path + "?" + r.Example
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(r.Method)] = op
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "gpuledger", "version": "v1",
			"description": "GPU cost attribution and chargeback. Money is given twice: exact integer micro-units (…Micros) and a decimal string with six places.",
			"license":     map[string]any{"name": "Apache-2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"}},
		"paths": paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "a token of -auth.tokensFile"},
				"cookie": map[string]any{"type": "apiKey", "in": "cookie", "name": tokenCookie, "description": "the pages' sign-in (POST /login)"},
			},
		},
		"security": []any{map[string]any{"bearer": []string{}}, map[string]any{"cookie": []string{}}},
	}
}

// operationID names a route: its method and path in camel case, such as
// getApiV1Cost.
func operationID(r apiRoute) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	up := true
	for _, c := range r.Path {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
			up = false
		default:
			up = true
		}
	}
	if r.Path == "/" {
		b.WriteString("Overview")
	}
	return b.String()
}

var timeType = reflect.TypeFor[time.Time]()

// schemaOf returns the OpenAPI schema of the JSON that encoding/json
// writes for t: named structs go to schemas and are referenced.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Pointer:
		s := schemaOf(t.Elem(), schemas)
		if _, ref := s["$ref"]; ref {
			return map[string]any{"allOf": []any{s}, "nullable": true}
		}
		s["nullable"] = true
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice, reflect.Array:
		// A nil slice is null in JSON.
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas), "nullable": t.Kind() == reflect.Slice}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), schemas)}
	case reflect.Struct:
		name := t.Name()
		if name == "" {
			return structSchema(t, schemas)
		}
		if _, ok := schemas[name]; !ok {
			schemas[name] = map[string]any{} // a placeholder while recursing
			schemas[name] = structSchema(t, schemas)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// structSchema lists a struct's JSON fields; embedded structs' fields are
// its own, as encoding/json writes them.
func structSchema(t reflect.Type, schemas map[string]any) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || !f.IsExported() && !f.Anonymous {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = schemaOf(f.Type, schemas)
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
