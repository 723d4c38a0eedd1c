package api

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// resultCache keeps the answers of the read routes for a while: dashboards
// ask the same questions at every refresh, and the ledger changes when an
// hour is settled. An answer is dropped when the generation changes (the
// live pipeline wrote to the ledger) or TTL after it was made (another
// process, such as a backfill, may have written). Answers are kept per
// query and per the teams the token may read, so that a team's answer is
// never served to another.
type resultCache struct {
	ttl time.Duration
	gen func() uint64
	max int

	mu sync.Mutex
	m  map[string]cached
}

type cached struct {
	at          time.Time
	gen         uint64
	ctype, disp string
	body        []byte
}

// maxCachedBody leaves large answers (a workbook) out of the cache.
const maxCachedBody = 4 << 20

func newResultCache(ttl time.Duration, gen func() uint64, max int) *resultCache {
	if gen == nil {
		gen = func() uint64 { return 0 }
	}
	return &resultCache{ttl: ttl, gen: gen, max: max, m: make(map[string]cached)}
}

func (rc *resultCache) get(key string) (cached, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e, ok := rc.m[key]
	if !ok || e.gen != rc.gen() || time.Since(e.at) > rc.ttl {
		return cached{}, false
	}
	return e, true
}

func (rc *resultCache) put(key string, e cached) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.m) >= rc.max {
		clear(rc.m) // simple and bounded: the next refresh fills it again
	}
	rc.m[key] = e
}

// cacheKey is the route, its query exactly as sent, and who may read what;
// ok is false for a query the routes' strict check (params) refuses, which
// must reach the handler to be refused: a key made by a lenient parse would
// drop the bad pair and serve another query's answer.
func cacheKey(c echo.Context) (key string, ok bool) {
	raw := c.Request().URL.RawQuery
	if _, err := parseRawQuery(raw); err != nil {
		return "", false
	}
	p := principalOf(c)
	scope := "all"
	if !p.has(ScopeAdmin) && !p.has(ScopeViewer) {
		scope = "teams:" + strings.Join(p.teams(), ",")
	}
	return c.Request().URL.Path + "?" + raw + "|" + scope, true
}

// capture keeps what a handler writes.
type capture struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *capture) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// cache is the read routes' middleware: a fresh cached answer is served as
// is; a 200 is kept.
func (s *Server) cache(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.results == nil {
			return next(c)
		}
		key, ok := cacheKey(c)
		if !ok {
			return next(c)
		}
		gen := s.results.gen()
		if e, ok := s.results.get(key); ok {
			if e.disp != "" {
				c.Response().Header().Set(echo.HeaderContentDisposition, e.disp)
			}
			c.Response().Header().Set("X-Gpuledger-Cache", "hit")
			return c.Blob(http.StatusOK, e.ctype, e.body)
		}
		w := &capture{ResponseWriter: c.Response().Writer}
		c.Response().Writer = w
		err := next(c)
		c.Response().Writer = w.ResponseWriter
		if err == nil && c.Response().Status == http.StatusOK && w.buf.Len() <= maxCachedBody {
			s.results.put(key, cached{at: time.Now(), gen: gen, body: bytes.Clone(w.buf.Bytes()),
				ctype: c.Response().Header().Get(echo.HeaderContentType), disp: c.Response().Header().Get(echo.HeaderContentDisposition)})
		}
		return err
	}
}

// generation is what the answer cache keys on: this process's writes,
// plus the store's data version where it has one (the embedded ledger's,
// ClickHouse's count of restatements), so that hours another process
// rewrote are not served from the cache. (A backfill of hours never
// written before records no restatement: on ClickHouse those show once
// the TTL has passed.)
func generation(store any, writes func() uint64) func() uint64 {
	if writes == nil {
		writes = func() uint64 { return 0 }
	}
	v, ok := store.(interface {
		DataVersion(context.Context) (uint64, error)
	})
	if !ok {
		return writes
	}
	var last atomic.Uint64 // kept when a read fails
	return func() uint64 {
		if n, err := v.DataVersion(context.Background()); err == nil {
			last.Store(n)
		}
		// Both only grow: any change of either changes the sum.
		return writes() + last.Load()
	}
}
