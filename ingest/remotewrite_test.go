package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/s2"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// decoded is what a decoding kept, in a form go-cmp compares: each kept
// sample with its metric, value bits, time and labels. (Not what it
// skipped: VictoriaMetrics' unmarshaler drops series without samples,
// which the scanner counts; TestDecodeRemoteWriteSkipped counts them.)
type decoded struct {
	Samples []string
	Err     bool
}

func summarise(d *RemoteWrite) decoded {
	out := decoded{Err: d.err != nil}
	for _, s := range d.batch {
		var b strings.Builder
		b.WriteString(s.metric)
		for _, t := range d.tags[s.start:s.end] {
			b.WriteString("|" + t.Key + "=" + t.Value)
		}
		b.WriteString(" " + strconv.FormatUint(math.Float64bits(s.value), 16) + " @" + strconv.FormatInt(s.ts, 10))
		out.Samples = append(out.Samples, b.String())
	}
	return out
}

// referenceDecode decodes a body with VictoriaMetrics' own unmarshaler,
// as ingest did before it read the protobuf itself: the reference the
// scanner must agree with.
func referenceDecode(body []byte, limits Limits) *RemoteWrite {
	limits = limits.withDefaults()
	d := &RemoteWrite{}
	n, err := snappy.DecodedLen(body)
	if err != nil || n > limits.MaxDecodedBytes {
		d.err = &InputError{"snappy"}
		return d
	}
	decoded, err := snappy.Decode(nil, body)
	if err != nil {
		// golang/snappy refuses a copy at offset 0, which s2 (ingest's
		// codec) reads as its repeat-offset extension: such a body is
		// read as s2 reads it (decodeSnappy), and only there do the two
		// differ.
		if decoded, err = s2.Decode(nil, body); err != nil {
			d.err = &InputError{"snappy"}
			return d
		}
	}
	var wru prompb.WriteRequestUnmarshaler
	wr, err := wru.UnmarshalProtobuf(decoded)
	if err != nil {
		d.err = &InputError{err.Error()}
		return d
	}
	if len(wr.Timeseries) > limits.MaxSeries {
		d.err = &InputError{"series"}
		return d
	}
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
			continue
		}
		start := len(d.tags)
		for _, l := range ts.Labels {
			if l.Name != "__name__" {
				d.tags = append(d.tags, tag(l.Name, l.Value))
			}
		}
		for _, s := range ts.Samples {
			d.batch = append(d.batch, rwSample{metric: metric, start: start, end: len(d.tags), value: s.Value, ts: s.Timestamp})
		}
	}
	slicesSortStable(d.batch)
	return d
}

// randomWrite is a remote-write request of a few GPUs' series: wanted and
// unwanted metrics, the name label anywhere in the label list, several
// samples out of time order, staleness markers, kube-state-metrics series.
func randomWrite(rng *rand.Rand) []byte { return snappy.Encode(nil, randomProto(rng)) }

// randomProto is randomWrite's protobuf, before snappy.
func randomProto(rng *rand.Rand) []byte {
	wr := randomRequest(rng)
	return wr.MarshalProtobuf(nil)
}

// randomRequest is randomProto's request.
func randomRequest(rng *rand.Rand) *prompb.WriteRequest {
	metrics := []string{MetricGPUUtil, MetricGREngineActive, MetricFBUsed, MetricPowerUsage, MetricTotalEnergy,
		"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_PCIE_TX_BYTES", MetricKubePodLabels, MetricKubePodPhase, ""}
	var wr prompb.WriteRequest
	for range rng.IntN(40) {
		labels := []prompb.Label{{Name: "gpu", Value: strconv.Itoa(rng.IntN(8))}, {Name: "Hostname", Value: "node-" + strconv.Itoa(rng.IntN(3))},
			{Name: "namespace", Value: "team-a"}, {Name: "pod", Value: "p-" + strconv.Itoa(rng.IntN(4))}, {Name: "phase", Value: "Running"}}
		if m := metrics[rng.IntN(len(metrics))]; m != "" {
			at := rng.IntN(len(labels) + 1)
			labels = append(labels[:at], append([]prompb.Label{{Name: "__name__", Value: m}}, labels[at:]...)...)
		}
		var samples []prompb.Sample
		for range rng.IntN(4) {
			v := rng.Float64()
			if rng.IntN(10) == 0 {
				v = math.Float64frombits(staleNaNBits)
			}
			samples = append(samples, prompb.Sample{Value: v, Timestamp: 1_700_000_000_000 + rng.Int64N(60_000)})
		}
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: labels, Samples: samples})
	}
	return &wr
}

