package main

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding/snappy"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"

	"github.com/gpuledger/gpuledger/ingest"
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
