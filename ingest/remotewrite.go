package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	// s2 reads and writes the snappy block format remote write 1.0 sends,
	// faster than golang/snappy (the codec of VictoriaMetrics' own
	// lib/encoding/snappy): 18% on a scrape's bodies decoding, 35%
	// compressing the log's cut bodies.
	"github.com/klauspost/compress/s2"
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
// time order; its tags are tags[start:end] of its RemoteWrite.
type rwSample struct {
	metric     string
	start, end int
	value      float64
	ts         int64
}

// RemoteWrite is a remote-write body decoded down to what ingest reads:
// the samples of the series of metrics it reads, in time order, with their
// labels; the other series are only counted. Decoding is a pure function
// of the body (DecodeRemoteWrite), so that requests can be decoded
// concurrently and handed to the parser (and attribution) in order.
type RemoteWrite struct {
	// buf is the snappy-decoded body, kept for the next decode into d;
	// nothing decoded aliases it.
	buf []byte
	// arena holds copies of the metric names, label names and values of
	// the kept series: a fifth of a body of megabytes, so that a body
	// from the pool goes back to it as soon as it is read. The sink
	// copies what it keeps; the next decode into d overwrites the arena.
	arena []byte
	tags  []prometheus.Tag
	batch []rwSample
	// series is how many series the body held; skipped how many of them
	// are of metrics ingest does not read.
	series  int
	skipped uint64
	// cut asks for the body cut down to the series ingest reads: their
	// protobuf, moved to the front of the decoded body as it is read (a
	// WriteRequest of its own, which decodes as the whole body did, less
	// the skipped series), then snappy-compressed into cutBody, for the
	// write-ahead log. The compression takes the free end of the decoded
	// body as its scratch space, so a decoding holds only the compressed
	// cut, unless the cut is most of the body.
	cut     bool
	cutBody []byte
	// err is why the body is refused, an *InputError; nothing of it is
	// used then.
	err error
}

// DecodeRemoteWrite decodes one Prometheus remote-write 1.0 body (snappy
// compressed protobuf WriteRequest, as Prometheus and vmagent send it)
// into d, reusing d's buffers; with fresh, the decoded body comes from a
// pool and goes back to it before DecodeRemoteWrite returns (a decoding
// waiting for its turn then holds a fifth of the body, not all of it),
// instead of being kept in d. It reads the protobuf itself: a series is
// skipped by its __name__ before any of its labels are kept, which is most of a
// dcgm-exporter scrape (ingest reads 5 of its 25 default counters), and
// a skipped series is not read past its name.
func DecodeRemoteWrite(body []byte, limits Limits, fresh bool, d *RemoteWrite) {
	limits = limits.withDefaults()
	d.Release()
	dst := d.buf[:0]
	if fresh {
		dst = nil
		if b, ok := bodyPool.Get().(*[]byte); ok {
			dst = (*b)[:0]
		}
	}
	d.arena = d.arena[:0]
	d.tags, d.batch, d.series, d.skipped, d.cutBody, d.err = d.tags[:0], d.batch[:0], 0, 0, d.cutBody[:0], nil
	decoded, err := decodeSnappy(dst, body, limits.MaxDecodedBytes)
	if fresh && cap(decoded) > 0 {
		defer func() {
			b := decoded[:0]
			bodyPool.Put(&b)
		}()
	} else {
		d.buf = decoded
	}
	if err != nil {
		d.err = inputErrorf("remote-write body of %d bytes is not snappy-compressed within %d bytes: %v", len(body), limits.MaxDecodedBytes, err)
		return
	}
	cutLen, err := d.scan(decoded, limits.MaxSeries)
	if err != nil {
		d.tags, d.batch, d.series, d.skipped = d.tags[:0], d.batch[:0], 0, 0
		d.err = err
		return
	}
	if d.cut {
		kept, scratch := decoded[:cutLen], decoded[cutLen:cap(decoded)]
		if n := s2.MaxEncodedLen(len(kept)); n <= len(scratch) {
			d.cutBody = append(d.cutBody, s2.EncodeSnappy(scratch, kept)...)
		} else {
			// Most of the body kept (kube-state-metrics' series alone):
			// compressed into cutBody itself, grown to the worst case, so
			// that the encoder allocates nothing of its own.
			d.cutBody = s2.EncodeSnappy(slices.Grow(d.cutBody, n)[:n], kept)
		}
	}
	// A request holds whole series, one after another; attribution wants
	// each device's samples in time order, so the batch is put in time
	// order (stable: a series' own order is kept).
	if !slices.IsSortedFunc(d.batch, cmpTime) {
		slices.SortStableFunc(d.batch, cmpTime)
	}
}

// DecodedLen is how many bytes a remote-write body says it decodes to
// (its snappy block's length header), read without decoding it: what the
// server counts against its memory before it takes the body. An error
// when the header is not there or malformed.
func DecodedLen(body []byte) (int, error) {
	n, err := s2.DecodedLen(body)
	if err != nil {
		return 0, inputErrorf("remote-write body of %d bytes is not snappy-compressed: bad length header", len(body))
	}
	return n, nil
}