// TestDecodeRemoteWriteMatchesReference: the scanner keeps exactly what
// VictoriaMetrics' unmarshaler followed by the name filter keeps, in the
// same order, on random requests, and refuses damaged ones that
// VictoriaMetrics refuses (unless the damage is only in what it skips).
func TestDecodeRemoteWriteMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d RemoteWrite
	for i := range 500 {
		body := randomWrite(rng)
		undamaged := body
		if i%50 == 49 {
			// Damage it: cut the protobuf short, or flip a byte.
			raw, _ := snappy.Decode(nil, body)
			if len(raw) > 2 {
				if i%100 == 49 {
					raw = raw[:len(raw)/2]
				} else {
					raw[rng.IntN(len(raw))] ^= 0xff
				}
			}
			body = snappy.Encode(nil, raw)
		}
		fresh := i%2 == 0
		DecodeRemoteWrite(body, Limits{}, fresh, &d)
		if fresh {
			// The body went back to the pool: what was decoded must not
			// alias it.
			poisonBodyPool()
		}
		checkCut(t, body, Limits{})
		want := referenceDecode(body, Limits{})
		if want.err != nil {
			if d.err == nil {
				// Damage only in what the scanner skips: it keeps what
				// the body held before the damage.
				if w, g := summarise(referenceDecode(undamaged, Limits{})).Samples, summarise(&d).Samples; !slices.Equal(w, g) {
					t.Fatalf("request %d: VictoriaMetrics refuses it (%v), the scanner keeps samples the undamaged body did not hold:\n%s", i, want.err, cmp.Diff(w, g))
				}
			}
			continue
		}
		if refusedFieldZero(d.err) {
			continue // VictoriaMetrics skips field 0; the scanner refuses it
		}
		if diff := cmp.Diff(summarise(want), summarise(&d)); diff != "" {
			t.Fatalf("request %d: (-reference +scanner)\n%s", i, diff)
		}
	}
}

// TestDecodeRemoteWriteSkipped: the scanner counts the series of metrics
// ingest does not read (one with several samples, one with none, one
// without a name, its name last), not their samples, and stops reading
// each at its name: damage after it is not looked at.
func TestDecodeRemoteWriteSkipped(t *testing.T) {
	series := func(name string, samples int) prompb.TimeSeries {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "gpu", Value: "0"}, {Name: "Hostname", Value: "n"}}}
		if name != "" {
			ts.Labels = append([]prompb.Label{{Name: "__name__", Value: name}}, ts.Labels...)
		}
		for i := range samples {
			ts.Samples = append(ts.Samples, prompb.Sample{Value: 1, Timestamp: int64(i + 1)})
		}
		return ts
	}
	last := series("", 1)
	last.Labels = append(last.Labels, prompb.Label{Name: "__name__", Value: "DCGM_FI_DEV_GPU_TEMP"})
	wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series(MetricGPUUtil, 2), series("DCGM_FI_DEV_SM_CLOCK", 3),
		series("DCGM_FI_DEV_GPU_TEMP", 0), series("", 2), last}}
	raw := wr.MarshalProtobuf(nil)
	var d RemoteWrite
	DecodeRemoteWrite(snappy.Encode(nil, raw), Limits{}, false, &d)
	if d.err != nil || len(d.batch) != 2 || d.series != 5 || d.skipped != 4 {
		t.Fatalf("err %v, %d samples kept, %d series, %d skipped; want 2 kept of 5 series, 4 skipped", d.err, len(d.batch), d.series, d.skipped)
	}
	checkCut(t, snappy.Encode(nil, raw), Limits{})
	// A skipped series whose sample field claims more bytes than the
	// series holds: its own length still frames the series, so the rest of
	// the body is read.
	one := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("DCGM_FI_DEV_SM_CLOCK", 1)}}
	b := one.MarshalProtobuf(nil)
	// The sample, last: key 0x12, length 11 (value: key and 8 bytes;
	// timestamp: key and 1 byte).
	if b[len(b)-13] != 2<<3|wireLen || b[len(b)-12] != 11 {
		t.Fatalf("the sample is not where this test looks: % x", b)
	}
	b[len(b)-12] = 0x7f
	b = append(b, wr.MarshalProtobuf(nil)...)
	DecodeRemoteWrite(snappy.Encode(nil, b), Limits{}, false, &d)
	if d.err != nil || len(d.batch) != 2 || d.skipped != 5 {
		t.Fatalf("damage past a skipped series' name: err %v, %d samples kept, %d skipped; want 2 kept, 5 skipped", d.err, len(d.batch), d.skipped)
	}
	// The log's cut body leaves the damage out.
	checkCut(t, snappy.Encode(nil, b), Limits{})
}

