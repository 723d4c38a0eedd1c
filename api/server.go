// Package api serves gpuledger over HTTP with echo: the cost API that
// dashboards query, chargeback report downloads, /healthz and the service's
// own /metrics. Handlers return errors; one error handler maps them to
// status codes. It reads the ledger and renders reports through their
// packages; it computes no cost itself.
package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// Options configures a Server.
type Options struct {
	Store ledger.Store
	// Report labels and budgets the chargeback downloads.
	Report reports.Options
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// MaxRange caps the span of one cost query. Default 400 days.
	MaxRange time.Duration
	// Ingest, when set, receives Prometheus remote-write requests on
	// POST /api/v1/write.
	Ingest RemoteWriter
	// MaxRemoteWriteBytes caps a compressed remote-write body. Default 32 MiB.
	MaxRemoteWriteBytes int64
	// IngestStats, when set, is read into /metrics at each scrape.
	IngestStats func() (ingest.Stats, attribution.Stats)
	// Gauges are more values for /metrics, read at each scrape, by name
	// (such as the ClickHouse spool's).
	Gauges map[string]func() float64
}

// RemoteWriter takes remote-write bodies. An *ingest.InputError means the
// body will never be accepted.
type RemoteWriter interface {
	RemoteWrite(body []byte) error
}

// Server is the HTTP API.
type Server struct {
	opts    Options
	e       *echo.Echo
	log     *slog.Logger
	metrics *metrics.Set
}

// badRequest is an error caused by the request; it maps to 400.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// New returns a Server with its routes registered.
func New(opts Options) *Server {
	if opts.MaxRange <= 0 {
		opts.MaxRange = 400 * 24 * time.Hour
	}
	if opts.MaxRemoteWriteBytes <= 0 {
		opts.MaxRemoteWriteBytes = 32 << 20
	}
	s := &Server{opts: opts, e: echo.New(), log: opts.Logger, metrics: metrics.NewSet()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for name, f := range opts.Gauges {
		s.metrics.GetOrCreateGauge(name, f)
	}
	s.e.HideBanner, s.e.HidePort = true, true
	s.e.HTTPErrorHandler = s.handleError
	s.e.Use(s.instrument)
	s.e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	s.e.GET("/metrics", func(c echo.Context) error {
		if s.opts.IngestStats != nil {
			s.PublishIngestStats(s.opts.IngestStats())
		}
		var b bytes.Buffer
		s.metrics.WritePrometheus(&b)
		return c.Blob(http.StatusOK, "text/plain; version=0.0.4; charset=utf-8", b.Bytes())
	})
	s.e.GET("/api/v1/cost", s.cost)
	s.e.GET("/api/v1/reports/chargeback/:month", s.chargeback)
	s.e.GET("/api/v1/workloads", s.workloads)
	s.e.POST("/api/v1/write", s.remoteWrite)
	return s
}

// Handler returns the server's http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.e }

// ListenAndServe serves on addr until ctx is done, then shuts down
// gracefully.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: s.e, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func (s *Server) instrument(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		path := c.Path()
		if path == "" {
			path = "unmatched"
		}
		if err != nil {
			s.e.HTTPErrorHandler(err, c)
		}
		s.metrics.GetOrCreateCounter(fmt.Sprintf(`gpuledger_http_requests_total{path=%q,code="%d"}`, path, c.Response().Status)).Inc()
		s.metrics.GetOrCreateHistogram(fmt.Sprintf(`gpuledger_http_request_duration_seconds{path=%q}`, path)).UpdateDuration(start)
		return nil
	}
}

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	msg := "internal error; see the server log"
	var br *badRequest
	var ie *ingest.InputError
	var tl *tooLarge
	var he *echo.HTTPError
	switch {
	case errors.As(err, &br):
		code, msg = http.StatusBadRequest, br.msg
	case errors.As(err, &ie):
		code, msg = http.StatusBadRequest, ie.Msg
	case errors.As(err, &tl):
		code, msg = http.StatusRequestEntityTooLarge, tl.Error()
	case errors.As(err, &he):
		code, msg = he.Code, fmt.Sprint(he.Message)
	default:
		s.log.Error("request failed", "path", c.Path(), "err", err)
	}
	if werr := c.JSON(code, map[string]string{"error": msg}); werr != nil {
		s.log.Error("write error response", "err", werr)
	}
}

