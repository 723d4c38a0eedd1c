// Package api serves gpuledger over HTTP with echo: the cost API that
// dashboards query, chargeback report downloads, Prometheus remote write
// into the live pipeline, /healthz and the service's own /metrics. Every
// route but /healthz takes a bearer token whose scopes decide what it may
// do (auth.go); a team's token reads its own team only. Handlers return
// errors; one error handler maps them to status codes. It reads the ledger
// and renders reports through their packages; it computes no cost itself.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/api/mcp"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/reports"
)

// Options configures a Server.
type Options struct {
	Store ledger.Store
	// Report labels and budgets the chargeback downloads.
	Report reports.Options
	// Capacity is what /api/v1/capacity and /api/v1/budgets need.
	Capacity CapacityOptions
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// Auth checks bearer tokens; nil lets every request through as admin
	// (the demo, tests). gpuledger serve refuses to start without tokens
	// unless told -auth.disabled.
	Auth *Auth
	// MaxRange caps the span of one cost query. Default 400 days.
	MaxRange time.Duration
	// Ingest, when set, receives Prometheus remote-write requests on
	// POST /api/v1/write.
	Ingest RemoteWriter
	// Version is gpuledger's, for the MCP server's handshake.
	Version string
	// MaxRemoteWriteBytes caps a compressed remote-write body. Default 16 MiB.
	MaxRemoteWriteBytes int64
	// MaxInflightBytes caps the remote-write bodies being read and ingested
	// at once, as sent and as they decode (a snappy body's length header
	// says so before it is decoded); a request past it is answered 429.
	// Default 128 MiB.
	MaxInflightBytes int64
	// Stats, when set, is read into /metrics at each scrape.
	Stats func() ingest.PipelineStats
	// Health, when set, says whether the server keeps its promises: a
	// non-nil error makes /healthz answer 503 with it.
	Health func() error
	// Gauges are more values for /metrics, read at each scrape, by name
	// (such as the ClickHouse spool's).
	Gauges map[string]func() float64
	// TLSCertFile and TLSKeyFile, when set, serve HTTPS; the files are
	// read again when their contents change.
	TLSCertFile, TLSKeyFile string
	// TokenFiles, with ReloadTokens and Auth, are read every
	// ReloadInterval: when their contents change, ReloadTokens gives the
	// tokens Auth accepts from then on (a token taken out of a mounted
	// Secret is refused without a restart). A failed reload keeps the
	// tokens in force, is logged and counted.
	TokenFiles   []string
	ReloadTokens func() ([]Token, error)
	// ReloadInterval is how often the TLS pair and the token files are
	// checked. Default 10 seconds.
	ReloadInterval time.Duration
	// CacheTTL keeps the answers of the read routes this long at most;
	// zero turns the cache off.
	CacheTTL time.Duration
	// Generation, when set, changes whenever the ledger is written by this
	// process: cached answers made before are dropped. A store with a
	// DataVersion (one that moves when another process, such as a
	// backfill, rewrites hours) adds it.
	Generation func() uint64
}

// RemoteWriter takes remote-write bodies from a sender (the token's name).
// It returns once the body is durable; an *ingest.InputError means the body
// will never be accepted; any other error that it may be later. It keeps
// nothing of body once it returns: the server reads the next one into it.
type RemoteWriter interface {
	RemoteWrite(ctx context.Context, sender string, body []byte) (ingest.Result, error)
}

