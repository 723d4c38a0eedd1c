package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ingest"
)

// tooLarge is a body over the limit; it maps to 413.
type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("body is over the %d bytes allowed; send smaller batches", e.limit)
}

// rejectedWrite is a request some of whose samples will never be accepted
// (late, too new, out of order): the rest is durable, and the sender must
// drop the batch (remote write answers 400).
type rejectedWrite struct{ res ingest.Result }

func (e *rejectedWrite) Error() string {
	msg := fmt.Sprintf("%d sample(s) accepted; %d rejected: %d for settled hours (before %s), %d stamped more than the allowed time ahead of the server's clock, "+
		"%d out of order (older than a sample of the same device already counted: sent more than -ingest.reorderWindow after it, or during a backlog more than the backlog is deep or than -ingest.maxBuffered holds)",
		e.res.Accepted, e.res.Rejected(), e.res.Late, e.res.SettledUntil.Format(time.RFC3339), e.res.TooNew, e.res.OutOfOrder)
	if n := e.res.InvalidTotal(); n > 0 {
		var parts []string
		for r, k := range e.res.Invalid {
			if k > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", k, ingest.BadValueReasons[r]))
			}
		}
		msg += fmt.Sprintf(", %d with a value or labels no exporter sends (%s: want finite values, not negative, "+
			"DCGM utilisation 0-100, activity 0-1, power under 10 kW, and UTF-8 labels)", n, strings.Join(parts, ", "))
	}
	return msg + "; drop them (a backfill with gpuledger ingest can still write settled hours; a sender that falls behind needs fewer queues, " +
		"a longer -ingest.reorderWindow or a larger -ingest.maxBuffered)"
}

// errInflight refuses a body while MaxInflightBytes are being ingested:
// the bodies as sent and what they decode to.
var errInflight = errors.New("too many remote-write bytes in flight; retry in a few seconds")

// byteLimiter bounds the bytes of the requests being handled at once.
type byteLimiter struct {
	mu         sync.Mutex
	used, max_ int64
}

func newByteLimiter(max int64) *byteLimiter { return &byteLimiter{max_: max} }

func (l *byteLimiter) acquire(n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used+n > l.max_ && l.used > 0 {
		return false
	}
	l.used += n
	return true
}

func (l *byteLimiter) release(n int64) {
	l.mu.Lock()
	l.used -= n
	l.mu.Unlock()
}

// bodies holds remote-write bodies read before, for the next ones: a
// fleet's vmagents send a few hundred a second, of about the same sizes.
var bodies sync.Pool