// TestDecodeRemoteWriteLimits: too many series is an input error, and
// nothing of the body is kept.
func TestDecodeRemoteWriteLimits(t *testing.T) {
	var wr prompb.WriteRequest
	for i := range 3 {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: MetricGPUUtil},
			{Name: "gpu", Value: strconv.Itoa(i)}, {Name: "Hostname", Value: "n"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 2}}})
	}
	body := snappy.Encode(nil, wr.MarshalProtobuf(nil))
	var d RemoteWrite
	DecodeRemoteWrite(body, Limits{MaxSeries: 2}, false, &d)
	var ie *InputError
	if d.err == nil || !errorsAs(d.err, &ie) || len(d.batch) != 0 {
		t.Fatalf("3 series past a limit of 2: err %v, %d samples kept", d.err, len(d.batch))
	}
	DecodeRemoteWrite(body, Limits{MaxSeries: 3}, false, &d)
	if d.err != nil || len(d.batch) != 3 {
		t.Fatalf("3 series within a limit of 3: err %v, %d samples kept", d.err, len(d.batch))
	}
}

// FuzzDecodeRemoteWrite: the scanner never panics; where
// VictoriaMetrics' unmarshaler reads a body, the scanner keeps the same
// samples; and it refuses no body VictoriaMetrics reads. It may read
// bodies VictoriaMetrics refuses, but only for damage in what it skips:
// metadata, native histograms, and series of metrics it does not read
// past their name.
func FuzzDecodeRemoteWrite(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		f.Add(randomProto(rng), false)
	}
	f.Add([]byte("garbage"), true)
	// Most mutations of a snappy body break its framing, so the fuzzer
	// mutates the protobuf and compresses it here; with compressed set,
	// the bytes are the body as they are.
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		body := data
		if !compressed {
			body = snappy.Encode(nil, data)
		}
		var d RemoteWrite
		DecodeRemoteWrite(body, Limits{MaxDecodedBytes: 1 << 20}, false, &d)
		want := referenceDecode(body, Limits{MaxDecodedBytes: 1 << 20})
		switch {
		case want.err == nil && refusedFieldZero(d.err):
			return // VictoriaMetrics skips field number 0; the scanner refuses it
		case want.err == nil && d.err != nil:
			t.Fatalf("VictoriaMetrics reads the body, the scanner refuses it: %v", d.err)
		case want.err != nil:
			return
		}
		// go-cmp only to show a difference: it is most of an execution's
		// time otherwise, and the fuzzer's minimisation stalls on it.
		if w, g := summarise(want), summarise(&d); !reflect.DeepEqual(w, g) {
			t.Fatalf("(-reference +scanner)\n%s", cmp.Diff(w, g))
		}
		checkCut(t, body, Limits{MaxDecodedBytes: 1 << 20})
	})
}

// refusedFieldZero says whether err is the scanner's refusal of a
// protobuf field numbered 0, which VictoriaMetrics' unmarshaler skips.
func refusedFieldZero(err error) bool {
	return err != nil && err.Error() == errProto("field number 0").Error()
}

