package ingest

import (
	"cmp"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// sameRows checks that the parser's rows for body, with its series cache
// as earlier calls left it, are VictoriaMetrics' rows for the whole body:
// the same names, labels, values and timestamps, and the same lines
// logged invalid.
func sameRows(t *testing.T, p *Parser, body string) {
	t.Helper()
	var want prometheus.Rows
	wantInvalid := 0
	want.UnmarshalWithErrLogger(body, func(string) { wantInvalid++ })
	invalid := p.stats.Invalid
	p.unmarshal(body)
	if got := int(p.stats.Invalid - invalid); got != wantInvalid {
		t.Fatalf("body %q: %d invalid lines, VictoriaMetrics' parser %d", body, got, wantInvalid)
	}
	if len(p.lines) != len(want.Rows) {
		t.Fatalf("body %q: %d rows, VictoriaMetrics' parser %d", body, len(p.lines), len(want.Rows))
	}
	for i, w := range want.Rows {
		g := p.lines[i]
		same := g.Metric == w.Metric && g.Timestamp == w.Timestamp && len(g.Tags) == len(w.Tags) &&
			(math.Float64bits(g.Value) == math.Float64bits(w.Value) || math.IsNaN(g.Value) && math.IsNaN(w.Value))
		for j := range w.Tags {
			same = same && len(g.Tags) == len(w.Tags) && g.Tags[j] == w.Tags[j]
		}
		if !same {
			t.Fatalf("body %q row %d: %+v, VictoriaMetrics' parser %+v", body, i, g, w)
		}
	}
}

// TestSeriesCacheSameRows: lines whose series were seen before give what
// VictoriaMetrics' parser gives, whatever follows the labels: values
// with exponents, Inf and NaN, timestamps in seconds or milliseconds,
// exemplars, braces in label values, bad values and bad timestamps.
func TestSeriesCacheSameRows(t *testing.T) {
	series := []string{
		`DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="n1",namespace="a",pod="p"}`,
		`m{a="x} 1",b="\"}"}`,
		`m {a="b"}`,
		`kueue_admission_wait_time_seconds_bucket{cluster_queue="q",le="+Inf"}`,
		`m{a="b\\n#"}`,
	}
	tails := []string{
		" 1", " 0.5", "  42.125\t", " -0", " 1e3", " 1.5e+06", " +Inf", " NaN", " -inf", " 0x1p-2", " +1", " .5", " 5.",
		" 1 1790000000000", " 1 1790000000", " 2\t17 ", " 3 -5", " 3 1.5", " 3 x", " x", "", " 1 2 3", " 12345678901234567890",
		" 1234567890123456", " 1 # {trace_id=\"a\"} 2", " 1}", " 0.1234567890123", " 1 99999999999999999",
	}
	var p Parser
	for round := range 3 {
		for _, s := range series {
			var b strings.Builder
			for _, tail := range tails {
				b.WriteString(s + tail + "\n")
			}
			sameRows(t, &p, b.String())
			if round == 0 {
				sameRows(t, &p, s+" 7\r\n# HELP x y\n\n  "+s+" 8")
			}
		}
	}
	if len(p.series.curr) == 0 {
		t.Fatal("nothing cached: the test does not exercise the cache")
	}
	// Series in a changing order, some coming and going: the expected
	// next series is often another.
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var b strings.Builder
		for _, i := range r.Perm(len(series))[:1+r.IntN(len(series))] {
			b.WriteString(series[i] + tails[r.IntN(len(tails))] + "\n")
		}
		sameRows(t, &p, b.String())
	}
}

