package ingest

import (
	"math"
	"strings"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	"github.com/gpuledger/gpuledger/attribution"
)

// A scrape repeats its series: the same labels, scrape after scrape, with
// new values. The exposition parser keeps each series' parsed name and
// labels under the line's text up to its closing brace, so that a line
// seen before costs a comparison of strings (or a map lookup) and its
// value's parse, not a parse of its labels (most of a dcgm-exporter
// line's bytes). A line the cache cannot
// vouch for goes to VictoriaMetrics' parser, as every line did before.

// seriesCacheBytes bounds one generation of a parser's series cache: past
// it the generation is set aside and a new one started, and a series the
// new one lacks is taken back from the old one on its next line. About
// 4,000 dcgm-exporter series a generation; a hostile or churning target
// costs a parser at most twice this, and the previous body's order.
const seriesCacheBytes = 4 << 20

// seriesEntryOverhead is what an entry costs beyond its strings: the
// entry, its map slot, the string and slice headers.
const seriesEntryOverhead = 128

// seriesEntry is a series' parsed name and labels under its line's text up
// to the closing brace, and where it was in the last body that had it.
type seriesEntry struct {
	key, metric string
	tags        []prometheus.Tag
	call        uint64 // the unmarshal call that last saw it
	pos         int    // its place in that call's order

	// What handleRow makes of the labels, worked out on the series' first
	// row: the metric's kind, whether a label is not UTF-8, and a DCGM
	// series' sample without its time and value.
	isPod   bool
	queue   attribution.QueueMetric
	field   attribution.Field
	badUTF8 bool
	sample  attribution.Sample
	pod     podSeriesLabels
	queueT  queueTemplate
}

// parsedLine is a body's row and, when it came through the cache, its
// series.
type parsedLine struct {
	prometheus.Row
	series *seriesEntry
}

// seriesCache finds a line's series by its key: first where the previous
// body had the series after the one just seen (a target writes its
// series in the same order every scrape, so this is one comparison of
// strings), then in the maps.
type seriesCache struct {
	curr, prev  map[string]*seriesEntry
	bytes       int
	call        uint64
	last, order []*seriesEntry // the previous and this call's series, in order
	cursor      int            // where in last the next line is expected
}

// begin starts a body.
func (c *seriesCache) begin() {
	c.call++
	c.last, c.order = c.order, c.last[:0]
	c.cursor = 0
}

func (c *seriesCache) get(key string) *seriesEntry {
	var e *seriesEntry
	if c.cursor < len(c.last) && c.last[c.cursor].key == key {
		e = c.last[c.cursor]
	} else if e = c.curr[key]; e == nil {
		if e = c.prev[key]; e != nil {
			c.add(e)
		}
	}
	if e != nil {
		c.seen(e)
	}
	return e
}

// seen puts e in this call's order, and expects next the series that
// followed it in the previous call's.
func (c *seriesCache) seen(e *seriesEntry) {
	if e.call == c.call-1 && e.pos < len(c.last) && c.last[e.pos] == e {
		c.cursor = e.pos + 1
	}
	e.call, e.pos = c.call, len(c.order)
	c.order = append(c.order, e)
}

func (c *seriesCache) add(e *seriesEntry) {
	size := len(e.key) + len(e.metric) + seriesEntryOverhead
	for _, t := range e.tags {
		size += len(t.Key) + len(t.Value) + 32
	}
	if c.curr == nil || c.bytes+size > seriesCacheBytes {
		c.prev, c.curr, c.bytes = c.curr, make(map[string]*seriesEntry), 0
	}
	c.curr[e.key] = e
	c.bytes += size
}

// unmarshal parses body's sample lines into p.lines, as
// prometheus.Rows.UnmarshalWithErrLogger does (the same rows, the same
// invalid lines logged); the rows' strings are the cache's or copies,
// never body's.
func (p *Parser) unmarshal(body string) {
	p.lines = p.lines[:0]
	p.allCached = true
	p.series.begin()
	for len(body) > 0 {
		raw := body
		if n := strings.IndexByte(body, '\n'); n >= 0 {
			raw, body = body[:n], body[n+1:]
		} else {
			body = ""
		}
		// VictoriaMetrics' parser, given raw, reads line (one '\r' and
		// the leading blanks cut) as well.
		line := raw
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		for len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			line = line[1:]
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		// The line's series is its text up to its last '}'. Only keys
		// without a '#' (which starts a trailing comment, an exemplar) and
		// with a '{' before that '}' (a '}' can sit in a label value, and a
		// line without labels has none) are ever cached, so a key found
		// needs neither check; what follows it parseSampleTail reads, or
		// refuses.
		end := strings.LastIndexByte(line, '}')
		var s *seriesEntry
		if end >= 0 {
			s = p.series.get(line[:end+1])
		}
		if s == nil {
			if open := strings.IndexByte(line, '{'); open < 0 || open > end || strings.IndexByte(line, '#') >= 0 {
				p.parseLine(raw, "", "")
			} else {
				p.parseLine(raw, line[:end+1], line[end+1:])
			}
			continue
		}
		v, ts, ok := parseSampleTail(line[end+1:])
		if !ok {
			// A value only the full parse reads (Inf, an exponent): the
			// labels are the cache's, the same text's.
			p.rows.UnmarshalWithErrLogger(raw, p.logLineError)
			if len(p.rows.Rows) != 1 {
				continue
			}
			v, ts = p.rows.Rows[0].Value, p.rows.Rows[0].Timestamp
		}
		p.lines = append(p.lines, parsedLine{prometheus.Row{Metric: s.metric, Tags: s.tags, Value: v, Timestamp: ts}, s})
	}
}