// decodeSnappy decodes a snappy block into dst, refusing one that says it
// decodes to more than maxLen bytes before it allocates. s2 also reads its
// own extension of the block format (a copy at offset 0 repeats the last
// offset), which no remote-write sender writes and golang/snappy refuses:
// such a body is read as s2 reads it.
func decodeSnappy(dst, src []byte, maxLen int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst[:0], errors.New("bad length header")
	}
	if n > maxLen {
		return dst[:0], fmt.Errorf("it decodes to %d bytes", n)
	}
	decoded, err := s2.Decode(dst, src)
	if err != nil {
		return dst[:0], errors.New("corrupt block")
	}
	return decoded, nil
}

// Err is why the body was refused (an *InputError), nil when it was read.
func (d *RemoteWrite) Err() error { return d.err }

// bodyPool holds decoded bodies for reuse: a request's body is needed
// while it is read, and only the arena's copies after that.
var bodyPool sync.Pool

// Release drops d's references to what was decoded (its strings are not
// to be read after it), keeping the buffers for the next decode.
func (d *RemoteWrite) Release() {
	clear(d.tags)
	clear(d.batch)
	d.tags, d.batch = d.tags[:0], d.batch[:0]
}

// Protobuf wire types (protobuf's encoding guide).
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireLen     = 2
	wireFixed32 = 5
)

// protoField reads one field's key and, for a length-delimited field, its
// bytes; for the others its scalar (a varint, or the fixed bits). It
// returns the rest of b.
func protoField(b []byte) (num uint64, wt byte, data []byte, scalar uint64, rest []byte, err error) {
	// Most of a remote-write body: a length-delimited field whose key and
	// length take a byte each (label names and values, samples).
	if len(b) >= 2 && b[0] < 0x80 && b[0] >= 1<<3 && b[0]&7 == wireLen && b[1] < 0x80 && int(b[1]) <= len(b)-2 {
		l := 2 + int(b[1])
		return uint64(b[0] >> 3), wireLen, b[2:l], 0, b[l:], nil
	}
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, 0, nil, errProto("field key")
	}
	b = b[n:]
	// Field number 0 is not valid protobuf: VictoriaMetrics' decoder (the
	// reference this one is fuzzed against) skips it like any field it
	// does not read, but a body of zero bytes then decodes to an empty
	// request and would be acknowledged.
	num, wt = key>>3, byte(key&7)
	if num == 0 {
		return 0, 0, nil, 0, nil, errProto("field number 0")
	}
	if num > math.MaxUint32 {
		return 0, 0, nil, 0, nil, errProto("field number")
	}
	switch wt {
	case wireVarint:
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, 0, nil, 0, nil, errProto("varint")
		}
		return num, wt, nil, v, b[n:], nil
	case wireFixed64:
		if len(b) < 8 {
			return 0, 0, nil, 0, nil, errProto("fixed64")
		}
		return num, wt, nil, binary.LittleEndian.Uint64(b), b[8:], nil
	case wireLen:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return 0, 0, nil, 0, nil, errProto("length")
		}
		return num, wt, b[n : n+int(l)], 0, b[n+int(l):], nil
	case wireFixed32:
		if len(b) < 4 {
			return 0, 0, nil, 0, nil, errProto("fixed32")
		}
		return num, wt, nil, uint64(binary.LittleEndian.Uint32(b)), b[4:], nil
	}
	return 0, 0, nil, 0, nil, errProto(fmt.Sprintf("wire type %d", wt))
}

func errProto(what string) error {
	return inputErrorf("remote-write body is not a protobuf WriteRequest: bad %s", what)
}

// str returns b as a string that aliases it: read it while b is, and
// copy it (keep) to hold it longer.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// scan reads a WriteRequest (timeseries = 1), keeping the wanted series;
// with d.cut, it moves their protobuf to the front of body, and says how
// long that is.
func (d *RemoteWrite) scan(body []byte, maxSeries int) (cutLen int, err error) {
	for b := body; len(b) > 0; {
		num, wt, data, _, rest, err := protoField(b)
		if err != nil {
			return 0, err
		}
		field := b[:len(b)-len(rest)]
		b = rest
		if num != 1 {
			continue // metadata and what later versions add
		}
		if wt != wireLen {
			return 0, errProto("timeseries wire type")
		}
		if d.series++; d.series > maxSeries {
			return 0, inputErrorf("remote-write request has more than %d series; the limit is %d: send smaller batches", maxSeries, maxSeries)
		}
		kept, err := d.series1(data)
		if err != nil {
			return 0, err
		}
		if kept && d.cut {
			// Moved back over what was read and not kept: nothing read
			// later is overwritten, and nothing kept aliases the body.
			cutLen += copy(body[cutLen:], field)
		}
	}
	return cutLen, nil
}

