package reports

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundCents(t *testing.T) {
	f := func(col, want []int64) {
		t.Helper()
		if diff := cmp.Diff(want, RoundCents(col)); diff != "" {
			t.Errorf("RoundCents(%v) (-want +got):\n%s", col, diff)
		}
	}
	// The README's tour before: rows truncated to cents summed to
	// 286539.74 against a TOTAL of 286539.76.
	f([]int64{97_768_904_999, 51_394_914_999, 63_243_354_999, 13_331_514_999, 0, 60_801_074_999, 286_539_763_995},
		[]int64{9_776_891, 5_139_492, 6_324_335, 1_333_151, 0, 6_080_107, 28_653_976})
	// Halves go to even in the TOTAL; the rows follow it, ties to the
	// earlier row.
	f([]int64{5_000, 10_000, 15_000}, []int64{1, 1, 2})
	f([]int64{15_000, 10_000, 25_000}, []int64{1, 1, 2})
	// Negative variances.
	f([]int64{-15_000, -25_000, -40_000}, []int64{-1, -3, -4})
	f([]int64{-7_501_800, 1_000_000, -2_880_001, -9_381_801}, []int64{-750, 100, -288, -938})
}

// TestRoundCentsAddsUp: for any column, the rounded rows sum to the
// rounded total and each is its amount rounded down or up.
func TestRoundCentsAddsUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		n := 1 + rng.IntN(8)
		col := make([]int64, n+1)
		for i := range n {
			col[i] = rng.Int64N(2_000_000_000) - 500_000_000
			col[n] += col[i]
		}
		got := RoundCents(col)
		var sum int64
		for i := range n {
			sum += got[i]
			if lo := floorDiv(col[i], 10_000); got[i] != lo && got[i] != lo+1 {
				t.Fatalf("%v: row %d rounded to %d", col, i, got[i])
			}
		}
		if sum != got[n] {
			t.Fatalf("%v: rows sum to %d cents, TOTAL %d", col, sum, got[n])
		}
	}
}

func TestRoundTenths(t *testing.T) {
	got := RoundTenths([]float64{16429.94, 8336.14, 9565.34, 1937.74, 0, 11346.84, 47616.0})
	var sum int64
	for _, v := range got[:len(got)-1] {
		sum += v
	}
	if sum != got[len(got)-1] || got[len(got)-1] != 476160 {
		t.Errorf("tenths %v: rows sum to %d, TOTAL %d", got, sum, got[len(got)-1])
	}
}
