package admission

import "math"

// Decayed keeps each queue's usage halving every HalfLifeMs: Kueue's
// Admission Fair Sharing keeps consumed resources this way, gpuledger's
// cost-weighted fair share keeps money spent. Time is passed in.
//
// Why the cost-weighted order cannot starve a queue: a waiting queue adds
// nothing to its value, which halves every half-life, while queues that run
// keep adding; so the waiting queue's value falls below theirs within a
// bounded time and it is tried first (and its nominal quota is reclaimed
// for it at once, when its queue may preempt). Why it cannot make two
// queues preempt each other forever: it only orders admission; preemption
// that goes with it only gives a queue back its nominal quota, so a
// preemptor never borrows by preempting and its victims' queue has nothing
// to reclaim from it.
type Decayed struct {
	HalfLifeMs int64
	values     map[string]float64
	atMs       int64
}

// NewDecayed returns an empty tracker.
func NewDecayed(halfLifeMs int64) *Decayed {
	return &Decayed{HalfLifeMs: halfLifeMs, values: make(map[string]float64)}
}

// Advance decays every value to nowMs. Time never runs backwards: an
// earlier nowMs is ignored.
func (d *Decayed) Advance(nowMs int64) {
	if nowMs <= d.atMs {
		return
	}
	if d.atMs != 0 && d.HalfLifeMs > 0 {
		f := math.Exp2(-float64(nowMs-d.atMs) / float64(d.HalfLifeMs))
		for k, v := range d.values {
			d.values[k] = v * f
		}
	}
	d.atMs = nowMs
}

// Add adds v to a queue's value.
func (d *Decayed) Add(queue string, v float64) { d.values[queue] += v }

// Shares returns each queue's value over its weight.
func (d *Decayed) Shares(queues map[string]*ClusterQueue) map[string]float64 {
	out := make(map[string]float64, len(queues))
	for name, q := range queues {
		out[name] = d.values[name] / weight(q)
	}
	return out
}

// Values returns a copy of each queue's value.
func (d *Decayed) Values() map[string]float64 {
	out := make(map[string]float64, len(d.values))
	for k, v := range d.values {
		out[k] = v
	}
	return out
}
