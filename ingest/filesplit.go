package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
)

// Preparer is a Source that reads better after one pass over all it
// holds: Backfill calls Prepare once with the whole range it will Fetch
// (the window before the start and the one past the end included), and
// Close when it is done.
type Preparer interface {
	Prepare(ctx context.Context, from, to time.Time, progress func(read, total int64)) error
	Close() error
}

// maxSplitFiles bounds the files a split writes at once: a range longer
// than this many hours gets buckets of several hours.
const maxSplitFiles = 1000

// split is a file's samples of [from, from + n×bucket) cut into one file of
// export JSON lines per bucket, in dir.
type split struct {
	dir    string
	from   time.Time
	bucket time.Duration
	n      int
}

func (s *split) path(i int) string { return filepath.Join(s.dir, strconv.Itoa(i)+".jsonl") }

// Prepare reads the file once and writes its samples of [from, to) into
// a file per bucket of an hour (or more, past maxSplitFiles hours) under
// the system's temporary directory, so that each Fetch reads only the
// buckets it covers: memory is one line (export JSON) or one block of
// lines (exposition) while splitting, and one bucket's samples while
// fetching, whatever the file's size. An exposition file with a line
// without a timestamp (a single scrape, taken at the range's start) is
// read whole, as before.
func (f *FileSource) Prepare(ctx context.Context, from, to time.Time, progress func(read, total int64)) error {
	if err := f.Close(); err != nil {
		return err
	}
	in, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Path, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Path, err)
	}
	hours := int(to.Sub(from).Truncate(time.Hour)/time.Hour) + 1
	per := (hours + maxSplitFiles - 1) / maxSplitFiles
	s := &split{from: from.Truncate(time.Hour), bucket: time.Duration(per) * time.Hour}
	s.n = int(to.Sub(s.from)/s.bucket) + 1
	if s.dir, err = os.MkdirTemp(f.SpillDir, "gpuledger-backfill-"); err != nil {
		return fmt.Errorf("split %s: %w; set TMPDIR to a directory with room for a copy of the range's samples", f.Path, err)
	}
	w := &bucketWriters{s: s, files: make([]*os.File, s.n), bufs: make([]*bufio.Writer, s.n)}
	counted := &countingReader{r: in}
	next := time.Now()
	tick := func() {
		if progress != nil && time.Now().After(next) {
			progress(counted.n, st.Size())
			next = time.Now().Add(2 * time.Second)
		}
	}
	jsonl := strings.HasSuffix(f.Path, ".jsonl") || strings.HasSuffix(f.Path, ".json")
	if jsonl {
		err = splitExport(ctx, bufio.NewReaderSize(counted, 1<<20), w, from.UnixMilli(), to.UnixMilli(), tick)
	} else {
		err = splitExposition(ctx, counted, w, from.UnixMilli(), to.UnixMilli(), tick)
	}
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errUntimed) {
		os.RemoveAll(s.dir)
		return nil
	}
	if err != nil {
		os.RemoveAll(s.dir)
		return fmt.Errorf("split %s: %w", f.Path, err)
	}
	if progress != nil {
		progress(st.Size(), st.Size())
	}
	f.split = s
	return nil
}

// Close removes what Prepare wrote.
func (f *FileSource) Close() error {
	if f.split == nil {
		return nil
	}
	err := os.RemoveAll(f.split.dir)
	f.split = nil
	return err
}

