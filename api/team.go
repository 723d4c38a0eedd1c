package api

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// The team page at /team/<team>?month=YYYY-MM: what one team's GPUs cost
// in a month, its daily cost as a chart, its idle share, its budget and
// its workloads, with the month's chargeback to download. A viewer's
// token opens every team's; a team's token its own only (the overview
// sends it there).

var teamTemplate = template.Must(template.New("team").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger: {{.Team}}, {{.Month}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
` + pageStyle + `.bad{color:#b3261e}.ok{color:#1e7a3c}svg text{font:11px system-ui,sans-serif}nav a{margin-right:1em}
dl{display:grid;grid-template-columns:repeat(4,1fr);gap:.5em 2em;margin:0}dt{color:#5a6472}dd{margin:0;font-size:1.3em;font-variant-numeric:tabular-nums}
</style></head><body>
<h1>GPU cost of {{.Team}}, {{.Month}}</h1>
<p class="sub">Cluster {{if .Cluster}}{{.Cluster}}{{else}}all{{end}} · {{.Currency}} · as of {{.At}} ·
<nav style="display:inline">{{if .Viewer}}<a href="/?month={{.Month}}">all teams</a>{{end}}<a href="?month={{.Prev}}">← {{.Prev}}</a>{{if .Next}}<a href="?month={{.Next}}">{{.Next}} →</a>{{end}}
<a id="csv" href="{{.CSV}}">CSV</a><a id="xlsx" href="{{.XLSX}}">workbook</a><a id="explain" href="/team/{{.Team}}/explain?month={{.Month}}">every line</a></nav>
<form id="pick" method="get" style="display:inline"><input type="month" name="month" value="{{.Month}}" aria-label="month"><button type="submit">show</button></form></p>
{{if not .Days}}<p id="nodata">The ledger has no hours of {{.Team}} in {{.Month}}.</p>{{else}}
<dl id="summary"><div><dt>cost</dt><dd id="cost">{{.Cost}}</dd></div><div><dt>idle cost</dt><dd id="idle">{{.Idle}} ({{.IdleShare}})</dd></div>
<div><dt>GPU-hours</dt><dd>{{printf "%.1f" .GPUHours}}</dd></div>
<div><dt>budget</dt><dd id="budget"{{if .Budget}} class="{{if .Budget.Over}}bad{{else}}ok{{end}}"{{end}}>{{if .Budget}}{{.Budget.Spent}} of {{.Budget.Budget}}{{if .Budget.Final}}{{else}}, forecast {{.Budget.Forecast}}{{end}}{{else}}none{{end}}</dd></div></dl>
<h2>Cost by day</h2>
<svg id="daily" role="img" aria-label="cost by day" width="100%" viewBox="0 0 760 170">
<line x1="40" y1="140" x2="760" y2="140" stroke="#c9ced4"></line>
<text x="0" y="14">{{.Top}}</text>
{{range .Days}}<g class="day" data-day="{{.Day}}" data-cost="{{.Cost}}"><rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="#3b6fb6"><title>{{.Day}}: {{.Cost}}</title></rect>{{if .Label}}<text x="{{.X}}" y="156">{{.Label}}</text>{{end}}</g>
{{end}}</svg>
<h2>Workloads</h2>
<table id="workloads"><tr><th>workload</th><th class="n">GPU-hours</th><th class="n">efficiency</th><th class="n">cost</th><th class="n">idle cost</th></tr>
{{range .Workloads}}<tr><td><a href="/team/{{$.Team}}/explain?month={{$.Month}}&amp;workload={{.Namespace}}%2F{{.Name}}">{{.Namespace}}/{{.Kind}}/{{.Name}}</a></td><td class="n">{{printf "%.1f" .GPUHours}}</td><td class="n">{{.Efficiency}}</td><td class="n">{{.Cost}}</td><td class="n">{{.IdleCost}}</td></tr>
{{end}}</table>
{{if .TopLines}}<h2>Largest lines</h2>
<table id="toplines"><tr><th>device</th><th>holder</th><th class="n">GPU-hours</th><th class="n">cost</th><th class="n">idle cost</th></tr>
{{range .TopLines}}<tr><td>{{.Device}}</td><td>{{.Holder}}</td><td class="n">{{printf "%.1f" .GPUHours}}</td><td class="n">{{.Cost}}</td><td class="n">{{.Idle}}</td></tr>
{{end}}</table><p><a href="/team/{{.Team}}/explain?month={{.Month}}">every line</a> ({{.LineCount}}{{if .Reconciled}}, reconciled with the ledger to the micro-unit{{end}})</p>{{end}}{{end}}
</body></html>
`))

type teamDay struct {
	Day, Cost, Label string
	X, Y, W, H       int
}

type teamWorkload struct {
	Namespace, Kind, Name, Efficiency, Cost, IdleCost string
	GPUHours                                          float64
}

type teamBudget struct {
	Budget, Spent, Forecast string
	Over, Final             bool
}

// teamPage answers GET /team/:team?month=YYYY-MM (default: the newest
// month the ledger has hours of).
func (s *Server) teamPage(c echo.Context) error {
	v, err := params(c, "month")
	if err != nil {
		return err
	}
	team, err := teamFilter(c, c.Param("team"))
	if err != nil {
		return err
	}
	now, month, end, at, err := s.pageMonth(c, v.Get("month"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	o := s.opts.Capacity
	p := principalOf(c)
	data := map[string]any{"Team": team, "Month": month.Format("2006-01"), "Prev": month.AddDate(0, -1, 0).Format("2006-01"), "Cluster": o.Cluster,
		"Currency": s.opts.Report.Currency, "At": at.UTC().Format("2006-01-02 15:04 MST"), "Viewer": p.has(ScopeAdmin) || p.has(ScopeViewer)}
	if !end.After(ledger.StepMonth.Truncate(now)) {
		data["Next"] = end.Format("2006-01")
	}
	q := url.Values{"team": {team}}
	data["CSV"] = "/reports/chargeback/" + month.Format("2006-01") + "?format=csv&" + q.Encode()
	data["XLSX"] = "/reports/chargeback/" + month.Format("2006-01") + "?format=xlsx&" + q.Encode()
	days, err := s.opts.Store.Query(ctx, ledger.Query{From: month, To: end, Step: ledger.StepDay, Cluster: o.Cluster, Team: team})
	if err != nil {
		return err
	}
	var sum ledger.Row
	var top int64
	for _, d := range days {
		sum.CostMicros += d.CostMicros
		sum.IdleCostMicros += d.IdleCostMicros
		sum.GPUSeconds += d.GPUSeconds
		top = max(top, d.CostMicros)
	}
	if len(days) > 0 && (sum.GPUSeconds > 0 || sum.CostMicros != 0) {
		// One bar a day of the month, 120 px for the costliest.
		n := int(end.Sub(month).Hours() / 24)
		w := 720 / n
		var bars []teamDay
		for _, d := range days {
			i := int(d.Hour.Sub(month).Hours() / 24)
			h := 0
			if top > 0 {
				h = int(120 * max(d.CostMicros, 0) / top)
			}
			bar := teamDay{Day: d.Hour.Format("2006-01-02"), Cost: ledger.FormatCents(d.CostMicros), X: 40 + i*w, Y: 140 - h, W: max(w-2, 1), H: h}
			if d.Hour.Day() == 1 || d.Hour.Day()%5 == 0 {
				bar.Label = fmt.Sprint(d.Hour.Day())
			}
			bars = append(bars, bar)
		}
		data["Days"], data["Top"] = bars, ledger.FormatCents(top)
		data["Cost"], data["Idle"], data["GPUHours"] = ledger.FormatCents(sum.CostMicros), ledger.FormatCents(sum.IdleCostMicros), sum.GPUSeconds/3600
		share := "-"
		if sum.CostMicros > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(sum.IdleCostMicros)/float64(sum.CostMicros))
		}
		data["IdleShare"] = share
		if _, ok := o.Budgets[team]; ok {
			budgets, err := capacity.BudgetsFor(ctx, s.opts.Store, o.Cluster, map[string]int64{team: o.Budgets[team]}, month, now)
			if err != nil {
				return err
			}
			for _, b := range budgets {
				data["Budget"] = teamBudget{Budget: ledger.FormatCents(b.BudgetMicros), Spent: ledger.FormatCents(b.MonthToDateMicros),
					Forecast: ledger.FormatCents(b.ForecastMicros), Over: b.ForecastMicros > b.BudgetMicros, Final: b.Final}
			}
		}
		wl, err := s.opts.Store.TopWorkloads(ctx, ledger.Query{From: month, To: end, Cluster: o.Cluster, Team: team}, 50)
		if err != nil {
			return err
		}
		var ws []teamWorkload
		for _, w := range wl {
			ws = append(ws, teamWorkload{Namespace: w.Namespace, Kind: w.Kind, Name: w.Name, Efficiency: efficiency(&w), GPUHours: w.GPUSeconds / 3600,
				Cost: ledger.FormatCents(w.CostMicros), IdleCost: ledger.FormatCents(w.IdleCostMicros)})
		}
		data["Workloads"] = ws
		if ex, err := reports.Explain(ctx, s.opts.Store, reports.ExplainQuery{From: month, To: end, Cluster: o.Cluster, Team: team, Limit: 5}); err == nil {
			var top []explainRow
			for i := range ex.Lines {
				top = append(top, explainRowOf(&ex.Lines[i]))
			}
			data["TopLines"], data["LineCount"], data["Reconciled"] = top, ex.LineCount, ex.Reconciled
		} else if !errors.Is(err, reports.ErrNoLines) {
			return err
		}
	}
	var b bytes.Buffer
	if err := teamTemplate.Execute(&b, data); err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}
