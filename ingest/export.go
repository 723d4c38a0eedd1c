package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// exportLine is one line of VictoriaMetrics' /api/v1/export output (the
// /api/v1/import JSON line format): one series with its samples.
type exportLine struct {
	Metric     map[string]string `json:"metric"`
	Values     []json.RawMessage `json:"values"`
	Timestamps []int64           `json:"timestamps"`
}

// ParseExportLines parses VictoriaMetrics export JSON lines and passes the
// samples to sink in time order. A bad line is skipped and counted; the
// returned error describes the first few, after every good line was
// delivered.
func (p *Parser) ParseExportLines(body []byte, sink Sink) error {
	p.errs = p.errs[:0]
	invalid := p.stats.Invalid
	p.rw.tags = p.rw.tags[:0]
	p.rw.batch = p.rw.batch[:0]
	p.exportRuns = p.exportRuns[:0]
	lineNo := 0
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte{'\n'})
		lineNo++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := p.exportLine(line); err != nil {
			p.logLineError(fmt.Sprintf("line %d: %v", lineNo, err))
		}
	}
	// Each line's samples are in time order (sorted where they were
	// not): merging the lines gives the order a stable sort of them all
	// would, in O(n log lines). The labels came through encoding/json,
	// which makes every string valid UTF-8.
	p.exportMerged = mergeRuns(p.exportMerged[:0], p.rw.batch, p.exportRuns)
	p.validUTF8 = true
	for i := range p.exportMerged {
		s := &p.exportMerged[i]
		p.handleRow(s.metric, p.rw.tags[s.start:s.end], s.value, s.ts, sink)
	}
	p.validUTF8 = false
	p.stats.Lines += uint64(len(p.exportMerged))
	if n := p.stats.Invalid - invalid; n > 0 {
		return fmt.Errorf("%d invalid export line(s) skipped, first: %s", n, p.errs[0])
	}
	return nil
}

func (p *Parser) exportLine(line []byte) error {
	var l exportLine
	if scanExport(line, &p.scan) {
		if err := json.Unmarshal(p.scan.metric, &l.Metric); err != nil {
			return fmt.Errorf("not a JSON object with metric, values and timestamps: %v", err)
		}
		l.Values, l.Timestamps = p.scan.values, p.scan.ts
	} else if err := json.Unmarshal(line, &l); err != nil {
		return fmt.Errorf("not a JSON object with metric, values and timestamps: %v", err)
	}
	metric := l.Metric["__name__"]
	if metric == "" {
		return fmt.Errorf(`metric has no "__name__"`)
	}
	if len(l.Values) != len(l.Timestamps) {
		return fmt.Errorf("%d values but %d timestamps; want as many of each", len(l.Values), len(l.Timestamps))
	}
	if !wanted(metric) {
		p.stats.Skipped++
		return nil
	}
	values := make([]float64, len(l.Values))
	for i, raw := range l.Values {
		v, err := exportValue(raw)
		if err != nil {
			return fmt.Errorf("value %d: %v", i, err)
		}
		values[i] = v
	}
	start := len(p.rw.tags)
	for k, v := range l.Metric {
		if k != "__name__" {
			p.rw.tags = append(p.rw.tags, prometheus.Tag{Key: k, Value: v})
		}
	}
	end := len(p.rw.tags)
	run := len(p.rw.batch)
	for i, ts := range l.Timestamps {
		p.rw.batch = append(p.rw.batch, rwSample{metric: metric, start: start, end: end, value: values[i], ts: ts})
	}
	if !slices.IsSortedFunc(p.rw.batch[run:], cmpTime) {
		slices.SortStableFunc(p.rw.batch[run:], cmpTime)
	}
	if len(p.rw.batch) > run {
		p.exportRuns = append(p.exportRuns, run)
	}
	return nil
}

