package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// The overview page at /: this month's cost by team as a chart, the
// budgets' burn, the most idle workloads and the capacity verdicts, for
// clusters without Grafana. One HTML document with its styles and an inline
// SVG chart: no scripts, no external assets. A browser signs in with a
// viewer token once (a form sets an HttpOnly cookie, sent to this page
// only); scripts and other sites cannot use it for the API.

const tokenCookie = "gpuledger_token"

// pageStyle is the pages' common style sheet.
const pageStyle = `body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:64em;color:#1c2430;padding:0 1em}
h1{font-size:1.5em;margin:0}h2{font-size:1.1em;margin:2em 0 .5em}
.sub{color:#5a6472;margin:.2em 0 1.5em}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #e3e6ea}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
`

var overviewTemplate = template.Must(template.New("overview").Funcs(template.FuncMap{
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger: {{.Month}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
` + pageStyle + `.warn{color:#a15c00}.bad{color:#b3261e}.ok{color:#1e7a3c}svg text{font:12px system-ui,sans-serif}
tr.over td{background:#fdecea}
nav a{margin-right:1em}form input{font:inherit}
</style></head><body>
<h1>GPU cost, {{.Month}}</h1>
<p class="sub">Cluster {{if .Cluster}}{{.Cluster}}{{else}}all{{end}} · {{.Currency}} · as of {{.At}} ·
<nav style="display:inline"><a href="?month={{.Prev}}">← {{.Prev}}</a>{{if .Next}}<a href="?month={{.Next}}">{{.Next}} →</a>{{end}}
<a id="csv" href="/reports/chargeback/{{.Month}}?format=csv">CSV</a><a id="xlsx" href="/reports/chargeback/{{.Month}}?format=xlsx">workbook</a></nav>
<form id="pick" method="get" style="display:inline"><input type="month" name="month" value="{{.Month}}" aria-label="month"><button type="submit">show</button></form></p>
{{if not .Teams}}<p id="nodata">The ledger has no hours in {{.Month}}.</p>{{else}}
<h2>Cost by team</h2>
<svg id="cost-chart" role="img" aria-label="cost by team" width="100%" viewBox="0 0 760 {{.ChartHeight}}">
{{range $i, $t := .Teams}}<g class="bar" data-team="{{$t.Team}}" data-cost="{{$t.Cost}}">
<text x="0" y="{{$t.Y}}" dy="14">{{$t.Team}}</text>
<rect x="150" y="{{$t.Y}}" width="{{$t.Width}}" height="18" fill="{{$t.Color}}"></rect>
<text x="{{$t.LabelX}}" y="{{$t.Y}}" dy="14">{{$t.Cost}}</text></g>
{{end}}</svg>
<table id="teams"><tr><th>team</th><th class="n">cost</th><th class="n">idle cost</th><th class="n">GPU-hours</th><th class="n">active</th></tr>
{{range .Teams}}<tr><td><a href="/team/{{.Team}}?month={{$.Month}}">{{.Team}}</a></td><td class="n">{{.Cost}}</td><td class="n">{{.Idle}}</td><td class="n">{{printf "%.1f" .GPUHours}}</td><td class="n">{{.Active}}</td></tr>
{{end}}<tr><th>TOTAL</th><th class="n" id="total">{{.Total}}</th><th></th><th></th><th></th></tr></table>
{{end}}
{{if .Budgets}}<h2>Budgets{{if .BudgetsFinal}}, final{{end}}</h2>
<table id="budgets"><tr><th>team</th><th class="n">budget</th><th class="n">spent</th><th class="n">spent %</th><th class="n">{{if .BudgetsFinal}}month's spend{{else}}month-end forecast{{end}}</th><th class="n">forecast %</th></tr>
{{range .Budgets}}<tr{{if .Over}} class="over"{{end}}><td>{{.Team}}</td><td class="n">{{.Budget}}</td><td class="n">{{.Spent}}</td><td class="n {{.Class}}">{{.SpentPct}}</td><td class="n">{{.Forecast}}</td><td class="n {{.ForecastClass}}">{{.ForecastPct}}</td></tr>
{{end}}</table>{{end}}
{{if .Idle}}<h2>Idle leaderboard</h2>
<table id="idle"><tr><th>team</th><th>workload</th><th class="n">GPU-hours</th><th class="n">efficiency</th><th class="n">idle cost</th></tr>
{{range .Idle}}<tr><td><a href="/team/{{.Team}}?month={{$.Month}}">{{.Team}}</a></td><td><a href="/team/{{.Team}}/explain?month={{$.Month}}&amp;workload={{.Namespace}}%2F{{.Name}}">{{.Namespace}}/{{.Kind}}/{{.Name}}</a></td><td class="n">{{printf "%.1f" .GPUHours}}</td><td class="n">{{.Efficiency}}</td><td class="n">{{.IdleCost}}</td></tr>
{{end}}</table>{{end}}
{{if .Capacity}}<h2>Capacity</h2>
<table id="capacity"><tr><th>flavor</th><th class="n">GPUs</th><th class="n">allocated</th><th class="n">active</th><th>verdict</th></tr>
{{range .Capacity}}<tr><td>{{.Flavor}}</td><td class="n">{{printf "%.0f" .GPUs}}</td><td class="n">{{pct .Allocated}}</td><td class="n">{{pct .Active}}</td><td{{if .Action}} class="warn"{{end}}>{{if .Fired}}buy {{.PurchaseGPUs}} GPUs: {{else if .Reclaim}}reclaim {{printf "%.1f" .Reclaim.IdleGPUs}} idle GPUs{{range $i, $h := .Reclaim.Holders}}{{if lt $i 3}}{{if $i}},{{else}} (most idle:{{end}} {{$h.Team}}/{{$h.Namespace}} {{printf "%.1f" $h.IdleGPUs}}{{end}}{{end}}{{if .Reclaim.Holders}}){{end}}: {{end}}{{.Why}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger: sign in</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:4em auto;max-width:28em;color:#1c2430}input{width:100%;margin:.5em 0;padding:.4em}</style></head>
<body><h1>gpuledger</h1><p>{{.}}</p>
<form method="post" action="/login"><label>API token (viewer or admin scope)<input type="password" name="token" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form></body></html>
`))

type overviewTeam struct {
	Team, Cost, Idle, Active, Color string
	GPUHours                        float64
	Y, Width, LabelX                int
}

type overviewBudget struct {
	Team, Budget, Spent, SpentPct, Forecast, ForecastPct, Class, ForecastClass string
	// Over is set when the team's spend (or its forecast) is past its
	// budget: the row is highlighted.
	Over bool
}

// roundColumn formats one money column of rows and its TOTAL (last) in
// cents, rounded as the chargeback's table is: the rows add up to the
// TOTAL shown.
func roundColumn(rows []ledger.Row, f func(*ledger.Row) int64) []string {
	col := make([]int64, len(rows)+1)
	for i := range rows {
		col[i] = f(&rows[i])
		col[len(rows)] += col[i]
	}
	out := make([]string, len(col))
	for i, c := range reports.RoundCents(col) {
		out[i] = ledger.FormatCents(c * ledger.MicrosPerCent)
	}
	return out
}

type overviewWorkload struct {
	Team, Namespace, Kind, Name, Efficiency, IdleCost string
	GPUHours                                          float64
}

// overview answers GET /?month=YYYY-MM (default: the newest month the
// ledger has hours of, in the last year).
func (s *Server) overview(c echo.Context) error {
	v, err := params(c, "month")
	if err != nil {
		return err
	}
	if p := principalOf(c); !p.has(ScopeAdmin) && !p.has(ScopeViewer) {
		// A team's token sees its own team's page, never every team's.
		q := ""
		if m := v.Get("month"); m != "" {
			q = "?month=" + url.QueryEscape(m)
		}
		return c.Redirect(http.StatusSeeOther, "/team/"+url.PathEscape(p.teams()[0])+q)
	}
	now, month, end, at, err := s.pageMonth(c, v.Get("month"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	o := s.opts.Capacity
	rows, err := s.opts.Store.Query(ctx, ledger.Query{From: month, To: end, Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: o.Cluster})
	if err != nil {
		return err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].CostMicros > rows[j].CostMicros })
	data := map[string]any{"Month": month.Format("2006-01"), "Prev": month.AddDate(0, -1, 0).Format("2006-01"), "Cluster": o.Cluster,
		"Currency": s.opts.Report.Currency, "At": at.UTC().Format("2006-01-02 15:04 MST")}
	if !end.After(ledger.StepMonth.Truncate(now)) {
		data["Next"] = end.Format("2006-01")
	}
	var total, top int64
	for _, r := range rows {
		total += r.CostMicros
		top = max(top, r.CostMicros)
	}
	// The rows and the TOTAL are rounded as the chargeback's table is
	// (reports.RoundCents): the rows add up to the TOTAL shown.
	costs, idles := roundColumn(rows, func(r *ledger.Row) int64 { return r.CostMicros }),
		roundColumn(rows, func(r *ledger.Row) int64 { return r.IdleCostMicros })
	var teams []overviewTeam
	for i, r := range rows {
		w := 0
		if top > 0 {
			w = int(480 * r.CostMicros / top)
		}
		color := "#3b6fb6"
		if r.Team == ledger.TeamUnallocated || r.Team == ledger.TeamUnowned {
			color = "#9aa3ad"
		}
		active := "-"
		if measured := r.GPUSeconds - r.UnmeasuredGPUSeconds; measured > 0 && r.Team != ledger.TeamUnallocated {
			active = fmt.Sprintf("%.0f%%", 100*r.ActiveGPUSeconds/measured)
		}
		teams = append(teams, overviewTeam{Team: r.Team, Cost: costs[i], Idle: idles[i],
			Active: active, Color: color, GPUHours: r.GPUSeconds / 3600, Y: 8 + 26*i, Width: w, LabelX: 158 + w})
	}
	data["Teams"], data["Total"], data["ChartHeight"] = teams, costs[len(rows)], 16+26*len(teams)
	// Budgets show in a month without hours too: nothing spent of them.
	{
		budgets, err := capacity.BudgetsFor(ctx, s.opts.Store, o.Cluster, o.Budgets, month, now)
		if err != nil {
			return err
		}
		var bs []overviewBudget
		pct := func(spent, budget int64) (string, string) {
			p := float64(spent) / float64(budget)
			class := "ok"
			switch {
			case p >= 1:
				class = "bad"
			case p >= 0.8:
				class = "warn"
			}
			return fmt.Sprintf("%.0f%%", 100*p), class
		}
		final := false
		for _, b := range budgets {
			ob := overviewBudget{Team: b.Team, Budget: ledger.FormatCents(b.BudgetMicros), Spent: ledger.FormatCents(b.MonthToDateMicros),
				Forecast: ledger.FormatCents(b.ForecastMicros)}
			ob.SpentPct, ob.Class = pct(b.MonthToDateMicros, b.BudgetMicros)
			ob.ForecastPct, ob.ForecastClass = pct(b.ForecastMicros, b.BudgetMicros)
			ob.Over = b.ForecastMicros > b.BudgetMicros
			bs = append(bs, ob)
			final = final || b.Final
		}
		data["Budgets"], data["BudgetsFinal"] = bs, final
	}
	if len(rows) > 0 {
		wl, err := s.opts.Store.TopWorkloads(ctx, ledger.Query{From: month, To: end, Cluster: o.Cluster}, 10)
		if err != nil {
			return err
		}
		var idle []overviewWorkload
		for _, w := range wl {
			idle = append(idle, overviewWorkload{Team: w.Team, Namespace: w.Namespace, Kind: w.Kind, Name: w.Name, Efficiency: efficiency(&w),
				IdleCost: ledger.FormatCents(w.IdleCostMicros), GPUHours: w.GPUSeconds / 3600})
		}
		data["Idle"] = idle
		if data["Capacity"], err = capacity.Evaluate(ctx, s.opts.Store, o.Cluster, at, o.rule(), o.PricesMicros); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if err := overviewTemplate.Execute(&b, data); err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// efficiency is a workload's busy share of the GPU time measured, "-"
// when none was.
func efficiency(w *ledger.WorkloadRow) string {
	if measured := w.GPUSeconds - w.UnmeasuredGPUSeconds; measured > 0 {
		return fmt.Sprintf("%.0f%%", 100*w.ActiveGPUSeconds/measured)
	}
	return "-"
}

// pageMonth is a page's month: month= (YYYY-MM), else the newest month
// the ledger has hours of; its end; now; and the time its figures are as
// of (its end, or now in the month now is in).
func (s *Server) pageMonth(c echo.Context, m string) (now, month, end, at time.Time, err error) {
	now = time.Now()
	if s.opts.Capacity.Now != nil {
		now = s.opts.Capacity.Now()
	}
	month = ledger.StepMonth.Truncate(now)
	if m != "" {
		if month, err = time.Parse("2006-01", m); err != nil {
			return now, month, end, at, badf("month=%q is not a month; want YYYY-MM such as 2026-10", m)
		}
	} else if month, err = s.newestMonth(c.Request().Context(), month); err != nil {
		return now, month, end, at, err
	}
	end = month.AddDate(0, 1, 0)
	at = end
	if now.Before(end) {
		at = now.UTC().Truncate(time.Hour)
	}
	return now, month, end, at, nil
}

// newestMonth is the newest month, of the year to current (the month now
// is in), that the ledger has hours of: the page opens on it. current
// when it has none.
func (s *Server) newestMonth(ctx context.Context, current time.Time) (time.Time, error) {
	rows, err := s.opts.Store.Query(ctx, ledger.Query{From: current.AddDate(-1, 0, 0), To: current.AddDate(0, 1, 0), Step: ledger.StepMonth,
		Cluster: s.opts.Capacity.Cluster})
	if err != nil {
		return current, err
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].GPUSeconds > 0 || rows[i].CostMicros != 0 {
			return rows[i].Hour, nil
		}
	}
	return current, nil
}

// browser lets the pages authenticate by the cookie the sign-in form set,
// for tokens of one of scopes, and answers a failed check with the form
// instead of JSON.
func (s *Server) browser(scopes ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return s.browserToken(s.require(scopes...)(next))
	}
}

func (s *Server) browserToken(check echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Header.Get("Authorization") == "" {
			if ck, err := r.Cookie(tokenCookie); err == nil && ck.Value != "" {
				r.Header.Set("Authorization", "Bearer "+ck.Value)
			}
		}
		err := check(c)
		var ae *authError
		if errors.As(err, &ae) {
			return s.loginPage(c, ae.code, ae.msg)
		}
		return err
	}
}

func (s *Server) loginPage(c echo.Context, code int, msg string) error {
	var b bytes.Buffer
	if err := loginTemplate.Execute(&b, msg); err != nil {
		return err
	}
	return c.HTMLBlob(code, b.Bytes())
}

// login answers POST /login: a token that may read the overview is kept in
// an HttpOnly cookie for this site's pages.
func (s *Server) login(c echo.Context) error {
	token := c.FormValue("token")
	r := c.Request().Clone(c.Request().Context())
	r.Header.Set("Authorization", "Bearer "+token)
	p, err := s.opts.Auth.authenticate(r)
	if err != nil {
		return s.loginPage(c, http.StatusUnauthorized, err.Error())
	}
	if !p.has(ScopeAdmin) && !p.has(ScopeViewer) && len(p.teams()) == 0 {
		return s.loginPage(c, http.StatusForbidden, fmt.Sprintf("token %q has neither a viewer nor a team scope: it may not read costs", p.name))
	}
	c.SetCookie(&http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.Request().TLS != nil, MaxAge: 12 * 3600})
	return c.Redirect(http.StatusSeeOther, "/")
}