// fetchSplit reads the buckets [from, to) covers, in order, keeping the
// range's samples.
func (f *FileSource) fetchSplit(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error {
	s := f.split
	rs := rangeSink{sink, from.UnixMilli(), to.UnixMilli()}
	first := max(int(from.Sub(s.from)/s.bucket), 0)
	last := min(int((to.Sub(s.from)-1)/s.bucket), s.n-1)
	var errs []error
	for i := first; i <= last; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		body, err := os.ReadFile(s.path(i))
		if errors.Is(err, os.ErrNotExist) {
			continue // no sample in it
		}
		if err != nil {
			return fmt.Errorf("read %s's split: %w", f.Path, err)
		}
		if err := p.ParseExportLines(body, rs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// covers says whether the split holds [from, to).
func (s *split) covers(from, to time.Time) bool {
	return !from.Before(s.from) && !to.After(s.from.Add(time.Duration(s.n)*s.bucket))
}

// errUntimed: an exposition line without a timestamp; the file is read
// whole at each Fetch instead.
var errUntimed = errors.New("a line without a timestamp")

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// bucketWriters appends export JSON lines to the buckets' files, opened
// when first written.
type bucketWriters struct {
	s     *split
	files []*os.File
	bufs  []*bufio.Writer
}

func (w *bucketWriters) get(i int) (*bufio.Writer, error) {
	if w.bufs[i] == nil {
		f, err := os.OpenFile(w.s.path(i), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, err
		}
		w.files[i], w.bufs[i] = f, bufio.NewWriterSize(f, 32<<10)
	}
	return w.bufs[i], nil
}

func (w *bucketWriters) close() error {
	var errs []error
	for i, b := range w.bufs {
		if b == nil {
			continue
		}
		errs = append(errs, b.Flush(), w.files[i].Close())
	}
	return errors.Join(errs...)
}

// bucketOf is the bucket of a sample at ms, or -1 outside [fromMs, toMs).
func (w *bucketWriters) bucketOf(ms, fromMs, toMs int64) int {
	if ms < fromMs || ms >= toMs {
		return -1
	}
	return int((ms - w.s.from.UnixMilli()) / w.s.bucket.Milliseconds())
}

// line writes one series' samples (values as JSON) to bucket i.
func (w *bucketWriters) line(i int, metric []byte, values []json.RawMessage, ts []int64) error {
	b, err := w.get(i)
	if err != nil {
		return err
	}
	b.WriteString(`{"metric":`)
	b.Write(metric)
	b.WriteString(`,"values":[`)
	for k, v := range values {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
	b.WriteString(`],"timestamps":[`)
	var num [20]byte
	for k, t := range ts {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(num[:0], t, 10))
	}
	_, err = b.WriteString("]}\n")
	return err
}

// splitExport cuts each export line's samples by bucket. A line that is
// not an export line goes whole to the first bucket, where the parser
// counts and reports it; a metric gpuledger does not read is dropped.
func splitExport(ctx context.Context, r *bufio.Reader, w *bucketWriters, fromMs, toMs int64, tick func()) error {
	var l struct {
		Metric     json.RawMessage   `json:"metric"`
		Values     []json.RawMessage `json:"values"`
		Timestamps []int64           `json:"timestamps"`
	}
	var scan rawExport
	var name struct {
		Name string `json:"__name__"`
	}
	decode := func(line []byte) bool {
		if scanExport(bytes.TrimSpace(line), &scan) {
			l.Metric, l.Values, l.Timestamps = scan.metric, scan.values, scan.ts
			return true
		}
		l.Metric, l.Values, l.Timestamps = nil, l.Values[:0], l.Timestamps[:0]
		return json.Unmarshal(line, &l) == nil
	}
	for n := 0; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			name.Name = ""
			if !decode(line) || json.Unmarshal(l.Metric, &name) != nil || len(l.Values) != len(l.Timestamps) {
				b, werr := w.get(0)
				if werr != nil {
					return werr
				}
				b.Write(bytes.TrimSpace(line))
				b.WriteByte('\n')
			} else if wanted(name.Name) {
				if err := splitSeries(w, l.Metric, l.Values, l.Timestamps, fromMs, toMs); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			tick()
		}
	}
}

// splitSeries writes a series' samples to their buckets: consecutive
// samples of one bucket as one line.
func splitSeries(w *bucketWriters, metric []byte, values []json.RawMessage, ts []int64, fromMs, toMs int64) error {
	for i := 0; i < len(ts); {
		b := w.bucketOf(ts[i], fromMs, toMs)
		j := i + 1
		for j < len(ts) && w.bucketOf(ts[j], fromMs, toMs) == b {
			j++
		}
		if b >= 0 {
			if err := w.line(b, metric, values[i:j], ts[i:j]); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// splitExposition reads blocks of whole lines of text exposition and
// writes each timestamped sample as export JSON to its bucket;
// errUntimed at the first sample without a timestamp.
func splitExposition(ctx context.Context, r io.Reader, w *bucketWriters, fromMs, toMs int64, tick func()) error {
	const block = 4 << 20
	buf := make([]byte, 0, block)
	var rows prometheus.Rows
	var metric bytes.Buffer
	val := make([]json.RawMessage, 1)
	ts := make([]int64, 1)
	var num []byte
	var bad string
	flush := func(data []byte) error {
		rows.UnmarshalWithErrLogger(string(data), func(s string) {
			if bad == "" {
				bad = s
			}
		})
		if bad != "" {
			return fmt.Errorf("invalid exposition line: %s", bad)
		}
		for i := range rows.Rows {
			row := &rows.Rows[i]
			if row.Timestamp == 0 {
				return errUntimed
			}
			if !wanted(row.Metric) {
				continue
			}
			b := w.bucketOf(row.Timestamp, fromMs, toMs)
			if b < 0 {
				continue
			}
			metric.Reset()
			metric.WriteString(`{"__name__":`)
			writeJSONString(&metric, row.Metric)
			for _, t := range row.Tags {
				metric.WriteByte(',')
				writeJSONString(&metric, t.Key)
				metric.WriteByte(':')
				writeJSONString(&metric, t.Value)
			}
			metric.WriteByte('}')
			num = appendExportValue(num[:0], row.Value)
			val[0], ts[0] = num, row.Timestamp
			if err := w.line(b, metric.Bytes(), val, ts); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		end := len(buf)
		if err == nil {
			// Cut at the block's last newline; the rest starts the next.
			end = bytes.LastIndexByte(buf, '\n') + 1
			if end == 0 {
				return fmt.Errorf("a line longer than %d MiB", block>>20)
			}
		}
		if ferr := flush(buf[:end]); ferr != nil {
			return ferr
		}
		tick()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
		rest := copy(buf, buf[end:])
		buf = buf[:rest]
	}
}

// appendExportValue writes v as VictoriaMetrics' export does: a number, or
// "NaN", "Inf", "-Inf".
func appendExportValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}