// parseLine parses one line with VictoriaMetrics' parser and appends its
// row. key, when not empty, is the line up to its labels' closing brace
// and tail what follows: the row is cached under key when its value and
// timestamp are what parseSampleTail reads from tail.
func (p *Parser) parseLine(line, key, tail string) {
	p.rows.UnmarshalWithErrLogger(line, p.logLineError)
	if len(p.rows.Rows) != 1 {
		return
	}
	r := p.rows.Rows[0]
	// The row aliases line (the caller's body) and p.rows' tag pool, which
	// the next line overwrites: the tags are copied.
	tags := make([]prometheus.Tag, len(r.Tags))
	for i, t := range r.Tags {
		tags[i] = prometheus.Tag{Key: strings.Clone(t.Key), Value: strings.Clone(t.Value)}
	}
	s := &seriesEntry{metric: strings.Clone(r.Metric), tags: tags}
	cached := false
	if key != "" {
		v, ts, ok := parseSampleTail(tail)
		if ok && ts == r.Timestamp && math.Float64bits(v) == math.Float64bits(r.Value) {
			s.key = strings.Clone(key)
			s.isPod, s.queue, s.field = isPodMetric(s.metric), queueMetricOf(s.metric), fieldOf(s.metric)
			s.badUTF8 = badValue(attribution.FieldUnknown, s.tags, 0, true) == badUTF8
			switch {
			case s.isPod:
				s.pod = podSeriesLabelsOf(s.tags)
			case s.queue.IsEndpoint():
				s.queueT = p.endpointTemplate(s.queue, s.tags)
			case s.queue != attribution.QueueMetricUnknown:
				s.queueT = queueTemplateOf(s.queue, s.tags)
			case s.field != attribution.FieldUnknown:
				s.sample = dcgmSample(s.field, s.tags)
			}
			p.series.add(s)
			p.series.seen(s)
			cached = true
		}
	}
	row := prometheus.Row{Metric: s.metric, Tags: s.tags, Value: r.Value, Timestamp: r.Timestamp}
	if cached {
		p.lines = append(p.lines, parsedLine{row, s})
		return
	}
	p.allCached = false
	p.lines = append(p.lines, parsedLine{Row: row})
}

// handleSeriesRow is handleRow for a row of a cached series: what its
// labels say was worked out when it was cached.
func (p *Parser) handleSeriesRow(e *seriesEntry, value float64, ts int64, sink Sink) {
	if !e.isPod && e.queue == attribution.QueueMetricUnknown && e.field == attribution.FieldUnknown {
		p.stats.Skipped++
		return
	}
	if r := badValue(e.field, nil, value, false); r >= 0 {
		p.stats.BadValues[r]++
		return
	}
	if e.badUTF8 {
		p.stats.BadValues[badUTF8]++
		return
	}
	switch {
	case e.isPod:
		p.emitPod(e.metric, e.pod, value, ts, sink)
		return
	case e.queue != attribution.QueueMetricUnknown:
		p.emitQueue(&e.queueT, value, ts, sink)
		return
	}
	p.emitDCGM(e.sample, value, ts, sink)
}

// parseSampleTail reads what follows a series' closing brace: a value and
// an optional timestamp, as VictoriaMetrics' parser reads them (a
// timestamp within ±2^31 is in seconds, OpenMetrics', and made
// milliseconds). It only takes a plain decimal value, [-]digits[.digits]
// of at most 15 digits, which it reads as fastfloat (VictoriaMetrics') and
// strconv do: the mantissa, below 2^53, divided by an exact power of ten,
// the nearest float64. Anything else (Inf, NaN, an exponent, a comment)
// is left to the full parse.
func parseSampleTail(s string) (v float64, ts int64, ok bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	minus := i < len(s) && s[i] == '-'
	if minus {
		i++
	}
	var d uint64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = d*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
			continue
		case c == '.' && !dot:
			dot = true
			continue
		}
		break
	}
	if digits == 0 || digits > 15 {
		return 0, 0, false
	}
	v = float64(d)
	if frac > 0 {
		v /= pow10[frac]
	}
	if minus {
		v = -v
	}
	if i < len(s) && s[i] != ' ' && s[i] != '\t' {
		return 0, 0, false
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return v, 0, true
	}
	neg := s[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 16 {
		ts = ts*10 + int64(s[i]-'0')
		i++
	}
	if i == start {
		return 0, 0, false
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i != len(s) || ts > 1<<53 {
		return 0, 0, false
	}
	if neg {
		ts = -ts
	}
	if ts >= -1<<31 && ts < 1<<31 {
		ts *= 1000
	}
	return v, ts, true
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}