// getBody returns a body of n bytes from bodies, or a new one.
func getBody(n int) *[]byte {
	if b, ok := bodies.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// remoteWrite answers POST /api/v1/write (Prometheus remote write 1.0:
// snappy-compressed protobuf; or 2.0, by its Content-Type, converted to
// 1.0 before ingest). 204 when every sample was taken; 415 for
// another Content-Encoding (VictoriaMetrics' zstd); 400 when
// the body will never be accepted or some samples are late, too new or out
// of order (the rest was taken; the sender drops the batch); 413 over the size limit;
// 429 when too much is in flight; 503 only where a retry can succeed (the
// write-ahead log failing, a shutdown). A 2xx is sent only once the samples
// are durable.
func (s *Server) remoteWrite(c echo.Context) error {
	if s.opts.Ingest == nil {
		return echo.NewHTTPError(http.StatusNotFound, "remote write is not enabled on this server; start it with -remoteWrite")
	}
	if enc := c.Request().Header.Get("Content-Encoding"); enc != "" && enc != "snappy" {
		// 415, as Remote-Write 2.0 asks for an encoding the receiver does
		// not take: a stock vmagent then sends the block again in
		// Prometheus' protocol and keeps to it (so does it on 400).
		return echo.NewHTTPError(http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Encoding %q is not supported; want snappy (Prometheus remote write 1.0; vmagent falls back to it by itself, -remoteWrite.forcePromProto saves the first try)", enc))
	}
	proto, err := remoteWriteProto(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil {
		return err
	}
	length := c.Request().ContentLength
	if length > s.opts.MaxRemoteWriteBytes {
		return &tooLarge{s.opts.MaxRemoteWriteBytes}
	}
	size := length
	if size <= 0 {
		size = s.opts.MaxRemoteWriteBytes // unknown: count the worst case
	}
	if !s.inflight.acquire(size) {
		return errInflight
	}
	defer s.inflight.release(size)
	var body []byte
	if length > 0 {
		// Read into a body of the length sent, at once: io.ReadAll would
		// grow one by doubling, allocating and copying twice the body.
		// net/http ends the reader at Content-Length. The body is reused:
		// the RemoteWriter keeps nothing of it once it returns.
		buf := getBody(int(length))
		defer bodies.Put(buf)
		body = *buf
		_, err = io.ReadFull(c.Request().Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(c.Request().Body, s.opts.MaxRemoteWriteBytes+1))
	}
	if err != nil {
		return badf("read remote-write body: %v", err)
	}
	if int64(len(body)) > s.opts.MaxRemoteWriteBytes {
		return &tooLarge{s.opts.MaxRemoteWriteBytes}
	}
	// What the body decodes to is what it costs in memory: a few KB of
	// snappy can say 60 MiB. Counted before it is decoded; a header that
	// does not read is ingest's to refuse.
	if n, err := ingest.DecodedLen(body); err == nil {
		if !s.inflight.acquire(int64(n)) {
			return errInflight
		}
		defer s.inflight.release(int64(n))
	}
	var v2 *ingest.Write2Stats
	if proto == ingest.RemoteWrite2Proto {
		v1, st, err := ingest.ConvertRemoteWrite2(body, ingest.Limits{})
		if err != nil {
			return err
		}
		if n, err := ingest.DecodedLen(v1); err == nil {
			if !s.inflight.acquire(int64(n + len(v1))) {
				return errInflight
			}
			defer s.inflight.release(int64(n + len(v1)))
		}
		body, v2 = v1, &st
	}
	res, err := s.opts.Ingest.RemoteWrite(c.Request().Context(), principalOf(c).name, body)
	if err != nil {
		return err
	}
	if res.Rejected() > 0 {
		return &rejectedWrite{res}
	}
	if v2 != nil {
		// Remote-Write 2.0's written counts: the whole request was taken
		// (gpuledger reads the float samples of the series it reads).
		h := c.Response().Header()
		h.Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(v2.Samples))
		h.Set("X-Prometheus-Remote-Write-Histograms-Written", strconv.Itoa(v2.Histograms))
		h.Set("X-Prometheus-Remote-Write-Exemplars-Written", strconv.Itoa(v2.Exemplars))
	}
	return c.NoContent(http.StatusNoContent)
}

// remoteWriteProto reads a remote-write request's Content-Type: Remote-Write
// 1.0 (none, application/x-protobuf, or its proto=prometheus.WriteRequest)
// or 2.0 (proto=io.prometheus.write.v2.Request); another is answered 415,
// as Remote-Write 2.0 asks, so that a sender can fall back to 1.0.
func remoteWriteProto(ctype string) (string, error) {
	if ctype == "" {
		return "", nil
	}
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil || mt != "application/x-protobuf" {
		return "", echo.NewHTTPError(http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type %q is not a remote-write request; want application/x-protobuf (Remote-Write 1.0, or 2.0 with proto=%s)", ctype, ingest.RemoteWrite2Proto))
	}
	switch p := params["proto"]; p {
	case "", "prometheus.WriteRequest":
		return "", nil
	case ingest.RemoteWrite2Proto:
		return p, nil
	default:
		return "", echo.NewHTTPError(http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type proto %q is not supported; want prometheus.WriteRequest (Remote-Write 1.0) or %s (2.0)", p, ingest.RemoteWrite2Proto))
	}
}
