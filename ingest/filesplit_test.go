package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"

	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// unprepared hides a FileSource's Prepare: every Fetch reads the whole
// file, as before the split.
type unprepared struct{ Source }

// TestSplitFileMatchesWholeFile: three hours of the example cluster's
// telemetry as a file of timestamped exposition and as export JSON lines
// (series by series, the order VictoriaMetrics exports) backfill the same
// ledger read once and split by hour as read whole at every chunk; the
// split is gone afterwards. A file whose lines have no timestamp (one
// scrape) is read whole.
func TestSplitFileMatchesWholeFile(t *testing.T) {
	m, scrapes := simScrapes(t, 3)
	end := simStart.Add(3 * time.Hour)
	prom := writeScrapesFile(t, scrapes)
	jsonl := writeExportFile(t, scrapes)
	spill := t.TempDir()
	for _, path := range []string{prom, jsonl} {
		whole := openStore(t)
		if _, err := Backfill(context.Background(), BackfillOptions{Source: unprepared{&FileSource{Path: path}}, Store: whole, Model: m,
			Start: simStart, End: end}); err != nil {
			t.Fatal(err)
		}
		split := openStore(t)
		var calls int
		src := &FileSource{Path: path, SpillDir: spill}
		if _, err := Backfill(context.Background(), BackfillOptions{Source: src, Store: split, Model: m, Start: simStart, End: end,
			SplitProgress: func(read, total int64) { calls++ }}); err != nil {
			t.Fatal(err)
		}
		rowsA, wlA := ledgertest.Dump(t, whole, simStart, end)
		rowsB, wlB := ledgertest.Dump(t, split, simStart, end)
		if len(rowsA) == 0 || calls == 0 {
			t.Fatalf("%s: %d rows, %d progress calls", path, len(rowsA), calls)
		}
		if diff := cmp.Diff(rowsA, rowsB, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("%s: split ledger differs (-whole +split):\n%s", filepath.Base(path), diff)
		}
		if diff := cmp.Diff(wlA, wlB, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("%s: split workloads differ:\n%s", filepath.Base(path), diff)
		}
		epA, _ := whole.EndpointHours(context.Background(), "", simStart, end)
		epB, _ := split.EndpointHours(context.Background(), "", simStart, end)
		if diff := cmp.Diff(epA, epB, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("%s: split endpoint rows differ:\n%s", filepath.Base(path), diff)
		}
		if left, _ := os.ReadDir(spill); len(left) != 0 {
			t.Errorf("%s: the split is left in %s: %v", filepath.Base(path), spill, left)
		}
	}
	// One scrape without timestamps: taken at the range's start.
	one := filepath.Join(t.TempDir(), "one.prom")
	if err := os.WriteFile(one, scrapes[0].body, 0o644); err != nil {
		t.Fatal(err)
	}
	src := &FileSource{Path: one, SpillDir: spill}
	if err := src.Prepare(context.Background(), simStart, end, nil); err != nil || src.split != nil {
		t.Fatalf("untimed file: %v, split %+v; want it read whole", err, src.split)
	}
	var r recorder
	if err := src.Fetch(context.Background(), simStart, simStart.Add(time.Hour), &Parser{}, &r); err != nil || len(r.samples) == 0 {
		t.Errorf("untimed file: %v, %d samples", err, len(r.samples))
	}
	// A bad exposition line stops the split with the line's error.
	bad := filepath.Join(t.TempDir(), "bad.prom")
	if err := os.WriteFile(bad, []byte("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 1 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (&FileSource{Path: bad, SpillDir: spill}).Prepare(context.Background(), simStart, end, nil); err == nil || !strings.Contains(err.Error(), "invalid exposition line") {
		t.Errorf("a bad line: %v; want it named", err)
	}
}

// writeExportFile writes scrapes as VictoriaMetrics export JSON lines: a
// line per series with all its samples, series in order of first sight.
func writeExportFile(t testing.TB, scrapes []simScrape) string {
	t.Helper()
	type series struct {
		metric map[string]string
		values []float64
		ts     []int64
	}
	by := map[string]*series{}
	var order []string
	var rows prometheus.Rows
	for _, sc := range scrapes {
		rows.UnmarshalWithErrLogger(string(sc.body), func(s string) { t.Fatal(s) })
		for _, r := range rows.Rows {
			m := map[string]string{"__name__": r.Metric}
			for _, tag := range r.Tags {
				m[tag.Key] = tag.Value
			}
			k := fmt.Sprint(m)
			s := by[k]
			if s == nil {
				s = &series{metric: m}
				by[k] = s
				order = append(order, k)
			}
			s.values, s.ts = append(s.values, r.Value), append(s.ts, sc.at.UnixMilli())
		}
	}
	var b []byte
	for _, k := range order {
		line, err := json.Marshal(map[string]any{"metric": by[k].metric, "values": by[k].values, "timestamps": by[k].ts})
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// FuzzScanExport: a line scanExport reads is one encoding/json reads the
// same: the metric, every value and timestamp (or, where the metric
// object is not JSON, one both refuse).
func FuzzScanExport(f *testing.F) {
	f.Add([]byte(`{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n\"1}"},"values":[1,"NaN",-2.5e3,0],"timestamps":[1,2,-3,0]}`))
	f.Add([]byte(`{"metric":{},"values":[],"timestamps":[]}`))
	f.Add([]byte(`{"metric":{"a":"b"},"values":[01],"timestamps":[1]}`))
	f.Add([]byte(`{"metric":{"a":"b"},"values":[1e999],"timestamps":[1e3]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var scan rawExport
		if !scanExport(line, &scan) {
			return
		}
		var l exportLine
		var m map[string]string
		errM := json.Unmarshal(scan.metric, &m)
		if err := json.Unmarshal(line, &l); err != nil {
			// The metric object is left to encoding/json: a line it
			// refuses is refused there.
			if errM == nil {
				t.Fatalf("%s: scanned with a good metric, but encoding/json says %v", line, err)
			}
			return
		}
		if (errM == nil) != (l.Metric != nil || string(scan.metric) == "null") || errM == nil && fmt.Sprint(m) != fmt.Sprint(l.Metric) {
			t.Fatalf("%s: metric %v (%v), encoding/json %v", line, m, errM, l.Metric)
		}
		if len(scan.values) != len(l.Values) || len(scan.ts) != len(l.Timestamps) {
			t.Fatalf("%s: %d values, %d timestamps; encoding/json %d, %d", line, len(scan.values), len(scan.ts), len(l.Values), len(l.Timestamps))
		}
		for i := range scan.values {
			a, errA := exportValue(scan.values[i])
			b, errB := exportValue(l.Values[i])
			if (errA == nil) != (errB == nil) || errA == nil && a != b && !(a != a && b != b) {
				t.Fatalf("%s: value %d %g (%v); encoding/json %g (%v)", line, i, a, errA, b, errB)
			}
		}
		for i := range scan.ts {
			if scan.ts[i] != l.Timestamps[i] {
				t.Fatalf("%s: timestamp %d %d; encoding/json %d", line, i, scan.ts[i], l.Timestamps[i])
			}
		}
	})
}