// PublishIngestStats exports the ingest and attribution counters in
// /metrics.
func (s *Server) PublishIngestStats(is ingest.Stats, as attribution.Stats) {
	set := func(name string, v uint64) { s.metrics.GetOrCreateCounter(name).Set(v) }
	set(`gpuledger_ingest_lines_total`, is.Lines)
	set(`gpuledger_ingest_samples_total`, is.Samples)
	set(`gpuledger_ingest_pods_total`, is.Pods)
	set(`gpuledger_ingest_skipped_series_total`, is.Skipped)
	set(`gpuledger_ingest_rejected_samples_total{reason="invalid_line"}`, is.Invalid)
	set(`gpuledger_ingest_rejected_samples_total{reason="missing_labels"}`, is.MissingLabels)
	set(`gpuledger_ingest_rejected_samples_total{reason="too_new"}`, is.TooNew)
	set(`gpuledger_attribution_samples_total`, as.Accepted)
	set(`gpuledger_energy_counter_resets_total`, as.CounterResets)
	for r, n := range as.Rejected {
		set(fmt.Sprintf(`gpuledger_ingest_rejected_samples_total{reason=%q}`, r), n)
	}
}

// parseTime accepts RFC 3339, a date (YYYY-MM-DD) or a month (YYYY-MM), in UTC.
func parseTime(field, v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02", "2006-01"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badf("%s=%q is not a time; want RFC 3339 (2026-10-01T00:00:00Z), a date (2026-10-01) or a month (2026-10)", field, v)
}

// CostPoint is one bucket of the cost API's answer.
type CostPoint struct {
	Start                 time.Time `json:"start"`
	Cluster               string    `json:"cluster,omitempty"`
	Team                  string    `json:"team,omitempty"`
	Namespace             string    `json:"namespace,omitempty"`
	LocalQueue            string    `json:"localQueue,omitempty"`
	ClusterQueue          string    `json:"clusterQueue,omitempty"`
	Flavor                string    `json:"flavor,omitempty"`
	Borrowed              bool      `json:"borrowed,omitempty"`
	GPUHours              float64   `json:"gpuHours"`
	ActiveGPUHours        float64   `json:"activeGpuHours"`
	CostMicros            int64     `json:"costMicros"`
	IdleCostMicros        int64     `json:"idleCostMicros"`
	UnallocatedCostMicros int64     `json:"unallocatedCostMicros"`
	Cost                  string    `json:"cost"`
	ActiveCost            string    `json:"activeCost"`
	IdleCost              string    `json:"idleCost"`
	UnallocatedCost       string    `json:"unallocatedCost"`
	EnergyKWh             float64   `json:"energyKWh"`
	EnergyCostMicros      int64     `json:"energyCostMicros"`
	EnergyCost            string    `json:"energyCost"`
}

// CostResponse is the cost API's answer.
type CostResponse struct {
	Currency string      `json:"currency"`
	Step     string      `json:"step"`
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	GroupBy  []string    `json:"groupBy"`
	Points   []CostPoint `json:"points"`
	// TotalCostMicros sums every point: with no filter it is the cluster's
	// cost over the range.
	TotalCostMicros int64  `json:"totalCostMicros"`
	TotalCost       string `json:"totalCost"`
}

