package ingest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
)

// v2Encoder writes io.prometheus.write.v2.Request protobuf by hand (the
// test's own encoder, apart from the converter's), in the orders and
// spellings senders may use.
type v2Encoder struct {
	rng     *rand.Rand
	symbols []string
	index   map[string]uint32
}

func (e *v2Encoder) ref(s string) uint32 {
	if e.index == nil {
		e.index = map[string]uint32{"": 0}
		e.symbols = []string{""}
	}
	if i, ok := e.index[s]; ok {
		return i
	}
	e.index[s] = uint32(len(e.symbols))
	e.symbols = append(e.symbols, s)
	return e.index[s]
}

func field(dst []byte, num int, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(num)<<3|2)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

func varintField(dst []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(dst, uint64(num)<<3), v)
}

// request encodes wr as a 2.0 request: the same series, labels and float
// samples, with native histograms, exemplars and metadata beside them
// (which gpuledger does not read), symbols before or after the series.
func (e *v2Encoder) request(wr *prompb.WriteRequest) (body []byte, histograms, exemplars int) {
	var series [][]byte
	for _, ts := range wr.Timeseries {
		var refs []uint32
		for _, l := range ts.Labels {
			refs = append(refs, e.ref(l.Name), e.ref(l.Value))
		}
		var s []byte
		if e.rng.IntN(2) == 0 {
			var packed []byte
			for _, r := range refs {
				packed = binary.AppendUvarint(packed, uint64(r))
			}
			s = field(s, 1, packed)
		} else {
			for _, r := range refs {
				s = varintField(s, 1, uint64(r))
			}
		}
		for _, smp := range ts.Samples {
			var m []byte
			m = binary.AppendUvarint(m, 1<<3|1)
			m = binary.LittleEndian.AppendUint64(m, math.Float64bits(smp.Value))
			m = varintField(m, 2, uint64(smp.Timestamp))
			s = field(s, 2, m)
		}
		if e.rng.IntN(4) == 0 {
			s = field(s, 3, varintField(varintField(nil, 1, 7), 15, 1_700_000_000_000)) // a histogram: count_int, timestamp
			histograms++
		}
		if e.rng.IntN(4) == 0 {
			s = field(s, 4, varintField(nil, 3, 1_700_000_000_000)) // an exemplar
			exemplars++
		}
		s = field(s, 5, varintField(varintField(nil, 1, 2), 3, uint64(e.ref("help text")))) // metadata: gauge, help
		s = varintField(s, 6, 1_600_000_000_000)                                            // created_timestamp
		series = append(series, s)
	}
	var syms []byte
	for _, s := range e.symbols {
		syms = field(syms, 4, []byte(s))
	}
	var out []byte
	after := e.rng.IntN(2) == 0
	if !after {
		out = append(out, syms...)
	}
	for _, s := range series {
		out = field(out, 5, s)
	}
	if after {
		out = append(out, syms...)
	}
	return snappy.Encode(nil, out), histograms, exemplars
}

// TestConvertRemoteWrite2: a 2.0 request converts to the 1.0 body of the
// same series, which ingest then reads exactly as it reads that 1.0
// request; the counts for the answer's headers are the request's.
func TestConvertRemoteWrite2(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		wr := randomRequest(rng)
		// 2.0 series all have a name.
		named := wr.Timeseries[:0]
		samples := 0
		for _, ts := range wr.Timeseries {
			for _, l := range ts.Labels {
				if l.Name == "__name__" {
					named = append(named, ts)
					samples += len(ts.Samples)
					break
				}
			}
		}
		wr.Timeseries = named
		enc := &v2Encoder{rng: rng}
		body, hist, ex := enc.request(wr)
		v1, st, err := ConvertRemoteWrite2(body, Limits{})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if st.Series != len(named) || st.Samples != samples || st.Histograms != hist || st.Exemplars != ex {
			t.Errorf("request %d: counts %+v, want %d series %d samples %d histograms %d exemplars", i, st, len(named), samples, hist, ex)
		}
		var got, want RemoteWrite
		DecodeRemoteWrite(v1, Limits{}, false, &got)
		DecodeRemoteWrite(snappy.Encode(nil, wr.MarshalProtobuf(nil)), Limits{}, false, &want)
		if w, g := summarise(&want), summarise(&got); !reflect.DeepEqual(w, g) {
			t.Fatalf("request %d (-1.0 +2.0 converted)\n%s", i, cmp.Diff(w, g))
		}
	}
}

// TestConvertRemoteWrite2Refuses: what is not a 2.0 request is an
// InputError that says what is wrong.
func TestConvertRemoteWrite2Refuses(t *testing.T) {
	sym := func(s string) []byte { return field(nil, 4, []byte(s)) }
	series := func(refs ...uint64) []byte {
		var s []byte
		for _, r := range refs {
			s = varintField(s, 1, r)
		}
		return field(nil, 5, s)
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return snappy.Encode(nil, out)
	}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"not snappy", []byte("\xff\xff\xff\xff\xff"), "not snappy-compressed"},
		{"a 1.0 request", snappy.Encode(nil, (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}}}}).MarshalProtobuf(nil)),
			"field 1, which a 1.0 WriteRequest has"},
		{"odd labels", cat(sym(""), sym("__name__"), series(1)), "want name-value pairs"},
		{"ref past the table", cat(sym(""), sym("__name__"), series(1, 9)), "past the symbols table"},
		{"no name", cat(sym(""), sym("gpu"), sym("0"), series(1, 2)), "no __name__"},
		{"symbols not starting empty", cat(sym("__name__"), sym("up"), series(0, 1)), "must start with the empty string"},
		{"bad protobuf", snappy.Encode(nil, []byte{0x2a, 0x05, 0x01}), "not a protobuf io.prometheus.write.v2.Request"},
	} {
		_, _, err := ConvertRemoteWrite2(c.body, Limits{})
		var ie *InputError
		if err == nil || !strings.Contains(err.Error(), c.want) || !asInput(err, &ie) {
			t.Errorf("%s: %v, want an InputError saying %q", c.name, err, c.want)
		}
	}
}

func asInput(err error, target **InputError) bool {
	ie, ok := err.(*InputError)
	*target = ie
	return ok
}

// FuzzConvertRemoteWrite2: any body converts or is refused with an
// InputError, never a panic; what converts decodes as a 1.0 body.
func FuzzConvertRemoteWrite2(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 6 {
		body, _, _ := (&v2Encoder{rng: rng}).request(randomRequest(rng))
		raw, _ := snappy.Decode(nil, body)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v1, _, err := ConvertRemoteWrite2(snappy.Encode(nil, data), Limits{MaxDecodedBytes: 1 << 20})
		if err != nil {
			if _, ok := err.(*InputError); !ok {
				t.Fatalf("not an InputError: %v", err)
			}
			return
		}
		var d RemoteWrite
		DecodeRemoteWrite(v1, Limits{}, false, &d)
		if d.Err() != nil {
			t.Fatalf("the converted body does not decode: %v", d.Err())
		}
	})
}
