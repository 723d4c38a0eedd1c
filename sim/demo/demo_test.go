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