// mergeRuns appends to dst the samples of src, whose runs (src[runs[i]:
// runs[i+1]], the last to the end) are each in time order, in the order a
// stable sort of src by time gives: by time, then by run, then by place
// in the run. A binary heap of the runs' heads does it in O(n log runs).
func mergeRuns(dst, src []rwSample, runs []int) []rwSample {
	type head struct {
		ts            int64
		pos, end, run int
	}
	h := make([]head, 0, len(runs))
	for i, start := range runs {
		end := len(src)
		if i+1 < len(runs) {
			end = runs[i+1]
		}
		if start < end {
			h = append(h, head{src[start].ts, start, end, i})
		}
	}
	less := func(a, b *head) bool { return a.ts < b.ts || (a.ts == b.ts && a.run < b.run) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(&h[r], &h[l]) {
				l = r
			}
			if !less(&h[l], &h[i]) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		top := &h[0]
		dst = append(dst, src[top.pos])
		if top.pos++; top.pos == top.end {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		} else {
			top.ts = src[top.pos].ts
		}
		down(0)
	}
	return dst
}

// exportValue reads a number, or the strings VictoriaMetrics writes for
// special values ("NaN", "Inf", "-Inf").
func exportValue(raw json.RawMessage) (float64, error) {
	if len(raw) > 0 && raw[0] != '"' && jsonNumber(raw) {
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not a number", raw)
		}
		return f, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Inf", "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

// rawExport is an export line as scanExport reads it: the metric object's
// JSON, the values' JSON tokens and the timestamps.
type rawExport struct {
	metric []byte
	values []json.RawMessage
	ts     []int64
}

// jsonInt reads a JSON number that is an integer written without a
// fraction or exponent (-?(0|[1-9][0-9]*)) and fits in an int64.
func jsonInt(tok []byte) (int64, bool) {
	d := bytes.TrimPrefix(tok, []byte{'-'})
	neg := len(d) < len(tok)
	if len(d) == 0 || len(d) > 19 || (d[0] == '0' && len(d) > 1) {
		return 0, false
	}
	var n uint64 // 19 digits stay below 2^64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true // -(1<<63) wraps to math.MinInt64
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	}
	return 0, false
}

// scanExport reads a line in the shape VictoriaMetrics writes,
// {"metric":{...},"values":[...],"timestamps":[...]} with no space between
// tokens, without reflection: what encoding/json would read of it, an
// order of magnitude sooner. It returns false for any other shape, which
// the caller then decodes with encoding/json. The values alias line.
func scanExport(line []byte, l *rawExport) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"metric":{`))
	if !ok {
		return false
	}
	end := objectEnd(rest)
	if end < 0 {
		return false
	}
	l.metric = line[len(`{"metric":`) : len(`{"metric":{`)+end]
	if rest, ok = bytes.CutPrefix(rest[end:], []byte(`,"values":[`)); !ok {
		return false
	}
	l.values, l.ts = l.values[:0], l.ts[:0]
	for len(rest) > 0 && rest[0] != ']' {
		n := 0
		if rest[0] == '"' {
			q := bytes.IndexByte(rest[1:], '"')
			if q < 0 || bytes.IndexByte(rest[1:q+1], '\\') >= 0 {
				return false
			}
			n = q + 2
		} else {
			for n < len(rest) && rest[n] != ',' && rest[n] != ']' {
				n++
			}
			if !jsonNumber(rest[:n]) {
				return false
			}
		}
		l.values = append(l.values, rest[:n])
		if rest = rest[n:]; len(rest) > 0 && rest[0] == ',' && len(rest) > 1 && rest[1] != ']' {
			rest = rest[1:]
		} else if len(rest) == 0 || rest[0] != ']' {
			return false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`],"timestamps":[`)); !ok {
		return false
	}
	for len(rest) > 0 && rest[0] != ']' {
		n := 0
		for n < len(rest) && rest[n] != ',' && rest[n] != ']' {
			n++
		}
		t, ok := jsonInt(rest[:n])
		if !ok {
			return false
		}
		l.ts = append(l.ts, t)
		if rest = rest[n:]; len(rest) > 0 && rest[0] == ',' && len(rest) > 1 && rest[1] != ']' {
			rest = rest[1:]
		} else if len(rest) == 0 || rest[0] != ']' {
			return false
		}
	}
	return string(rest) == "]}"
}

// objectEnd is the index just past the '}' that closes an object whose
// '{' came just before b, skipping strings; -1 when it does not close.
func objectEnd(b []byte) int {
	depth := 1
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return -1
			}
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// jsonNumber says whether b is a JSON number:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