// TestSeriesCacheBounded: a target that sends new series every scrape
// does not grow a parser's cache past two generations of
// seriesCacheBytes.
func TestSeriesCacheBounded(t *testing.T) {
	var p Parser
	var b strings.Builder
	for scrape := range 200 {
		b.Reset()
		for i := range 500 {
			b.WriteString(`DCGM_FI_DEV_GPU_UTIL{gpu="` + strings.Repeat("x", 200) + `",pod="p` + itoa(scrape*500+i) + `"} 1` + "\n")
		}
		p.unmarshal(b.String())
	}
	if p.series.bytes > seriesCacheBytes {
		t.Fatalf("cache generation holds %d bytes, over %d", p.series.bytes, seriesCacheBytes)
	}
	if n := len(p.series.curr) + len(p.series.prev); n >= 200*500 {
		t.Fatalf("cache holds %d series: every series sent", n)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// FuzzSeriesCache: a body parsed twice by one parser (the second time
// from its cache) gives VictoriaMetrics' rows both times.
func FuzzSeriesCache(f *testing.F) {
	f.Add("m{a=\"b\"} 1\nm{a=\"b\"} 2 1790000000000\n")
	f.Add(`DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n\"x",exported_pod="p"} NaN 12`)
	f.Add("m{a=\"}\"} 1 # {x=\"y\"} 2\n")
	if b, err := os.ReadFile("../../shared/data/dcgm-exporter/samples/t4-a10g-datadog-fixture.prom"); err == nil {
		f.Add(string(b))
	}
	f.Add("kube_pod_labels{namespace=\"a\",pod=\"b\",label_kueue_x_k8s_io_queue_name=\"q\"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n\",pod=\"\xff\"} 5\n")
	f.Fuzz(func(t *testing.T, body string) {
		var p Parser
		sameRows(t, &p, body)
		sameRows(t, &p, body)
		sameSamples(t, body)
	})
}

// sameSamples checks that what a parser delivers of body, parsed three
// times (the later times from its cache), is what handleRow makes of
// VictoriaMetrics' rows of the whole body, with the same counts.
func sameSamples(t *testing.T, body string) {
	t.Helper()
	var p, ref Parser
	var got, want recorder
	for i := range 3 {
		ms := int64(1_790_000_000_000 + i*15_000)
		_ = p.ParseExposition([]byte(body), ms, &got)
		var rows prometheus.Rows
		rows.UnmarshalWithErrLogger(body, ref.logLineError)
		ref.validUTF8 = utf8.ValidString(body)
		slices.SortStableFunc(rows.Rows, func(a, b prometheus.Row) int {
			return cmp.Compare(cmp.Or(a.Timestamp, ms), cmp.Or(b.Timestamp, ms))
		})
		for _, r := range rows.Rows {
			ref.handleRow(r.Metric, r.Tags, r.Value, cmp.Or(r.Timestamp, ms), &want)
		}
		ref.stats.Lines += uint64(len(rows.Rows))
		ref.validUTF8 = false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q: delivered\n%+v\nwant\n%+v", body, got, want)
	}
	if !reflect.DeepEqual(p.Stats(), ref.Stats()) {
		t.Fatalf("body %q: stats %+v, want %+v", body, p.Stats(), ref.Stats())
	}
}

// TestSeriesCacheSameSamples: the fixture of a real dcgm-exporter, the
// Kueue and kube-state-metrics series of the tests, and lines with bad
// values and labels are delivered as without the cache.
func TestSeriesCacheSameSamples(t *testing.T) {
	bodies := []string{
		"kube_pod_labels{namespace=\"a\",pod=\"b\",label_kueue_x_k8s_io_queue_name=\"q\"} 1\nkube_pod_owner{namespace=\"a\",pod=\"b\",owner_kind=\"Job\",owner_name=\"j\"} 1\n",
		"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n\",pod=\"\xff\"} 5\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\",Hostname=\"n\",exported_pod=\"p\",exported_namespace=\"a\",pod=\"exp\"} -1\n",
		"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5\nDCGM_FI_DEV_FB_USED{gpu=\"0\",Hostname=\"n\"} 1e3\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n\"} 500\nother{a=\"b\"} 1\n",
		"kueue_admission_wait_time_seconds_bucket{cluster_queue=\"q\",replica_role=\"leader\",le=\"+Inf\"} 3\nkueue_pending_workloads{cluster_queue=\"q\",status=\"active\"} 2\n",
		"vllm:num_requests_running{model_name=\"m\",namespace=\"a\",pod=\"b\"} 2 1790000000000\nvllm:num_requests_running{model_name=\"m\",namespace=\"a\",pod=\"b\"} 1 1789999990000\n",
	}
	if b, err := os.ReadFile("../../shared/data/dcgm-exporter/samples/t4-a10g-datadog-fixture.prom"); err == nil {
		bodies = append(bodies, string(b))
	}
	for _, b := range bodies {
		sameSamples(t, b)
	}
}
