package ingest

import (
	"fmt"
	"math"
	"slices"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/encoding/snappy"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// Limits bound one remote-write request. Zero fields take the defaults.
type Limits struct {
	// MaxDecodedBytes caps a body after snappy decoding. Default 64 MiB.
	MaxDecodedBytes int
	// MaxSeries caps the time series of one request. Default 1,000,000.
	MaxSeries int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDecodedBytes <= 0 {
		l.MaxDecodedBytes = 64 << 20
	}
	if l.MaxSeries <= 0 {
		l.MaxSeries = 1_000_000
	}
	return l
}

// InputError is input that will never be accepted as it is: the sender must
// not retry it (remote write answers 400). Other errors may pass on retry.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// rwSample is one sample of a remote-write request, waiting to be put in
// time order; its tags are p.rwTags[start:end].
type rwSample struct {
	metric     string
	start, end int
	value      float64
	ts         int64
}

// ParseRemoteWrite decodes one Prometheus remote-write 1.0 body (snappy
// compressed protobuf WriteRequest, as Prometheus and vmagent send it) and
// passes its samples to sink in time order. A body that is not valid snappy
// or protobuf, or breaks limits, is an *InputError and nothing of it is
// used. Series of metrics ingest does not read are counted and skipped.
func (p *Parser) ParseRemoteWrite(body []byte, limits Limits, sink Sink) error {
	limits = limits.withDefaults()
	dst := p.rwBuf[:0]
	if p.Retain {
		dst = nil // the samples' strings alias it past this call
	}
	decoded, err := snappy.Decode(dst, body, limits.MaxDecodedBytes)
	if err != nil {
		p.stats.Invalid++
		return inputErrorf("remote-write body of %d bytes is not snappy-compressed within %d bytes: %v", len(body), limits.MaxDecodedBytes, err)
	}
	p.rwBuf = decoded
	if p.wru == nil {
		p.wru = &prompb.WriteRequestUnmarshaler{}
	}
	wr, err := p.wru.UnmarshalProtobuf(decoded)
	if err != nil {
		p.stats.Invalid++
		return inputErrorf("remote-write body is not a protobuf WriteRequest: %v", err)
	}
	if n := len(wr.Timeseries); n > limits.MaxSeries {
		p.stats.Invalid++
		return inputErrorf("remote-write request has %d series; the limit is %d: send smaller batches", n, limits.MaxSeries)
	}
	p.rwTags = p.rwTags[:0]
	p.rwBatch = p.rwBatch[:0]
	for i := range wr.Timeseries {
		ts := &wr.Timeseries[i]
		var metric string
		for _, l := range ts.Labels {
			if l.Name == "__name__" {
				metric = l.Value
				break
			}
		}
		if !wanted(metric) {
			p.stats.Skipped += uint64(len(ts.Samples))
			continue
		}
		start := len(p.rwTags)
		for _, l := range ts.Labels {
			if l.Name != "__name__" {
				p.rwTags = append(p.rwTags, prometheus.Tag{Key: l.Name, Value: l.Value})
			}
		}
		for _, smp := range ts.Samples {
			p.rwBatch = append(p.rwBatch, rwSample{metric: metric, start: start, end: len(p.rwTags), value: smp.Value, ts: smp.Timestamp})
		}
	}
	// A request holds whole series, one after another; attribution wants
	// each device's samples in time order, so the batch is put in time
	// order (stable: a series' own order is kept).
	if !slices.IsSortedFunc(p.rwBatch, cmpTime) {
		slices.SortStableFunc(p.rwBatch, cmpTime)
	}
	for i := range p.rwBatch {
		s := &p.rwBatch[i]
		if math.IsNaN(s.value) && isStaleNaN(s.value) {
			// A staleness marker: the series ended. Attribution bridges no
			// gap longer than its staleness bound anyway.
			p.stats.StaleMarkers++
			continue
		}
		p.handleRow(s.metric, p.rwTags[s.start:s.end], s.value, s.ts, sink)
	}
	p.stats.Lines += uint64(len(p.rwBatch))
	return nil
}

func cmpTime(a, b rwSample) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	}
	return 0
}

// staleNaNBits is the NaN Prometheus and vmagent send to mark a series gone.
const staleNaNBits = 0x7ff0000000000002

func isStaleNaN(v float64) bool { return math.Float64bits(v) == staleNaNBits }

// wanted says whether ingest reads a metric.
func wanted(metric string) bool {
	return isPodMetric(metric) || fieldOf(metric) != 0
}