// timeRange reads the from and to parameters.
func (s *Server) timeRange(c echo.Context) (from, to time.Time, err error) {
	if from, err = parseTime("from", c.QueryParam("from")); err != nil {
		return
	}
	if to, err = parseTime("to", c.QueryParam("to")); err != nil {
		return
	}
	if !to.After(from) {
		return from, to, badf("to=%s is not after from=%s; want a non-empty range", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	if to.Sub(from) > s.opts.MaxRange {
		return from, to, badf("range %s is longer than the %s allowed; narrow from/to", to.Sub(from), s.opts.MaxRange)
	}
	return from, to, nil
}

// cost answers GET /api/v1/cost?from=&to=&step=hour|day|month&groupBy=team,flavor&team=&cluster=
func (s *Server) cost(c echo.Context) error {
	from, to, err := s.timeRange(c)
	if err != nil {
		return err
	}
	stepName := c.QueryParam("step")
	if stepName == "" {
		stepName = "day"
	}
	step, ok := ledger.ParseStep(stepName)
	if !ok {
		return badf("step=%q is not a step; want hour, day or month", stepName)
	}
	group := []ledger.Dimension{ledger.DimTeam}
	if g := c.QueryParam("groupBy"); g != "" {
		group = group[:0]
		for _, d := range strings.Split(g, ",") {
			dim := ledger.Dimension(strings.TrimSpace(d))
			valid := false
			for _, known := range ledger.Dimensions {
				valid = valid || known == dim
			}
			if !valid {
				return badf("groupBy=%q names unknown dimension %q; want a comma-separated list of %v", g, d, ledger.Dimensions)
			}
			group = append(group, dim)
		}
	}
	rows, err := s.opts.Store.Query(c.Request().Context(), ledger.Query{
		From: from, To: to, Step: step, GroupBy: group,
		Team: c.QueryParam("team"), Cluster: c.QueryParam("cluster"),
	})
	if err != nil {
		return err
	}
	resp := CostResponse{Currency: s.opts.Report.Currency, Step: step.String(), From: from, To: to, Points: []CostPoint{}}
	for _, d := range group {
		resp.GroupBy = append(resp.GroupBy, string(d))
	}
	for _, r := range rows {
		resp.Points = append(resp.Points, CostPoint{
			Start: r.Hour, Cluster: r.Cluster, Team: r.Team, Namespace: r.Namespace, LocalQueue: r.LocalQueue,
			ClusterQueue: r.ClusterQueue, Flavor: r.Flavor, Borrowed: r.Borrowed,
			GPUHours: r.GPUSeconds / 3600, ActiveGPUHours: r.ActiveGPUSeconds / 3600,
			CostMicros: r.CostMicros, IdleCostMicros: r.IdleCostMicros, UnallocatedCostMicros: r.UnallocatedCostMicros,
			Cost: ledger.FormatMicros(r.CostMicros), ActiveCost: ledger.FormatMicros(r.ActiveCostMicros()),
			IdleCost: ledger.FormatMicros(r.IdleCostMicros), UnallocatedCost: ledger.FormatMicros(r.UnallocatedCostMicros),
			EnergyKWh: r.EnergyJoules / 3.6e6, EnergyCostMicros: r.EnergyCostMicros, EnergyCost: ledger.FormatMicros(r.EnergyCostMicros),
		})
		resp.TotalCostMicros += r.CostMicros
	}
	resp.TotalCost = ledger.FormatMicros(resp.TotalCostMicros)
	return c.JSON(http.StatusOK, resp)
}

// chargeback answers GET /api/v1/reports/chargeback/YYYY-MM?format=csv|xlsx
func (s *Server) chargeback(c echo.Context) error {
	m := c.Param("month")
	month, err := time.Parse("2006-01", m)
	if err != nil {
		return badf("month %q is not a month; want YYYY-MM such as 2026-10", m)
	}
	format := c.QueryParam("format")
	if format == "" {
		format = "xlsx"
	}
	if format != "csv" && format != "xlsx" {
		return badf("format=%q is not a report format; want csv or xlsx", format)
	}
	opts := s.opts.Report
	if cl := c.QueryParam("cluster"); cl != "" {
		opts.Cluster = cl
	}
	cb, err := reports.Build(c.Request().Context(), s.opts.Store, month, opts)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	ctype := "text/csv; charset=utf-8"
	if format == "csv" {
		err = cb.WriteCSV(&b)
	} else {
		err = cb.WriteXLSX(&b)
		ctype = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	if err != nil {
		return fmt.Errorf("render %s report: %w", format, err)
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s.%s"`, cb.FileBase(), format))
	return c.Blob(http.StatusOK, ctype, b.Bytes())
}

// WorkloadPoint is one workload of the workloads API's answer.
type WorkloadPoint struct {
	Cluster        string  `json:"cluster"`
	Team           string  `json:"team"`
	Namespace      string  `json:"namespace"`
	Kind           string  `json:"kind"`
	Name           string  `json:"name"`
	GPUHours       float64 `json:"gpuHours"`
	ActiveGPUHours float64 `json:"activeGpuHours"`
	IdleGPUHours   float64 `json:"idleGpuHours"`
	CostMicros     int64   `json:"costMicros"`
	IdleCostMicros int64   `json:"idleCostMicros"`
	Cost           string  `json:"cost"`
	IdleCost       string  `json:"idleCost"`
}

// workloads answers GET /api/v1/workloads?from=&to=&team=&cluster=&limit=20:
// the workloads that paid the most for GPUs held idle.
func (s *Server) workloads(c echo.Context) error {
	from, to, err := s.timeRange(c)
	if err != nil {
		return err
	}
	limit := 20
	if l := c.QueryParam("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 1000 {
			return badf("limit=%q is not a count; want 1 to 1000", l)
		}
	}
	rows, err := s.opts.Store.TopWorkloads(c.Request().Context(), ledger.Query{From: from, To: to,
		Team: c.QueryParam("team"), Cluster: c.QueryParam("cluster")}, limit)
	if err != nil {
		return err
	}
	out := make([]WorkloadPoint, 0, len(rows))
	for _, w := range rows {
		out = append(out, WorkloadPoint{Cluster: w.Cluster, Team: w.Team, Namespace: w.Namespace, Kind: w.Kind, Name: w.Name,
			GPUHours: w.GPUSeconds / 3600, ActiveGPUHours: w.ActiveGPUSeconds / 3600, IdleGPUHours: (w.GPUSeconds - w.ActiveGPUSeconds) / 3600,
			CostMicros: w.CostMicros, IdleCostMicros: w.IdleCostMicros,
			Cost: ledger.FormatMicros(w.CostMicros), IdleCost: ledger.FormatMicros(w.IdleCostMicros)})
	}
	return c.JSON(http.StatusOK, map[string]any{"currency": s.opts.Report.Currency, "from": from, "to": to, "workloads": out})
}

// tooLarge is a body over the limit; it maps to 413.
type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("body is over the %d bytes allowed; send smaller batches", e.limit)
}

// remoteWrite answers POST /api/v1/write (Prometheus remote write 1.0:
// snappy-compressed protobuf). 204 when accepted; 400 and 413 for bodies
// that will never be accepted, which the sender must drop; 5xx only where a
// retry can succeed.
func (s *Server) remoteWrite(c echo.Context) error {
	if s.opts.Ingest == nil {
		return echo.NewHTTPError(http.StatusNotFound, "remote write is not enabled on this server; start it with -config to attribute what it receives")
	}
	if enc := c.Request().Header.Get("Content-Encoding"); enc != "" && enc != "snappy" {
		return badf("Content-Encoding %q is not supported; want snappy (Prometheus remote write 1.0; run vmagent with -remoteWrite.forcePromProto)", enc)
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, s.opts.MaxRemoteWriteBytes+1))
	if err != nil {
		return badf("read remote-write body: %v", err)
	}
	if int64(len(body)) > s.opts.MaxRemoteWriteBytes {
		return &tooLarge{s.opts.MaxRemoteWriteBytes}
	}
	if err := s.opts.Ingest.RemoteWrite(body); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
