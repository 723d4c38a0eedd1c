package ingest

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/klauspost/compress/s2"
)

// Remote-Write 2.0 (Prometheus 3's io.prometheus.write.v2.Request): series
// whose labels are references into one table of strings, float samples,
// native histograms, exemplars and metadata. gpuledger reads it by
// converting the series it reads to a remote-write 1.0 body, which the
// write-ahead log and the pipeline take as they take any other: one path
// for durability and replay whatever the sender spoke.

// RemoteWrite2Proto is the proto parameter of Remote-Write 2.0's
// Content-Type: application/x-protobuf;proto=io.prometheus.write.v2.Request.
const RemoteWrite2Proto = "io.prometheus.write.v2.Request"

// Write2Stats is what a Remote-Write 2.0 request held, for the counts its
// answer reports (X-Prometheus-Remote-Write-*-Written): all of it is
// taken, gpuledger reads the float samples of the series it reads (native
// histograms and exemplars are taken and not read).
type Write2Stats struct {
	Series, Samples, Histograms, Exemplars int
}

// ConvertRemoteWrite2 reads a Remote-Write 2.0 body (snappy-compressed
// io.prometheus.write.v2.Request) and returns a remote-write 1.0 body
// (snappy-compressed prometheus.WriteRequest) of the series ingest reads
// with their float samples. A body that is not such a request is an
// *InputError naming what is wrong.
func ConvertRemoteWrite2(body []byte, limits Limits) ([]byte, Write2Stats, error) {
	limits = limits.withDefaults()
	var st Write2Stats
	decoded, err := decodeSnappy(nil, body, limits.MaxDecodedBytes)
	if err != nil {
		return nil, st, inputErrorf("remote-write 2.0 body of %d bytes is not snappy-compressed within %d bytes: %v", len(body), limits.MaxDecodedBytes, err)
	}
	// The symbols may come after the series that refer to them: read the
	// table first.
	var symbols [][]byte
	var series [][]byte
	for b := decoded; len(b) > 0; {
		num, wt, data, _, rest, err := protoField(b)
		if err != nil {
			return nil, st, rw2Error(err)
		}
		b = rest
		switch {
		case num == 4 && wt == wireLen:
			symbols = append(symbols, data)
		case num == 5 && wt == wireLen:
			if len(series) == limits.MaxSeries {
				return nil, st, inputErrorf("remote-write 2.0 request holds more than %d series; send smaller requests", limits.MaxSeries)
			}
			series = append(series, data)
		case num <= 3:
			// 1-3 are reserved in v2 and are a 1.0 WriteRequest's fields.
			return nil, st, inputErrorf("remote-write 2.0 body has field %d, which a 1.0 WriteRequest has: send it with Content-Type application/x-protobuf (proto=prometheus.WriteRequest)", num)
		}
	}
	if len(symbols) > 0 && len(symbols[0]) != 0 {
		return nil, st, inputErrorf("remote-write 2.0 symbols table starts with %.40q; it must start with the empty string", symbols[0])
	}
	var out []byte
	var labels []uint32
	var ts []byte
	for i, s := range series {
		st.Series++
		labels, ts = labels[:0], ts[:0]
		name := ""
		var samples [][]byte
		for b := s; len(b) > 0; {
			num, wt, data, scalar, rest, err := protoField(b)
			if err != nil {
				return nil, st, rw2Error(err)
			}
			b = rest
			switch {
			case num == 1 && wt == wireLen: // labels_refs, packed
				for p := data; len(p) > 0; {
					v, n := binary.Uvarint(p)
					if n <= 0 || v > math.MaxUint32 {
						return nil, st, inputErrorf("remote-write 2.0 series %d: labels_refs is not a packed list of uint32", i)
					}
					labels = append(labels, uint32(v))
					p = p[n:]
				}
			case num == 1 && wt == wireVarint: // labels_refs, one by one
				if scalar > math.MaxUint32 {
					return nil, st, inputErrorf("remote-write 2.0 series %d: labels_refs %d is not a uint32", i, scalar)
				}
				labels = append(labels, uint32(scalar))
			case num == 2 && wt == wireLen:
				samples = append(samples, data)
			case num == 3 && wt == wireLen:
				st.Histograms++
			case num == 4 && wt == wireLen:
				st.Exemplars++
			}
		}
		st.Samples += len(samples)
		if len(labels)%2 != 0 {
			return nil, st, inputErrorf("remote-write 2.0 series %d: labels_refs has %d entries; want name-value pairs (an even number)", i, len(labels))
		}
		for j := 0; j < len(labels); j += 2 {
			for _, r := range labels[j : j+2] {
				if int(r) >= len(symbols) {
					return nil, st, inputErrorf("remote-write 2.0 series %d: labels_refs %d is past the symbols table (%d strings)", i, r, len(symbols))
				}
			}
			if str(symbols[labels[j]]) == "__name__" {
				name = str(symbols[labels[j+1]])
			}
		}
		if name == "" {
			return nil, st, inputErrorf("remote-write 2.0 series %d has no __name__ label", i)
		}
		if !wanted(name) || len(samples) == 0 {
			continue
		}
		// A 1.0 TimeSeries: labels (1) then samples (2), as they came.
		for j := 0; j < len(labels); j += 2 {
			n, v := symbols[labels[j]], symbols[labels[j+1]]
			ts = protowire(ts, 1, protowire(protowire(nil, 1, n), 2, v))
		}
		for _, smp := range samples {
			var value, at uint64
			for b := smp; len(b) > 0; {
				num, wt, _, scalar, rest, err := protoField(b)
				if err != nil {
					return nil, st, rw2Error(err)
				}
				b = rest
				switch {
				case num == 1 && wt == wireFixed64:
					value = scalar
				case num == 2 && wt == wireVarint:
					at = scalar
				}
			}
			var m []byte
			m = binary.AppendUvarint(m, 1<<3|wireFixed64)
			m = binary.LittleEndian.AppendUint64(m, value)
			m = binary.AppendUvarint(m, 2<<3|wireVarint)
			m = binary.AppendUvarint(m, at)
			ts = protowire(ts, 2, m)
		}
		out = protowire(out, 1, ts)
	}
	return s2.EncodeSnappy(nil, out), st, nil
}

// rw2Error says a protobuf error is of a 2.0 request.
func rw2Error(err error) error {
	return inputErrorf("remote-write 2.0 body is not a protobuf io.prometheus.write.v2.Request (%s)",
		strings.TrimPrefix(err.Error(), "remote-write body is not a protobuf WriteRequest: "))
}

// protowire appends field num, length-delimited, holding data.
func protowire(dst []byte, num uint64, data []byte) []byte {
	dst = binary.AppendUvarint(dst, num<<3|wireLen)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}
