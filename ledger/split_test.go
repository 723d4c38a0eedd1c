package ledger

import (
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitLargestRemainder(t *testing.T) {
	f := func(total int64, weights, want []int64) {
		t.Helper()
		got := SplitLargestRemainder(total, weights, nil)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("split(%d, %v) (-want +got):\n%s", total, weights, diff)
		}
	}
	f(100, []int64{1, 1, 1}, []int64{34, 33, 33})
	f(10, []int64{0, 5, 5}, []int64{0, 5, 5})
	f(7, []int64{1, 2, 4}, []int64{1, 2, 4})
	f(1, []int64{1, 1}, []int64{1, 0})
	f(0, []int64{3, 4}, []int64{0, 0})
	f(5, []int64{0, 0}, []int64{0, 0})
	f(2, []int64{1, 3, 3}, []int64{0, 1, 1})
	f(6_880_000, []int64{3_600_000, 0}, []int64{6_880_000, 0})
	// Remainders decide, not weights: 10×(2/7)=2.857, 10×(5/7)=7.142.
	f(10, []int64{2, 5}, []int64{3, 7})
	// Large values stay exact (128-bit products).
	f(1<<62, []int64{1 << 62, 1 << 62}, []int64{1 << 61, 1 << 61})
}

func FuzzSplit(f *testing.F) {
	f.Add(int64(100), int64(1), int64(1), int64(1))
	f.Add(int64(6_880_000), int64(3_600_000), int64(0), int64(7))
	f.Add(int64(1<<62), int64(1<<40), int64(3), int64(1<<50))
	f.Fuzz(func(t *testing.T, total, a, b, c int64) {
		if total < 0 || a < 0 || b < 0 || c < 0 || a > 1<<60 || b > 1<<60 || c > 1<<60 {
			return
		}
		w := []int64{a, b, c}
		got := SplitLargestRemainder(total, w, nil)
		sum := a + b + c
		var s int64
		for i, g := range got {
			if g < 0 {
				t.Fatalf("part %d is negative: %v", i, got)
			}
			s += g
			if sum == 0 {
				continue
			}
			// Each part is floor or ceil of its exact share.
			exact := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(total), big.NewInt(w[i])), big.NewInt(sum))
			lo := new(big.Int).Quo(exact.Num(), exact.Denom())
			if g != lo.Int64() && g != lo.Int64()+1 {
				t.Fatalf("part %d = %d, exact share %s", i, g, exact.FloatString(3))
			}
		}
		if sum > 0 && s != total {
			t.Fatalf("parts %v sum to %d, want %d", got, s, total)
		}
	})
}
