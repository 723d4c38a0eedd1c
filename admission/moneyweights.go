package admission

import (
	"maps"
	"math"
	"slices"
)

// MoneyWeightBound bounds MoneyWeights: no queue's weight is more than this
// many times, or less than one over this many times, the weight of a queue
// that spends exactly its entitlement. Kueue divides a borrowing queue's
// dominant resource share by its weight, so the bound caps how far money
// can reorder borrowers: a queue that has spent nothing still waits behind
// one that borrows a quarter as much.
const MoneyWeightBound = 4.0

// MoneyWeights are costfair-drs's fair-sharing weights: for each queue
// with an entitlement (the money value of its nominal quota, any unit),
// how its decayed spend (same unit, any decay) compares with the
// cohort's. A queue that spent in proportion to its entitlement as the
// whole cohort did gets 1; one that spent twice that proportion gets 1/2;
// the weights are bounded by MoneyWeightBound either way. With nothing
// spent yet, every weight is 1, so on a cluster of one flavor whose
// queues spend as their quotas say the order is Kueue's own. Queues
// without an entitlement are left out.
//
// Kueue compares borrowers per flavor and resource (20 borrowed T4s weigh
// as much as 20 borrowed H100s when the cohort can lend as many of each),
// not by what they cost; the weights carry the money back into its order.
func MoneyWeights(spend, entitlement map[string]float64) map[string]float64 {
	var spent, entitled float64
	for q, e := range entitlement {
		if e > 0 {
			spent += max(spend[q], 0)
			entitled += e
		}
	}
	out := make(map[string]float64, len(entitlement))
	for q, e := range entitlement {
		if e <= 0 {
			continue
		}
		s := max(spend[q], 0)
		switch {
		case spent <= 0:
			out[q] = 1
		case s <= 0:
			out[q] = MoneyWeightBound
		default:
			w := (spent / entitled) / (s / e)
			out[q] = math.Min(MoneyWeightBound, math.Max(1/MoneyWeightBound, w))
		}
	}
	return out
}

// The bounds of UsageWeights, so that one queue never drowns the others in
// the scheduler's arithmetic.
const (
	MinUsageWeight = 0.01
	MaxUsageWeight = 100.0
)

// DefaultHysteresis is how far a weight moves before it is written
// (WeightChanged): 10%.
const DefaultHysteresis = 0.1

// UsageWeights are the weights that make a scheduler which orders queues
// by usage / weight, lowest first (Kueue's Admission Fair Sharing), order
// them by their money share instead: usage / share for each queue with
// both above 0, scaled so that those average 1 and bounded to
// [MinUsageWeight, MaxUsageWeight]; a queue in either map without usage or
// share gets 1 (there is nothing to correct). The keys are the caller's:
// the queues one scheduler orders against each other.
func UsageWeights(usage, share map[string]float64) map[string]float64 {
	keys := slices.Collect(maps.Keys(usage))
	for k := range share {
		if _, ok := usage[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // sums in one order
	raw := make(map[string]float64, len(keys))
	var sum float64
	for _, k := range keys {
		if u, s := usage[k], share[k]; u > 0 && s > 0 {
			raw[k] = u / s
			sum += raw[k]
		}
	}
	out := make(map[string]float64, len(keys))
	for _, k := range keys {
		w := 1.0
		if v, ok := raw[k]; ok {
			w = v / (sum / float64(len(raw)))
		}
		out[k] = math.Min(math.Max(w, MinUsageWeight), MaxUsageWeight)
	}
	return out
}

// WeightChanged says whether a weight moved enough to be written: by more
// than hysteresis, relative; always when current is unset (0 or less).
func WeightChanged(current, target, hysteresis float64) bool {
	if current <= 0 {
		return true
	}
	return math.Abs(target/current-1) > hysteresis
}
