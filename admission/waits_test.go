package admission

import (
	"math"
	"testing"
)

func TestWaitBuckets(t *testing.T) {
	if len(WaitBuckets) != 17 || WaitBuckets[10] != 1280 || WaitBuckets[11] != 2560 || WaitBuckets[15] != 40960 || !math.IsInf(WaitBuckets[16], 1) {
		t.Fatalf("buckets %v; want Kueue's 1, 2.5·2^k to 40960, +Inf", WaitBuckets)
	}
	// 1280 counts in le="1280" (at most), 1800 in le="2560", 1e6 only in +Inf.
	got := CumulativeCounts([]float64{1800, 0, 1280, 1e6})
	for i, want := range map[int]int{0: 1, 9: 1, 10: 2, 11: 3, 15: 3, 16: 4} {
		if got[i] != want {
			t.Errorf("le=%g: %d, want %d (all %v)", WaitBuckets[i], got[i], want, got)
		}
	}
}