// TestDecodeRemoteWriteFieldZero: protobuf has no field 0, so a body that
// holds one (such as 60 MiB of zero bytes, which VictoriaMetrics' decoder
// reads as an empty request) is refused, at the top level and inside a
// series, on both of protoField's paths.
func TestDecodeRemoteWriteFieldZero(t *testing.T) {
	good := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: MetricGPUUtil},
		{Name: "gpu", Value: "0"}, {Name: "Hostname", Value: "n"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 2}}}}}
	raw := good.MarshalProtobuf(nil)
	series := raw[2:] // the series' bytes (key 0x0a, a one-byte length, then them)
	for name, body := range map[string][]byte{
		"zeros":             make([]byte, 1<<20),
		"varint field 0":    append(slices.Clone(raw), 0x00, 0x01),
		"bytes field 0":     append(slices.Clone(raw), 0x02, 0x01, 0xff),
		"inside a series":   append(append([]byte{0x0a, byte(len(series) + 2)}, series...), 0x00, 0x05),
		"long key, field 0": append(slices.Clone(raw), 0x80, 0x00, 0x01),
	} {
		var d RemoteWrite
		DecodeRemoteWrite(snappy.Encode(nil, body), Limits{}, false, &d)
		if !refusedFieldZero(d.err) || len(d.batch) != 0 {
			t.Errorf("%s: err %v, %d samples kept; want the field-0 refusal and nothing kept", name, d.err, len(d.batch))
		}
	}
	var d RemoteWrite
	DecodeRemoteWrite(snappy.Encode(nil, raw), Limits{}, false, &d)
	if d.err != nil || len(d.batch) != 1 {
		t.Fatalf("the body without field 0: err %v, %d samples", d.err, len(d.batch))
	}
}

// poisonBodyPool overwrites a decoded body back in the pool, so that
// what still aliases it reads garbage.
func poisonBodyPool() {
	if b, ok := bodyPool.Get().(*[]byte); ok {
		for k := range (*b)[:cap(*b)] {
			(*b)[:cap(*b)][k] = 0xee
		}
		bodyPool.Put(b)
	}
}

// checkCut decodes body as the live pipeline does (cut, for the log; the
// decoded body from the pool), then decodes the cut body as replay does:
// both must hold what decoding the body alone does, and the cut body none
// of its skipped series.
func checkCut(t *testing.T, body []byte, limits Limits) {
	t.Helper()
	var whole, live, replay RemoteWrite
	DecodeRemoteWrite(body, limits, false, &whole)
	live.cut = true
	DecodeRemoteWrite(body, limits, true, &live)
	poisonBodyPool() // the cut body must not alias the decoded one
	if whole.err != nil {
		if live.err == nil {
			t.Fatalf("the body decodes when cut, not whole: %v", whole.err)
		}
		return
	}
	if live.err != nil {
		t.Fatalf("the body decodes whole, not when cut: %v", live.err)
	}
	if w, g := summarise(&whole), summarise(&live); !reflect.DeepEqual(w, g) || whole.skipped != live.skipped {
		t.Fatalf("cutting changes the decoding (-whole +cut)\n%s", cmp.Diff(w, g))
	}
	// The log's cut bodies are plain snappy: a server of an older
	// version (golang/snappy) replays them too.
	if _, err := snappy.Decode(nil, live.cutBody); err != nil {
		t.Fatalf("the cut body is not a snappy block golang/snappy reads: %v", err)
	}
	DecodeRemoteWrite(live.cutBody, limits, false, &replay)
	if w, g := summarise(&whole), summarise(&replay); !reflect.DeepEqual(w, g) {
		t.Fatalf("the cut body decodes differently (-whole +cut body)\n%s", cmp.Diff(w, g))
	}
	if replay.err != nil || replay.skipped != 0 || replay.series != whole.series-int(whole.skipped) {
		t.Fatalf("the cut body: err %v, %d series, %d skipped; want the %d of %d series read, none skipped",
			replay.err, replay.series, replay.skipped, whole.series-int(whole.skipped), whole.series)
	}
}

func tag(k, v string) prometheus.Tag { return prometheus.Tag{Key: k, Value: v} }

