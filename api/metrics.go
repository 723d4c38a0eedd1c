package api

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
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
		s.metrics.GetOrCreatePrometheusHistogram(fmt.Sprintf(`gpuledger_http_request_duration_seconds{path=%q}`, path)).UpdateDuration(start)
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

// livez answers 200 ok while the process serves HTTP, whatever fails
// behind it: a liveness probe that restarts serve when ClickHouse or the
// disk fails would only replay the write-ahead log again into the same
// failure (/healthz says what fails, for readiness).
func (s *Server) livez(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }

func (s *Server) serveMetrics(c echo.Context) error {
	if s.opts.Stats != nil {
		s.PublishStats(s.opts.Stats())
	}
	var b bytes.Buffer
	s.metrics.WritePrometheus(&b)
	metrics.WriteProcessMetrics(&b)
	return c.Blob(http.StatusOK, "text/plain; version=0.0.4; charset=utf-8", withHelp(b.Bytes()))
}

func init() {
	// Every family gets its HELP and TYPE lines; withHelp gives the HELP
	// its text.
	metrics.ExposeMetadata(true)
}

// family is what /metrics says of a metric family: its type (which wins
// over the metrics library's, whose callbacks are all gauges) and help.
type family struct{ typ, help string }

// families are the server's own metric families. TestMetricsExposition
// fails on a family missing here.
var families = map[string]family{
	"gpuledger_attribution_pods":                    {"gauge", "Pods attribution knows."},
	"gpuledger_attribution_pods_forgotten_total":    {"counter", "Pods attribution forgot after they stopped reporting."},
	"gpuledger_attribution_samples_total":           {"counter", "Samples attribution accepted."},
	"gpuledger_clickhouse_peer_hours_total":         {"counter", "Hours compared with another writer's newest rows before writing them (active-active replicas), by result: same, differ, error."},
	"gpuledger_clickhouse_spool_corrupt_total":      {"counter", "Records of the ClickHouse spool found corrupt."},
	"gpuledger_clickhouse_spool_pending_bytes":      {"gauge", "Bytes of ledger writes spooled on disk while ClickHouse cannot take them."},
	"gpuledger_clickhouse_spool_pending_records":    {"gauge", "Ledger writes spooled on disk while ClickHouse cannot take them."},
	"gpuledger_clickhouse_spool_replayed_total":     {"counter", "Spooled ledger writes replayed into ClickHouse."},
	"gpuledger_clickhouse_spool_spooled_total":      {"counter", "Ledger writes spooled on disk."},
	"gpuledger_attribution_resets_total":            {"counter", "Resets attribution read across in the counters it takes increases of (DCGM's energy, vLLM's, Kueue's)."},
	"gpuledger_http_request_duration_seconds":       {"histogram", "Time to answer an HTTP request, by route."},
	"gpuledger_http_requests_total":                 {"counter", "HTTP requests answered, by route and status code."},
	"gpuledger_ingest_buffered_bytes":               {"gauge", "Bytes of samples held in the reorder window."},
	"gpuledger_ingest_buffered_samples":             {"gauge", "Samples held in the reorder window."},
	"gpuledger_ingest_catching_up":                  {"gauge", "1 while ingest replays a backlog, else 0."},
	"gpuledger_ingest_lines_total":                  {"counter", "Exposition lines and remote-write samples read."},
	"gpuledger_ingest_pods_total":                   {"counter", "kube-state-metrics pod samples read."},
	"gpuledger_ingest_rejected_samples_total":       {"counter", "Samples refused, by reason."},
	"gpuledger_ingest_reorder_window_seconds":       {"gauge", "How late a sample may come and still be attributed."},
	"gpuledger_ingest_samples_total":                {"counter", "Samples read."},
	"gpuledger_ingest_shed_samples_total":           {"counter", "Samples shed under memory pressure (the sender was told to retry)."},
	"gpuledger_ingest_skipped_series_total":         {"counter", "Samples of series gpuledger does not read."},
	"gpuledger_ingest_unwritten_rows":               {"gauge", "Ledger rows settled but not yet written."},
	"gpuledger_ledger_write_failures_total":         {"counter", "Failed ledger writes (retried)."},
	"gpuledger_ready":                               {"gauge", "1 when the server takes data (write-ahead log and ledger writes healthy), else 0."},
	"gpuledger_reload_failures_total":               {"counter", "Failed reloads of the configuration or the tokens, by what."},
	"gpuledger_reloads_total":                       {"counter", "Reloads of the configuration or the tokens, by what."},
	"gpuledger_remote_write_rejected_samples_total": {"counter", "Remote-write samples refused, by sender and reason."},
	"gpuledger_settled_until_seconds":               {"gauge", "Unix time up to which the ledger's hours are settled."},
	"gpuledger_wal_corrupt_bytes_total":             {"counter", "Bytes of the write-ahead log skipped as corrupt, by segment."},
	"gpuledger_wal_corrupt_records_total":           {"counter", "Records of the write-ahead log skipped as corrupt, by segment."},
	"gpuledger_wal_failing":                         {"gauge", "1 while the write-ahead log cannot be written, else 0."},
	"gpuledger_wal_missing_segments_total":          {"counter", "Segments of the write-ahead log found missing."},
}

// renamed are the metrics library's runtime families whose names
// Prometheus' conventions refuse (a counter ends in _total; _count is a
// histogram's or a summary's), by the names /metrics gives them.
var renamed = map[string]string{
	"go_cgo_calls_count": "go_cgo_calls_total",
	"go_gc_forced_count": "go_gc_forced_total",
	"go_cpu_count":       "go_cpus",
}

// withHelp fills the HELP lines the metrics library writes empty, sets
// the TYPE of the families listed in families, and of the runtime's and
// the process's (go_, process_) counts them as counters where their name
// ends in _total (the library calls some gauges); it renames those in
// renamed.
func withHelp(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body) + 4096)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			name = rename(name)
			line = "# HELP " + name + " " + helpOf(name)
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			name = rename(name)
			if f, ok := families[name]; ok {
				typ = f.typ
			} else if strings.HasSuffix(name, "_total") {
				typ = "counter"
			}
			line = "# TYPE " + name + " " + typ
		default:
			if end := strings.IndexAny(line, "{ "); end > 0 {
				line = rename(line[:end]) + line[end:]
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func rename(name string) string {
	if to, ok := renamed[name]; ok {
		return to
	}
	return name
}

// helpOf is a family's help text.
func helpOf(name string) string {
	if f, ok := families[name]; ok {
		return f.help
	}
	switch {
	case strings.HasPrefix(name, "go_"):
		return "The Go runtime's " + strings.ReplaceAll(strings.TrimPrefix(name, "go_"), "_", " ") + "."
	case strings.HasPrefix(name, "process_"):
		return "The process's " + strings.ReplaceAll(strings.TrimPrefix(name, "process_"), "_", " ") + "."
	}
	return "gpuledger's " + strings.ReplaceAll(strings.TrimPrefix(name, "gpuledger_"), "_", " ") + "."
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
	set(`gpuledger_attribution_resets_total`, as.CounterResets)
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
	gauge := func(name string, v float64) { s.metrics.GetOrCreateGauge(name, nil).Set(v) }
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
