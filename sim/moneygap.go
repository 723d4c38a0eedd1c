package sim

import (
	"math"
	"slices"
)

// moneyGaps measures money-fairness the same way for every policy and for
// a real Kueue's outcomes: at each sample in which two or more queues are
// backlogged (work waiting), the largest |a backlogged queue's share of
// the money the backlogged queues spend - its share of their
// entitlements| (entitlement: the money value of its nominal quota; spend:
// the GPUs it holds at their flavors' prices). 0 is fair in money; 0.05
// is 5 points off. A sample in which the backlogged queues hold nothing
// has no shares and is counted apart (Starved).
type moneyGaps struct {
	gaps    []float64
	starved int
	// share sums, per queue, its share of the backlogged queues' spend
	// less its share of their entitlements over the samples with shares
	// in which it was backlogged; shareN counts those samples.
	share  map[string]float64
	shareN map[string]int
}

// sample takes one sample: the backlogged queues, each one's spend rate
// and entitlement (any units, the same for all).
func (m *moneyGaps) sample(backlogged []string, spend, entitled map[string]float64) {
	if len(backlogged) < 2 {
		return
	}
	var s, e float64
	for _, q := range backlogged {
		s += spend[q]
		e += entitled[q]
	}
	if s <= 0 || e <= 0 {
		m.starved++
		return
	}
	if m.share == nil {
		m.share, m.shareN = map[string]float64{}, map[string]int{}
	}
	var gap float64
	for _, q := range backlogged {
		d := spend[q]/s - entitled[q]/e
		gap = max(gap, math.Abs(d))
		m.share[q] += d
		m.shareN[q]++
	}
	m.gaps = append(m.gaps, gap)
}

// shares are each queue's mean signed deviation (its share of the
// backlogged queues' spend less its share of their entitlements) over
// the samples with shares in which it was backlogged: who the gap is made
// of, and in which direction.
func (m *moneyGaps) shares() map[string]float64 {
	out := make(map[string]float64, len(m.share))
	for q, d := range m.share {
		out[q] = d / float64(m.shareN[q])
	}
	return out
}

// result is the mean gap over the samples (time-weighted: the samples
// are evenly spaced), its 95th percentile (nearest rank), and how many
// samples there were, with and without shares.
func (m *moneyGaps) result() (mean, p95 float64, samples, starved int) {
	if len(m.gaps) == 0 {
		return 0, 0, 0, m.starved
	}
	var sum float64
	for _, g := range m.gaps {
		sum += g
	}
	sorted := slices.Sorted(slices.Values(m.gaps))
	return sum / float64(len(m.gaps)), sorted[int(math.Ceil(0.95*float64(len(sorted))))-1], len(m.gaps), m.starved
}