func slicesSortStable(b []rwSample) { slices.SortStableFunc(b, cmpTime) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestReadMetricsAreRead: every name ReadMetrics lists (what scrape
// configurations keep) is one the decoder keeps, and no two are the same.
func TestReadMetricsAreRead(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range ReadMetrics {
		if !wanted(m) {
			t.Errorf("ReadMetrics lists %s, which ingest skips", m)
		}
		if seen[m] {
			t.Errorf("ReadMetrics lists %s twice", m)
		}
		seen[m] = true
	}
}

// withSkipped adds n series of a metric ingest does not read to a
// remote-write body (a WriteRequest's series are a repeated field, so
// appending one request's protobuf to another's adds its series).
func withSkipped(t testing.TB, body []byte, n int) []byte {
	t.Helper()
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	var extra prompb.WriteRequest
	for i := range n {
		extra.Timeseries = append(extra.Timeseries, prompb.TimeSeries{
			Labels: []prompb.Label{{Name: "__name__", Value: "DCGM_FI_DEV_SM_CLOCK"}, {Name: "gpu", Value: strconv.Itoa(i)},
				{Name: "Hostname", Value: "node-with-a-long-name-" + strings.Repeat("x", 64)}},
			Samples: []prompb.Sample{{Value: 1410, Timestamp: 1}}})
	}
	return snappy.Encode(nil, extra.MarshalProtobuf(raw))
}

// TestDecodeSnappy: the decoder refuses a body whose header says more than
// the limit before it decodes, refuses a damaged block, reads a body of
// golang/snappy and s2's repeat-offset extension, and keeps dst's array
// on a refusal.
func TestDecodeSnappy(t *testing.T) {
	raw := bytes.Repeat([]byte("DCGM_FI_DEV_GPU_UTIL"), 100)
	dst := make([]byte, 0, 8)
	got, err := decodeSnappy(dst, snappy.Encode(nil, raw), len(raw))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("golang/snappy's block: %v", err)
	}
	if _, err := decodeSnappy(dst, snappy.Encode(nil, raw), len(raw)-1); err == nil || !strings.Contains(err.Error(), fmt.Sprint(len(raw))) {
		t.Fatalf("a block over the limit: %v, want it refused, naming its length", err)
	}
	damaged := snappy.Encode(nil, raw)
	damaged = damaged[:len(damaged)-1]
	if got, err := decodeSnappy(dst, damaged, len(raw)); err == nil || cap(got) != cap(dst) {
		t.Fatalf("a damaged block: %v (cap %d), want it refused and dst kept", err, cap(got))
	}
	if _, err := decodeSnappy(dst, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1<<20); err == nil {
		t.Fatal("a bad length header was read")
	}
	// "ab" then a copy of 6 at offset 0: s2 repeats the last offset,
	// and there is none yet, so s2 refuses it too.
	if _, err := decodeSnappy(nil, []byte{8, 1 << 2, 'a', 'b', 2<<2 | 1, 0}, 8); err == nil {
		t.Fatal("a repeat with no offset before it was read")
	}
	// "ab", a copy of 4 at offset 2, then s2's repeat of that offset for
	// 4 more: golang/snappy refuses the offset 0, s2 reads it.
	ext := []byte{10, 1 << 2, 'a', 'b', 0<<2 | 1, 2, 0<<2 | 1, 0}
	if _, err := snappy.Decode(nil, ext); err == nil {
		t.Fatal("golang/snappy read s2's extension; the test's body is wrong")
	}
	if got, err := decodeSnappy(nil, ext, 10); err != nil || string(got) != "ababababab" {
		t.Fatalf("s2's repeat offset: %q, %v; want ababababab", got, err)
	}
}

// TestPrecheck: before the log, a remote-write body is refused when its
// snappy length header is bad or says more than the limit, with what to do
// named; a body within the limit passes, and other records are not looked
// at.
func TestPrecheck(t *testing.T) {
	raw := bytes.Repeat([]byte{0x0a, 0}, 500)
	body := snappy.Encode(nil, raw)
	if err := precheck(record{kind: recRemoteWrite, body: body}, Limits{MaxDecodedBytes: len(raw)}); err != nil {
		t.Fatalf("a body at the limit: %v", err)
	}
	err := precheck(record{kind: recRemoteWrite, body: body}, Limits{MaxDecodedBytes: len(raw) - 1})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "decodes to 1000 bytes; the limit is 999") {
		t.Fatalf("a body over the limit: %v", err)
	}
	// A length header s2 (the decoder) refuses: longer than 5 bytes.
	long := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}
	if err := precheck(record{kind: recRemoteWrite, body: long}, Limits{}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "not snappy-compressed") {
		t.Fatalf("a bad length header: %v", err)
	}
	if err := precheck(record{kind: recSettle, body: long}, Limits{}); err != nil {
		t.Fatalf("a settle record: %v", err)
	}
}
