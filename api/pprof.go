package api

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves net/http/pprof's index and profiles under
// /debug/pprof/ (its handlers are registered on http.DefaultServeMux,
// which this server does not use, so they are dispatched here).
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}
