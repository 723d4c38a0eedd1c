package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// ScrapeOptions configures a Scraper.
type ScrapeOptions struct {
	// Targets are /metrics URLs: dcgm-exporter, kube-state-metrics, Kueue.
	Targets  []string
	Interval time.Duration
	Client   *http.Client
	// MaxBodyBytes caps one scrape. Default 64 MiB.
	MaxBodyBytes int64
	// Now is the clock scrape times come from; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Scraper scrapes exporters into a Pipeline, for clusters without a TSDB.
type Scraper struct {
	opts ScrapeOptions
	pl   *Pipeline
	log  *slog.Logger

	mu       sync.Mutex
	failures map[string]uint64
}

// NewScraper returns a scraper of opts.Targets into pl.
func NewScraper(pl *Pipeline, opts ScrapeOptions) *Scraper {
	if opts.Interval <= 0 {
		opts.Interval = 15 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Interval}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 64 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scraper{opts: opts, pl: pl, log: log, failures: make(map[string]uint64)}
}

// Run scrapes every target every interval until ctx is done.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		s.ScrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ScrapeOnce scrapes each target once, all with the same timestamp.
func (s *Scraper) ScrapeOnce(ctx context.Context) {
	at := s.opts.Now().UnixMilli()
	for _, target := range s.opts.Targets {
		if err := s.scrape(ctx, target, at); err != nil {
			s.mu.Lock()
			s.failures[target]++
			s.mu.Unlock()
			s.log.Warn("scrape failed", "target", target, "err", err)
		}
	}
}

func (s *Scraper) scrape(ctx context.Context, target string, at int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxBodyBytes+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > s.opts.MaxBodyBytes {
		return fmt.Errorf("body over %d bytes", s.opts.MaxBodyBytes)
	}
	_, err = s.pl.Exposition(ctx, target, body, at)
	return err
}

// Failures returns the failed scrapes per target.
func (s *Scraper) Failures() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.failures))
	for k, v := range s.failures {
		out[k] = v
	}
	return out
}