// Server is the HTTP API.
type Server struct {
	opts     Options
	e        *echo.Echo
	log      *slog.Logger
	metrics  *metrics.Set
	inflight *byteLimiter
	results  *resultCache // nil: no cache
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
		opts.MaxRemoteWriteBytes = 16 << 20
	}
	if opts.MaxInflightBytes <= 0 {
		opts.MaxInflightBytes = 128 << 20
	}
	if opts.ReloadInterval <= 0 {
		opts.ReloadInterval = 10 * time.Second
	}
	s := &Server{opts: opts, e: echo.New(), log: opts.Logger, metrics: metrics.NewSet(), inflight: newByteLimiter(opts.MaxInflightBytes)}
	if opts.CacheTTL > 0 {
		s.results = newResultCache(opts.CacheTTL, generation(opts.Store, opts.Generation), 4096)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if g, ok := opts.Store.(interface {
		Gauges() map[string]func() float64
	}); ok {
		opts.Gauges = maps.Clone(opts.Gauges)
		if opts.Gauges == nil {
			opts.Gauges = map[string]func() float64{}
		}
		maps.Copy(opts.Gauges, g.Gauges())
	}
	for name, f := range opts.Gauges {
		s.metrics.GetOrCreateGauge(name, f)
	}
	s.metrics.GetOrCreateGauge("gpuledger_ready", func() float64 {
		if s.health() != nil {
			return 0
		}
		return 1
	})
	s.e.HideBanner, s.e.HidePort = true, true
	s.e.HTTPErrorHandler = s.handleError
	s.e.Use(s.instrument)
	read := s.require(string(ScopeViewer), "team")
	s.e.GET("/healthz", s.healthz)
	s.e.GET("/livez", s.livez)
	s.e.GET("/api/v1/openapi.json", s.openAPI)
	s.e.GET("/", s.overview, s.browser(string(ScopeViewer), "team"))
	s.e.GET("/team/:team", s.teamPage, s.browser(string(ScopeViewer), "team"))
	s.e.GET("/team/:team/explain", s.explainPage, s.browser(string(ScopeViewer), "team"))
	s.e.GET("/team/:team/lines.csv", s.linesCSV, s.browser(string(ScopeViewer), "team"))
	// The chargeback for the pages' download links: the same as the API's,
	// by the sign-in cookie (a team's token gets its team's).
	s.e.GET("/reports/chargeback/:month", s.chargeback, s.browser(string(ScopeViewer), "team"))
	s.e.POST("/login", s.login)
	s.e.GET("/metrics", s.serveMetrics, s.require(string(ScopeViewer)))
	s.e.GET("/api/v1/cost", s.cost, read, s.cache)
	s.e.GET("/api/v1/reports/chargeback/:month", s.chargeback, read, s.cache)
	s.e.GET("/api/v1/workloads", s.workloads, read, s.cache)
	s.e.GET("/api/v1/explain", s.explain, read, s.cache)
	// OpenCost's allocation API, for the tools built on it.
	s.e.GET("/allocation", s.allocation, read, s.cache)
	s.e.GET("/allocation/compute", s.allocation, read, s.cache)
	s.e.GET("/api/v1/capacity", s.capacity, s.require(string(ScopeViewer)), s.cache)
	s.e.GET("/api/v1/budgets", s.budgets, read, s.cache)
	s.e.POST("/api/v1/write", s.remoteWrite, s.require(string(ScopeWrite)))
	s.e.GET("/api/v1/admin/restatements", s.restatements, s.require(string(ScopeAdmin)))
	s.e.GET("/api/v1/admin/closes", s.closes, s.require(string(ScopeAdmin)))
	s.e.POST("/api/v1/admin/close", s.closeMonth, s.require(string(ScopeAdmin)))
	// Go's profiles (CPU, heap, goroutines), as VictoriaMetrics serves
	// them, for admins: go tool pprof -http : -H 'Authorization: Bearer …'
	// https://gpuledger:8080/debug/pprof/profile?seconds=30
	s.e.GET("/debug/pprof/*", echo.WrapHandler(http.HandlerFunc(servePprof)), s.require(string(ScopeAdmin)))
	// The read routes as MCP tools for agents (streamable HTTP,
	// stateless), each calling its route with the caller's token.
	s.e.POST("/mcp", echo.WrapHandler(mcp.Handler(mcp.Options{API: s.e, Version: opts.Version})), read)
	return s
}

// Handler returns the server's http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.e }

// ListenAndServe serves on addr until ctx is done, then shuts down
// gracefully. Slow or idle clients are cut off by timeouts, so that they
// cannot hold connections and memory.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: s.e,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	tlsOn := s.opts.TLSCertFile != "" || s.opts.TLSKeyFile != ""
	if tlsOn {
		r, err := newCertReloader(s.opts.TLSCertFile, s.opts.TLSKeyFile, s.log, s.reloaded("tls"))
		if err != nil {
			return err
		}
		r.interval = s.opts.ReloadInterval
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
	}
	if w := s.tokenWatcher(); w != nil {
		go w(ctx)
	}
	errc := make(chan error, 1)
	go func() {
		if tlsOn {
			errc <- srv.ListenAndServeTLS("", "")
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
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
	var nd *reports.NoDataError
	var ae *authError
	var rw *rejectedWrite
	var de *ledger.DamageError
	switch {
	case errors.As(err, &de):
		// Never a number from damaged rows: the error, with what to do.
		code, msg = http.StatusInternalServerError, de.Error()
		s.log.Error("ledger damaged", "path", c.Path(), "err", err)
	case errors.As(err, &ae):
		code, msg = ae.code, ae.msg
	case errors.As(err, &br):
		code, msg = http.StatusBadRequest, br.msg
	case errors.As(err, &ie):
		code, msg = http.StatusBadRequest, ie.Msg
	case errors.As(err, &rw):
		code, msg = http.StatusBadRequest, rw.Error()
	case errors.As(err, &nd):
		code, msg = http.StatusNotFound, nd.Error()
	case errors.As(err, &tl):
		code, msg = http.StatusRequestEntityTooLarge, tl.Error()
	case errors.Is(err, errInflight):
		c.Response().Header().Set("Retry-After", "5")
		code, msg = http.StatusTooManyRequests, err.Error()
	case errors.As(err, &he):
		code, msg = he.Code, fmt.Sprint(he.Message)
	case c.Path() == "/api/v1/write":
		// Anything else on the write path (the write-ahead log failing, a
		// shutdown) may pass on retry: never a 4xx, which drops data.
		code, msg = http.StatusServiceUnavailable, err.Error()
		s.log.Warn("remote write failed", "err", err)
	default:
		s.log.Error("request failed", "path", c.Path(), "err", err)
	}
	if werr := c.JSON(code, map[string]string{"error": msg}); werr != nil {
		s.log.Error("write error response", "err", werr)
	}
}
