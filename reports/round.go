package reports

import (
	"math"
	"sort"

	"github.com/gpuledger/gpuledger/ledger"
)

// RoundCents rounds a column of micro-unit amounts whose last element is
// the sum of the others (a TOTAL) to whole cents so that the printed rows
// add up to the printed TOTAL: the TOTAL is rounded half to even, and the
// rows' cents are the largest-remainder split of it (each row is its amount
// rounded down or up). Negative amounts are fine.
func RoundCents(col []int64) []int64 {
	const unit = ledger.MicrosPerCent
	out := make([]int64, len(col))
	if len(col) == 0 {
		return out
	}
	rows, total := col[:len(col)-1], col[len(col)-1]
	out[len(out)-1] = ledger.Cents(total)
	var floorSum int64
	rems := make([]int64, len(rows))
	for i, v := range rows {
		q := floorDiv(v, unit)
		out[i], rems[i] = q, v-q*unit
		floorSum += q
	}
	distribute(out[:len(rows)], rems, out[len(out)-1]-floorSum)
	return out
}

// RoundTenths does for quantities what RoundCents does for money: rounds a
// column whose last element is the sum of the others to tenths, the rows
// adding up to the rounded TOTAL. Values are returned in tenths.
func RoundTenths(col []float64) []int64 {
	out := make([]int64, len(col))
	if len(col) == 0 {
		return out
	}
	rows := col[:len(col)-1]
	out[len(out)-1] = int64(math.RoundToEven(col[len(col)-1] * 10))
	var floorSum int64
	rems := make([]int64, len(rows))
	for i, v := range rows {
		f := math.Floor(v * 10)
		out[i] = int64(f)
		rems[i] = int64((v*10 - f) * 1e9)
		floorSum += out[i]
	}
	distribute(out[:len(rows)], rems, out[len(out)-1]-floorSum)
	return out
}

// distribute adds one to the n rows with the largest remainders (ties to
// the earlier row), or takes one from those with the smallest when n is
// negative (float sums of quantities may round below their parts).
func distribute(out, rems []int64, n int64) {
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	if n >= 0 {
		sort.SliceStable(idx, func(a, b int) bool { return rems[idx[a]] > rems[idx[b]] })
		for i := 0; int64(i) < n && i < len(idx); i++ {
			out[idx[i]]++
		}
		return
	}
	sort.SliceStable(idx, func(a, b int) bool { return rems[idx[a]] < rems[idx[b]] })
	for i := 0; int64(i) < -n && i < len(idx); i++ {
		out[idx[i]]--
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
