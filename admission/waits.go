package admission

import (
	"math"
	"slices"
)

// WaitBuckets are the upper bounds, in seconds, of Kueue's
// kueue_admission_wait_time_seconds histogram: 1, then 2.5·2^k up to
// 40,960 s, and +Inf. gpuledger's own wait histograms (the pending
// workloads' ages) use them too, so that they add up bucket by bucket.
var WaitBuckets = func() []float64 {
	b := []float64{1}
	for v := 2.5; len(b) < 16; v *= 2 {
		b = append(b, v)
	}
	return append(b, math.Inf(1))
}()

// CumulativeCounts counts, for each of WaitBuckets, the waits (seconds) at
// most that bound: a cumulative histogram in Prometheus' layout.
func CumulativeCounts(waits []float64) []int {
	sorted := slices.Clone(waits)
	slices.Sort(sorted)
	out := make([]int, len(WaitBuckets))
	for i, b := range WaitBuckets {
		n, _ := slices.BinarySearch(sorted, math.Nextafter(b, math.Inf(1)))
		if math.IsInf(b, 1) {
			n = len(sorted)
		}
		out[i] = n
	}
	return out
}