// series1 reads one TimeSeries (labels = 1, samples = 2): a first pass
// reads fields only until its __name__; a series of a metric ingest does
// not read is left there, unread beyond that (what is damaged in it is not
// looked at), and counted. A wanted series is read again for its labels
// and samples, all checked. It says whether the series was kept.
func (d *RemoteWrite) series1(b []byte) (bool, error) {
	var metric string
	for rest := b; len(rest) > 0; {
		num, wt, data, _, r, err := protoField(rest)
		if err != nil {
			return false, err
		}
		rest = r
		if num != 1 {
			continue
		}
		if wt != wireLen {
			return false, errProto("label wire type")
		}
		name, value, err := label(data)
		if err != nil {
			return false, err
		}
		if string(name) == "__name__" {
			metric = str(value)
			break
		}
	}
	if !wanted(metric) {
		d.skipped++
		return false, nil
	}
	metric = d.keep(metric)
	start, first := len(d.tags), len(d.batch)
	for rest := b; len(rest) > 0; {
		num, wt, data, _, r, err := protoField(rest)
		if err != nil {
			return false, err
		}
		rest = r
		switch num {
		case 1:
			if wt != wireLen {
				return false, errProto("label wire type")
			}
			name, value, err := label(data)
			if err != nil {
				return false, err
			}
			if string(name) != "__name__" {
				d.tags = append(d.tags, prometheus.Tag{Key: d.keep(str(name)), Value: d.keep(str(value))})
			}
		case 2:
			if wt != wireLen {
				return false, errProto("sample wire type")
			}
			value, ts, err := sample(data)
			if err != nil {
				return false, err
			}
			d.batch = append(d.batch, rwSample{metric: metric, value: value, ts: ts})
		}
	}
	// Samples come before or after the labels; each gets the whole set.
	for i := first; i < len(d.batch); i++ {
		d.batch[i].start, d.batch[i].end = start, len(d.tags)
	}
	return true, nil
}

// keep copies s into the arena. The arena grows by appending, so that a
// string taken from it stays valid until the next decode into d (a
// string taken before the arena moved keeps the old array).
func (d *RemoteWrite) keep(s string) string {
	n := len(d.arena)
	d.arena = append(d.arena, s...)
	return str(d.arena[n:])
}

// label reads a Label (name = 1, value = 2).
func label(b []byte) (name, value []byte, err error) {
	// Most labels are exactly a name then a value, each shorter than 128
	// bytes, as Prometheus and vmagent encode them: read that directly.
	if len(b) >= 4 && b[0] == 1<<3|wireLen && b[1] < 0x80 {
		n := 2 + int(b[1])
		if n+2 <= len(b) && b[n] == 2<<3|wireLen && b[n+1] < 0x80 && n+2+int(b[n+1]) == len(b) {
			return b[2:n], b[n+2:], nil
		}
	}
	for len(b) > 0 {
		num, wt, data, _, rest, err := protoField(b)
		if err != nil {
			return nil, nil, err
		}
		b = rest
		if num != 1 && num != 2 {
			continue
		}
		if wt != wireLen {
			return nil, nil, errProto("label field wire type")
		}
		if num == 1 {
			name = data
		} else {
			value = data
		}
	}
	return name, value, nil
}

// sample reads a Sample (value = 1, a double; timestamp = 2, an int64 in
// milliseconds).
func sample(b []byte) (value float64, ts int64, err error) {
	for len(b) > 0 {
		num, wt, _, scalar, rest, err := protoField(b)
		if err != nil {
			return 0, 0, err
		}
		b = rest
		switch {
		case num == 1 && wt == wireFixed64:
			value = math.Float64frombits(scalar)
		case num == 2 && wt == wireVarint:
			ts = int64(scalar)
		case num == 1 || num == 2:
			return 0, 0, errProto("sample field wire type")
		}
	}
	return value, ts, nil
}

// ParseRemoteWrite decodes one remote-write body and passes its samples to
// sink in time order (DecodeRemoteWrite, then ParseDecoded). A body that is
// not valid snappy or protobuf, or breaks limits, is an *InputError and
// nothing of it is used. Series of metrics ingest does not read are
// counted and skipped. body and the samples' strings are only valid
// during the call: the next one decodes into the same buffers.
func (p *Parser) ParseRemoteWrite(body []byte, limits Limits, sink Sink) error {
	DecodeRemoteWrite(body, limits, false, &p.rw)
	return p.ParseDecoded(&p.rw, sink)
}

// ParseDecoded passes a decoded body's samples to sink, in time order, and
// counts them; it returns the body's decoding error, if any, having used
// nothing of it. The samples' strings stay valid until d is decoded into
// again: a sink copies what it keeps.
func (p *Parser) ParseDecoded(d *RemoteWrite, sink Sink) error {
	if d.err != nil {
		p.stats.Invalid++
		return d.err
	}
	p.stats.Skipped += d.skipped
	for i := range d.batch {
		s := &d.batch[i]
		if math.IsNaN(s.value) && isStaleNaN(s.value) {
			// A staleness marker: the series ended. Attribution bridges no
			// gap longer than its staleness bound anyway.
			p.stats.StaleMarkers++
			continue
		}
		p.handleRow(s.metric, d.tags[s.start:s.end], s.value, s.ts, sink)
	}
	p.stats.Lines += uint64(len(d.batch))
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
	return isPodMetric(metric) || fieldOf(metric) != 0 || queueMetricOf(metric) != 0
}
