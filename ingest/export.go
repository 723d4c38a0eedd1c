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
	slices.SortStableFunc(p.rw.batch, cmpTime)
	for i := range p.rw.batch {
		s := &p.rw.batch[i]
		p.handleRow(s.metric, p.rw.tags[s.start:s.end], s.value, s.ts, sink)
	}
	p.stats.Lines += uint64(len(p.rw.batch))
	if n := p.stats.Invalid - invalid; n > 0 {
		return fmt.Errorf("%d invalid export line(s) skipped, first: %s", n, p.errs[0])
	}
	return nil
}

func (p *Parser) exportLine(line []byte) error {
	var l exportLine
	if err := json.Unmarshal(line, &l); err != nil {
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
	for i, ts := range l.Timestamps {
		p.rw.batch = append(p.rw.batch, rwSample{metric: metric, start: start, end: end, value: values[i], ts: ts})
	}
	return nil
}

// exportValue reads a number, or the strings VictoriaMetrics writes for
// special values ("NaN", "Inf", "-Inf").
func exportValue(raw json.RawMessage) (float64, error) {
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
