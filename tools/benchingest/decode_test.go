package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding/snappy"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// BenchmarkDecode decodes the bodies of a 1,000-GPU fleet's scrapes, in
// one goroutine, two ways side by side: as serve's requests do
// (ingest.DecodeRemoteWrite: snappy, then the scan that keeps the series
// ingest reads) and as the decode-only limit benchingest prints does
// (snappy, then VictoriaMetrics' whole protobuf unmarshal). The ratio of
// their samples/s is how close serve's decoding is to that limit; the
// rest of serve's work (the log, attribution, HTTP) comes on top.
func BenchmarkDecode(b *testing.B) {
	f := makeFleet(1000, 4, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), 1)
	var bodies [][]byte
	for _, sc := range f.scrapes {
		bodies = append(bodies, sc...)
	}
	perRound := float64(f.series * len(f.scrapes))
	b.Run("system=gpuledger", func(b *testing.B) {
		var d ingest.RemoteWrite
		for b.Loop() {
			for _, body := range bodies {
				ingest.DecodeRemoteWrite(body, ingest.Limits{}, true, &d)
				if err := d.Err(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(perRound*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
	b.Run("system=decode-only", func(b *testing.B) {
		var buf []byte
		var wru prompb.WriteRequestUnmarshaler
		for b.Loop() {
			for _, body := range bodies {
				var err error
				if buf, err = snappy.Decode(buf[:0], body, 256<<20); err != nil {
					b.Fatal(err)
				}
				if _, err := wru.UnmarshalProtobuf(buf); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(perRound*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	})
}

// BenchmarkPipeline is serve's ingest without HTTP: the same fleet's
// bodies (1,000 GPUs, 40 scrapes) given to ingest.Pipeline.RemoteWrite by
// 4 goroutines, in order, as benchingest's senders post them, with the
// write-ahead log on (a temporary folder) and the live path's window. It
// reports samples/s and samples per CPU-second of this process: with no
// load generator sharing the cores, what serve's own work costs.
func BenchmarkPipeline(b *testing.B) {
	f := pipelineFleet()
	scrapes := len(f.scrapes)
	cfg, err := config.Parse([]byte(f.config()), "fleet.yaml")
	if err != nil {
		b.Fatal(err)
	}
	model, err := cfg.AttributionModel("")
	if err != nil {
		b.Fatal(err)
	}
	var bodies [][]byte
	for _, sc := range f.scrapes {
		bodies = append(bodies, sc...)
	}
	clock := f.serveClock()
	var samples, cpu, wall float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		store, err := embedded.Open(filepath.Join(dir, "ledger"), embedded.Options{})
		if err != nil {
			b.Fatal(err)
		}
		pl, err := ingest.NewPipeline(model, attribution.Options{}, store, ingest.PipelineOptions{
			Dir: filepath.Join(dir, "pipeline"), ReorderWindow: reorderWindowMs * time.Millisecond, CatchUpWindow: -1,
			Now: func() time.Time { return clock }})
		if err != nil {
			b.Fatal(err)
		}
		cpu0, began := processCPU(), time.Now()
		b.StartTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(bodies) {
						return
					}
					res, err := pl.RemoteWrite(context.Background(), "bench", bodies[i])
					if err == nil && res.Rejected() != 0 {
						err = fmt.Errorf("request %d: %+v", i, res)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		cpu += processCPU() - cpu0
		wall += time.Since(began).Seconds()
		samples += float64(f.series * scrapes)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		if err := pl.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		store.Close()
	}
	b.ReportMetric(samples/wall, "samples/s")
	b.ReportMetric(samples/cpu, "samples/CPU-s")
}

// pipelineFleet is BenchmarkPipeline's fleet, built once: building it
// takes longer than ingesting it.
var pipelineFleet = sync.OnceValue(func() *fleet {
	return makeFleet(1000, 40, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), 1)
})

// processCPU is the CPU time this process used, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
