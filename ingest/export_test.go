package ingest

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestMergeRunsIsAStableSort: merging the time-ordered runs of export
// lines gives what a stable sort of all their samples by time gives
// (equal times: the earlier line first), for runs of any length, with
// shared and distinct timestamps.
func TestMergeRunsIsAStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		var src []rwSample
		var runs []int
		for line := range rng.IntN(12) {
			n := rng.IntN(40)
			run := len(src)
			ts := int64(rng.IntN(5))
			for i := range n {
				ts += int64(rng.IntN(3)) // repeats within a line too
				src = append(src, rwSample{start: line, end: i, ts: ts})
			}
			if n > 0 {
				runs = append(runs, run)
			}
		}
		want := slices.Clone(src)
		slices.SortStableFunc(want, cmpTime)
		if got := mergeRuns(nil, src, runs); !slices.Equal(got, want) {
			t.Fatalf("trial %d: merged\n%v\nwant\n%v", trial, got, want)
		}
	}
}

// FuzzJSONInt: jsonInt takes exactly the timestamps the JSON grammar and
// strconv.ParseInt take as an integer without fraction or exponent.
func FuzzJSONInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "01", "1761955200000", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
		"-9223372036854775809", "99999999999999999999", "1e3", "1.0", "-", "", "+1", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := strconv.ParseInt(s, 10, 64)
		wantOK := jsonNumber([]byte(s)) && !strings.ContainsAny(s, ".eE") && err == nil
		got, ok := jsonInt([]byte(s))
		if ok != wantOK || (ok && got != want) {
			t.Errorf("jsonInt(%q) = %d, %v; want %d, %v", s, got, ok, want, wantOK)
		}
	})
}
