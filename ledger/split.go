package ledger

import (
	"math/bits"
	"sort"
)

// SplitLargestRemainder is money arithmetic on whole units (micro-units,
// share units), kept here beside the money format so that every package
// that splits an amount exactly (attribution's costs and shares, the
// simulator's quotas, the reports' allocation ratios) uses this one.

// SplitLargestRemainder divides total among len(weights) parts in proportion
// to weights, in whole units, so that the parts sum to total exactly. Each
// part first gets floor(total×w/W); the units left over go one each to the
// parts with the largest remainders, ties going to the lower index (callers
// sort parts by a stable key first, so the result does not depend on the
// order of the input).
//
// total must be >= 0 and weights >= 0 with a positive sum; the products are
// computed in 128 bits, so any int64 inputs are exact.
func SplitLargestRemainder(total int64, weights []int64, dst []int64) []int64 {
	dst = append(dst[:0], make([]int64, len(weights))...)
	var sum uint64
	for _, w := range weights {
		sum += uint64(w)
	}
	if sum == 0 || total <= 0 {
		return dst
	}
	type rem struct {
		idx int
		r   uint64
	}
	rems := make([]rem, 0, len(weights))
	var given int64
	for i, w := range weights {
		hi, lo := bits.Mul64(uint64(total), uint64(w))
		q, r := bits.Div64(hi, lo, sum)
		dst[i] = int64(q)
		given += int64(q)
		if r > 0 {
			rems = append(rems, rem{i, r})
		}
	}
	left := total - given
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for i := 0; int64(i) < left; i++ {
		dst[rems[i].idx]++
	}
	return dst
}
