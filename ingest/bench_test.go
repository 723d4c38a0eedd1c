package ingest

import (
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/sim"
)

type scrape struct {
	at   time.Time
	body []byte
}

// renderHour renders one hour of the example cluster's telemetry.
func renderHour(b *testing.B) (*attribution.Model, []scrape) {
	b.Helper()
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	sm, err := sim.NewModel(cfg, "")
	if err != nil {
		b.Fatal(err)
	}
	// Run a day of jobs so that the hour has holders.
	if _, err := sm.Run(sim.GenerateMix(cfg, start.Add(-24*time.Hour), 25*time.Hour, 0.85, 1), start.Add(-24*time.Hour), start.Add(24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	tel := sim.NewTelemetry(sm.Cluster, start, end, 15*time.Second)
	var out []scrape
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		out = append(out, scrape{at, body})
	}
	return sm.Attribution, out
}

// BenchmarkParseAndAttribute measures ingest and attribution together on
// the demo cluster's exposition: one op is one hour of 15 s scrapes of 64
// GPUs (88 devices), parsed, attributed and emitted as ledger rows.
func BenchmarkParseAndAttribute(b *testing.B) {
	m, scrapes := renderHour(b)
	var bytes int64
	for _, s := range scrapes {
		bytes += int64(len(s.body))
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	var samples uint64
	for b.Loop() {
		a, err := attribution.New(m, attribution.Options{StartMs: scrapes[0].at.UnixMilli()})
		if err != nil {
			b.Fatal(err)
		}
		var p Parser
		for _, s := range scrapes {
			if err := p.ParseExposition(s.body, s.at.UnixMilli(), a); err != nil {
				b.Fatal(err)
			}
		}
		if rows, _ := a.Emit(scrapes[len(scrapes)-1].at.Add(time.Hour).UnixMilli()); len(rows) == 0 {
			b.Fatal("no rows")
		}
		samples += p.Stats().Samples
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(samples), "ns/sample")
}
