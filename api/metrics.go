package api

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ingest"
)

// Health and metrics: /healthz, /metrics, the request instrumentation and
// the ingest figures the server publishes.

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

func (s *Server) health() error {
	if s.opts.Health == nil {
		return nil
	}
	return s.opts.Health()
}

// healthz answers 200 ok, or 503 with what fails (the write-ahead log,
// ledger writes): a load balancer stops sending remote write to it.
func (s *Server) healthz(c echo.Context) error {
	if err := s.health(); err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	}
	return c.String(http.StatusOK, "ok\n")
}

func (s *Server) serveMetrics(c echo.Context) error {
	if s.opts.Stats != nil {
		s.PublishStats(s.opts.Stats())
	}
	var b bytes.Buffer
	s.metrics.WritePrometheus(&b)
	return c.Blob(http.StatusOK, "text/plain; version=0.0.4; charset=utf-8", b.Bytes())
}

// PublishStats exports the live pipeline's counters in /metrics.
func (s *Server) PublishStats(ps ingest.PipelineStats) {
	set := func(name string, v uint64) { s.metrics.GetOrCreateCounter(name).Set(v) }
	is, as := ps.Ingest, ps.Attribution
	set(`gpuledger_ingest_lines_total`, is.Lines)
	set(`gpuledger_ingest_samples_total`, is.Samples)
	set(`gpuledger_ingest_pods_total`, is.Pods)
	set(`gpuledger_ingest_skipped_series_total`, is.Skipped)
	set(`gpuledger_ingest_rejected_samples_total{reason="invalid_line"}`, is.Invalid)
	set(`gpuledger_ingest_rejected_samples_total{reason="missing_labels"}`, is.MissingLabels)
	set(`gpuledger_ingest_rejected_samples_total{reason="too_new"}`, is.TooNew)
	for r, n := range is.BadValues {
		set(fmt.Sprintf(`gpuledger_ingest_rejected_samples_total{reason=%q}`, ingest.BadValueReasons[r]), n)
	}
	set(`gpuledger_attribution_samples_total`, as.Accepted)
	set(`gpuledger_energy_counter_resets_total`, as.CounterResets)
	set(`gpuledger_attribution_pods_forgotten_total`, as.PodsForgotten)
	for r, n := range as.Rejected {
		set(fmt.Sprintf(`gpuledger_ingest_rejected_samples_total{reason=%q}`, r), n)
	}
	for k, n := range ps.Rejected {
		set(fmt.Sprintf(`gpuledger_remote_write_rejected_samples_total{sender=%q,reason=%q}`, k[0], k[1]), n)
	}
	set(`gpuledger_ledger_write_failures_total`, ps.WriteFailures)
	for seg, n := range ps.WALCorruptRecords {
		set(fmt.Sprintf(`gpuledger_wal_corrupt_records_total{segment=%q}`, seg), n)
	}
	for seg, n := range ps.WALCorruptBytes {
		set(fmt.Sprintf(`gpuledger_wal_corrupt_bytes_total{segment=%q}`, seg), n)
	}
	set(`gpuledger_wal_missing_segments_total`, ps.WALMissingSegments)
	set(`gpuledger_ingest_shed_samples_total`, ps.Shed)
	gauge := func(name string, v float64) { s.metrics.GetOrCreateFloatCounter(name).Set(v) }
	gauge(`gpuledger_ingest_buffered_samples`, float64(ps.Buffered))
	gauge(`gpuledger_ingest_buffered_bytes`, float64(ps.BufferedBytes))
	gauge(`gpuledger_ingest_unwritten_rows`, float64(ps.Unwritten))
	gauge(`gpuledger_attribution_pods`, float64(ps.Pods))
	gauge(`gpuledger_settled_until_seconds`, float64(ps.SettledUntil.Unix()))
	failing := 0.0
	if ps.LogFailing {
		failing = 1
	}
	gauge(`gpuledger_wal_failing`, failing)
	catchingUp := 0.0
	if ps.CatchingUp {
		catchingUp = 1
	}
	gauge(`gpuledger_ingest_catching_up`, catchingUp)
	gauge(`gpuledger_ingest_reorder_window_seconds`, ps.Window.Seconds())
}
