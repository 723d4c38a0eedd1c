package ingest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// TestPipelineRefusesBadValues: samples no exporter sends (NaN that is not
// a staleness marker, infinite, negative, past a DCGM field's range, labels
// that are not UTF-8) are refused, counted per reason and per sender, and
// said in the answer; the good samples of the same request are taken, and
// a staleness marker is neither. (Before, they were acknowledged, then
// dropped or clamped with no count.)
func TestPipelineRefusesBadValues(t *testing.T) {
	m, scrapes := simScrapes(t, 1)
	l := newLive(t, m, openStore(t), t.TempDir(), simStart)
	feed(l, scrapes[:4], nil)
	at := scrapes[4].at
	ts := at.UnixMilli()
	series := func(metric string, v float64, labels ...string) prompb.TimeSeries {
		ls := []prompb.Label{{Name: "__name__", Value: metric}, {Name: "Hostname", Value: "h100-0"}, {Name: "gpu", Value: "0"}}
		for i := 0; i+1 < len(labels); i += 2 {
			ls = append(ls, prompb.Label{Name: labels[i], Value: labels[i+1]})
		}
		return prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ts}}}
	}
	wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series(MetricGPUUtil, 50, "gpu", "1"),
		series(MetricGPUUtil, math.NaN(), "gpu", "2"),
		series(MetricGPUUtil, math.Float64frombits(staleNaNBits), "gpu", "3"),
		series(MetricPowerUsage, math.Inf(1), "gpu", "2"),
		series(MetricPowerUsage, math.Inf(-1), "gpu", "3"),
		series(MetricGPUUtil, -1, "gpu", "4"),
		series(MetricTotalEnergy, -5, "gpu", "4"),
		series(MetricGPUUtil, 1e308, "gpu", "5"),
		series(MetricGPUUtil, 100.5, "gpu", "5"),
		series(MetricGREngineActive, 1.5, "gpu", "6"),
		series(MetricPowerUsage, 1e6, "gpu", "6"),
		series(MetricGPUUtil, 10, "pod", "bad\xff\xfe"),
		series(MetricKubePodLabels, math.NaN(), "namespace", "ml", "pod", "p"),
		series(MetricKueuePending, -3, "cluster_queue", "cq"),
	}}
	l.clock.Set(at.Add(time.Second))
	res, err := l.pl.RemoteWrite(context.Background(), "vmagent", snappy.Encode(nil, wr.MarshalProtobuf(nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := [NumBadValueReasons]int{badNaN: 2, badInfinite: 2, badNegative: 3, badOutOfRange: 4, badUTF8: 1}
	if diff := cmp.Diff(want, res.Invalid); diff != "" {
		t.Errorf("refused per reason (-want +got):\n%s", diff)
	}
	if res.Accepted != 1 || res.Rejected() != 12 {
		t.Errorf("accepted %d, rejected %d; want the one good sample accepted and 12 rejected", res.Accepted, res.Rejected())
	}
	st := l.pl.Stats()
	for r, n := range want {
		if got := st.Rejected[[2]string{"vmagent", BadValueReasons[r]}]; got != uint64(n) {
			t.Errorf("vmagent's %s: %d, want %d", BadValueReasons[r], got, n)
		}
		if got := st.Ingest.BadValues[r]; got != uint64(n) {
			t.Errorf("ingest's %s: %d, want %d", BadValueReasons[r], got, n)
		}
	}
	if st.Ingest.StaleMarkers != 1 {
		t.Errorf("staleness markers %d, want 1 (a marker is not a bad value)", st.Ingest.StaleMarkers)
	}

	// The counts survive a crash: replay refuses the same samples again.
	l.crash()
	if got := l.pl.Stats().Ingest.BadValues; got != st.Ingest.BadValues {
		t.Errorf("after a crash: %v, want %v", got, st.Ingest.BadValues)
	}
}

// TestBadValueEdges: each DCGM field's range is inclusive, zero is a
// value, and every label is checked.
func TestBadValueEdges(t *testing.T) {
	f := func(metric string, v float64, want int) {
		t.Helper()
		if got := badValue(fieldOf(metric), nil, v, true); got != want {
			t.Errorf("%s %v: %d, want %d", metric, v, got, want)
		}
	}
	f(MetricGPUUtil, 100, -1)
	f(MetricGPUUtil, 0, -1)
	f(MetricGPUUtil, math.Nextafter(100, 200), badOutOfRange)
	f(MetricGREngineActive, 1, -1)
	f(MetricGREngineActive, math.Nextafter(1, 2), badOutOfRange)
	f(MetricPowerUsage, 10_000, -1)
	f(MetricTotalEnergy, 1e18, -1)
	f(MetricTotalEnergy, 2e18, badOutOfRange)
	f(MetricKubePodRequests, 1e300, -1) // no range but finite and not negative
	f(MetricKubePodRequests, math.Copysign(0, -1), -1)
	if got := badValue(fieldOf(MetricGPUUtil), []prometheus.Tag{{Key: "a", Value: "b"}, {Key: "c\xff", Value: "d"}}, 1, true); got != badUTF8 {
		t.Errorf("a label name not UTF-8: %d, want %d", got, badUTF8)
	}
}

// TestExpositionUTF8: a text body is checked for UTF-8 whole, once; a body
// that is not valid has each sample's labels checked, so that only the
// sample with the bad label is refused, and a valid body's next parse is
// checked again.
func TestExpositionUTF8(t *testing.T) {
	var p Parser
	var r recorder
	body := []byte("DCGM_FI_DEV_GPU_UTIL{Hostname=\"n1\",gpu=\"0\",pod=\"ok\"} 10\nDCGM_FI_DEV_GPU_UTIL{Hostname=\"n1\",gpu=\"1\",pod=\"bad\xff\"} 10\n")
	p.ParseExposition(body, 1_790_000_000_000, &r)
	if len(r.samples) != 1 || p.Stats().BadValues[badUTF8] != 1 {
		t.Errorf("%d samples, %d refused as not UTF-8; want 1 and 1", len(r.samples), p.Stats().BadValues[badUTF8])
	}
	p.ParseExposition([]byte("DCGM_FI_DEV_GPU_UTIL{Hostname=\"n1\",gpu=\"0\",pod=\"ok\\\\n\"} 10\n"), 1_790_000_015_000, &r)
	if len(r.samples) != 2 || p.validUTF8 {
		t.Errorf("a valid body after: %d samples, the flag left %v; want 2 and false", len(r.samples), p.validUTF8)
	}
}
