package api

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// The explanation page at /team/<team>/explain?month=YYYY-MM[&workload=ns/name]:
// a team's (or one workload's) month, its lines per GPU and holder, and
// whether they reconcile with the ledger; /team/<team>/lines.csv every
// line of it. By the sign-in cookie, as the team page.

var explainTemplate = template.Must(template.New("explain").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger: {{.What}}, {{.Month}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
` + pageStyle + `.bad{color:#b3261e}.ok{color:#1e7a3c}nav a{margin-right:1em}
</style></head><body>
<h1>Why {{.What}} paid {{.Cost}} in {{.Month}}</h1>
<p class="sub">{{.Currency}} · <nav style="display:inline"><a href="/team/{{.Team}}?month={{.Month}}">{{.Team}}'s month</a><a id="csv" href="{{.CSV}}">every line (CSV)</a></nav></p>
<p id="verdict" class="{{if .Reconciled}}ok{{else}}bad{{end}}">{{.Count}} lines sum to {{.LinesCost}}: {{if .Reconciled}}the ledger's figure, to the micro-unit{{else}}not the ledger's {{.Cost}}; the hours were rewritten between the lines and the rows, write them again{{end}}.
Idle {{.Idle}}, unmeasured {{.Unmeasured}}, unallocated share {{.Unallocated}}.</p>
<p>{{.Rule}}</p>
<h2>{{if .Cut}}The {{len .Lines}} largest lines{{else}}Lines{{end}}</h2>
<table id="lines"><tr><th>device</th><th>holder</th><th>kind</th><th>flavor</th><th class="n">rate/h</th><th class="n">GPU-hours</th><th class="n">busy</th><th class="n">unmeasured</th><th class="n">cost</th><th class="n">idle cost</th></tr>
{{range .Lines}}<tr><td>{{.Device}}</td><td>{{.Holder}}</td><td>{{.Kind}}</td><td>{{.Flavor}}</td><td class="n" title="{{.RateSource}}">{{.Rate}}</td><td class="n">{{printf "%.2f" .GPUHours}}</td><td class="n">{{printf "%.2f" .Busy}}</td><td class="n">{{printf "%.2f" .Unmeasured}}</td><td class="n">{{.Cost}}</td><td class="n">{{.Idle}}</td></tr>
{{end}}</table>
</body></html>
`))

type explainRow struct {
	Device, Holder, Kind, Flavor, Rate, RateSource, Cost, Idle string
	GPUHours, Busy, Unmeasured                                 float64
}

func explainRowOf(x *ledger.Line) explainRow {
	r := explainRow{Device: x.Device(), Holder: x.Holder(), Kind: string(x.Kind), Flavor: x.Flavor, RateSource: x.RateSource, Cost: ledger.FormatCents(x.CostMicros), Idle: ledger.FormatCents(x.IdleCostMicros),
		GPUHours: x.GPUSeconds / 3600, Busy: x.ActiveGPUSeconds / 3600, Unmeasured: x.UnmeasuredGPUSeconds / 3600}
	if x.RateMicrosPerHour > 0 {
		r.Rate = ledger.FormatCents(x.RateMicrosPerHour)
	}
	return r
}

// explainQuery reads the pages' team, month and workload.
func (s *Server) explainQuery(c echo.Context) (reports.ExplainQuery, url.Values, error) {
	v, err := params(c, "month", "workload")
	if err != nil {
		return reports.ExplainQuery{}, nil, err
	}
	team, err := teamFilter(c, c.Param("team"))
	if err != nil {
		return reports.ExplainQuery{}, nil, err
	}
	_, month, end, _, err := s.pageMonth(c, v.Get("month"))
	if err != nil {
		return reports.ExplainQuery{}, nil, err
	}
	q := reports.ExplainQuery{From: month, To: end, Cluster: s.opts.Capacity.Cluster, Team: team}
	if w := v.Get("workload"); w != "" {
		ns, name, ok := strings.Cut(w, "/")
		if !ok || ns == "" || name == "" {
			return q, nil, badf("workload=%q is not a workload; want namespace/name, such as ml/train-0042", w)
		}
		q.Namespace, q.Workload = ns, name
	}
	return q, v, nil
}

// explainPage answers GET /team/:team/explain?month=&workload=.
func (s *Server) explainPage(c echo.Context) error {
	q, v, err := s.explainQuery(c)
	if err != nil {
		return err
	}
	ex, err := reports.Explain(c.Request().Context(), s.opts.Store, q)
	if err != nil {
		return err
	}
	what := q.Team
	if q.Workload != "" {
		what = fmt.Sprintf("%s/%s of %s", q.Namespace, q.Workload, q.Team)
	}
	csvQuery := url.Values{"month": {q.From.Format("2006-01")}}
	if w := v.Get("workload"); w != "" {
		csvQuery.Set("workload", w)
	}
	data := map[string]any{"What": what, "Team": q.Team, "Month": q.From.Format("2006-01"), "Currency": s.opts.Report.Currency,
		"Cost": ledger.FormatCents(ex.Ledger.CostMicros), "LinesCost": ledger.FormatCents(ex.Total.CostMicros), "Reconciled": ex.Reconciled,
		"Count": ex.LineCount, "Idle": ledger.FormatCents(ex.Ledger.IdleCostMicros), "Unmeasured": ledger.FormatCents(ex.Ledger.UnmeasuredCostMicros),
		"Unallocated": ledger.FormatCents(ex.Ledger.UnallocatedCostMicros), "Rule": explainRule, "Cut": len(ex.Lines) < ex.LineCount,
		"CSV": "/team/" + url.PathEscape(q.Team) + "/lines.csv?" + csvQuery.Encode()}
	var rows []explainRow
	for i := range ex.Lines {
		rows = append(rows, explainRowOf(&ex.Lines[i]))
	}
	data["Lines"] = rows
	var b bytes.Buffer
	if err := explainTemplate.Execute(&b, data); err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// linesCSV answers GET /team/:team/lines.csv?month=&workload=: every line.
func (s *Server) linesCSV(c echo.Context) error {
	q, _, err := s.explainQuery(c)
	if err != nil {
		return err
	}
	q.Limit = math.MaxInt32
	ex, err := reports.Explain(c.Request().Context(), s.opts.Store, q)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := ex.WriteCSV(&b); err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="lines-%s-%s.csv"`, q.Team, q.From.Format("2006-01")))
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", b.Bytes())
}
