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
