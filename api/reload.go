package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"time"
)

// Files the server reads again while it runs (the TLS pair, the tokens
// file) are compared by content, not by modification time: the kubelet
// swaps a mounted Secret through a symlink, and a file copied with its
// old time (cp -p, a restored backup) has an older mtime than the one it
// replaces, so a time comparison would never see it.

// contentWatch tells when a set of files' contents change.
type contentWatch struct {
	paths []string
	// seen is the digest of the contents last read; a change is reported
	// once, whether or not the new contents turn out to be usable, so
	// that a broken file is logged once, not at every check.
	seen [sha256.Size]byte
}

// read reads every file and says whether their contents differ from the
// last read; contents are in the order of paths. An unreadable file is an
// error, and counts as no change.
func (w *contentWatch) read() (contents [][]byte, changed bool, err error) {
	h := sha256.New()
	for _, p := range w.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, false, fmt.Errorf("read %s: %w", p, err)
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
		contents = append(contents, b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if sum == w.seen {
		return contents, false, nil
	}
	w.seen = sum
	return contents, true, nil
}

// reloaded returns the callback that counts a reload of what (tls,
// tokens): gpuledger_reloads_total and gpuledger_reload_failures_total.
func (s *Server) reloaded(what string) func(error) {
	ok := s.metrics.GetOrCreateCounter(fmt.Sprintf(`gpuledger_reloads_total{what=%q}`, what))
	failed := s.metrics.GetOrCreateCounter(fmt.Sprintf(`gpuledger_reload_failures_total{what=%q}`, what))
	return func(err error) {
		if err != nil {
			failed.Inc()
		} else {
			ok.Inc()
		}
	}
}

// tokenWatcher returns the loop that reloads the tokens when their files'
// contents change, nil when there is nothing to reload.
func (s *Server) tokenWatcher() func(ctx context.Context) {
	if s.opts.Auth == nil || s.opts.ReloadTokens == nil || len(s.opts.TokenFiles) == 0 {
		return nil
	}
	w := &contentWatch{paths: s.opts.TokenFiles}
	w.read() // what the tokens in force were loaded from
	count := s.reloaded("tokens")
	return func(ctx context.Context) {
		t := time.NewTicker(s.opts.ReloadInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.reloadTokens(w, count)
		}
	}
}

// reloadTokens reads the token files and, when they changed, replaces the
// tokens in force with what ReloadTokens gives.
func (s *Server) reloadTokens(w *contentWatch, count func(error)) {
	_, changed, err := w.read()
	if err == nil && !changed {
		return
	}
	var toks []Token
	if err == nil {
		toks, err = s.opts.ReloadTokens()
	}
	if err == nil && len(toks) == 0 {
		err = errors.New("no tokens left; every request would be refused")
	}
	if err != nil {
		s.log.Error("API tokens not reloaded; the tokens in force stay until the files are fixed", "files", s.opts.TokenFiles, "err", err)
		count(err)
		return
	}
	s.opts.Auth.SetTokens(toks)
	s.log.Info("API tokens reloaded", "files", s.opts.TokenFiles, "tokens", len(toks))
	count(nil)
}
