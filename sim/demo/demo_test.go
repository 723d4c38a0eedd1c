package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// TestRunDay: a day of the example cluster goes through the loop: jobs
// are admitted, every sample of the telemetry is attributed, and the
// ledger gets rows.
func TestRunDay(t *testing.T) {
	cfg, err := config.Load("../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	res, err := Run(context.Background(), Options{Config: cfg, Start: start, End: start.Add(24 * time.Hour), ScrapeInterval: time.Minute,
		Seed: 1, Load: 0.85, Store: embeddedtest.Open(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sim.Admitted == 0 || res.Offline.Rows == 0 || res.Offline.Attribution.Accepted == 0 {
		t.Fatalf("admitted %d, rows %d, samples %d: want all above 0", res.Sim.Admitted, res.Offline.Rows, res.Offline.Attribution.Accepted)
	}
	var b strings.Builder
	res.WriteStats(&b)
	if !strings.Contains(b.String(), "ledger rows") {
		t.Errorf("stats:\n%s", b.String())
	}
}

// BenchmarkDemoWeek runs a week of the example cluster through the whole
// loop at the demo's 15 s scrape interval: the simulator, the exporters'
// text, ingest and attribution, the embedded ledger. samples/s is what
// the demo month and a backfill of the same telemetry go at.
func BenchmarkDemoWeek(b *testing.B) {
	cfg, err := config.Load("../../examples/cluster.yaml")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var samples uint64
	for b.Loop() {
		res, err := Run(context.Background(), Options{Config: cfg, Start: start, End: start.Add(7 * 24 * time.Hour), ScrapeInterval: 15 * time.Second,
			Seed: 1, Load: 0.85, Store: embeddedtest.Open(b)})
		if err != nil {
			b.Fatal(err)
		}
		samples += res.Offline.Attribution.Accepted
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}
