package ingest

import (
	"math/rand/v2"
	"slices"
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
