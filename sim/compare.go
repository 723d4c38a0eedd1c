package sim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// RunFigures are the figures two runs of the same jobs are compared by (a
// replay and a real Kueue), computed the same way from their outcomes.
type RunFigures struct {
	Jobs, Started, Finished int
	// AvgJCT is over finished jobs (finish − submit); the waits are over
	// every job submitted before the end (start − submit), a job still
	// waiting at the end counting with its wait so far.
	AvgJCT, MeanWait, P90Wait, MaxWait time.Duration
	// JainBacklogged is Jain's index of the spend rate (held GPUs at their
	// flavors' prices) of the queues with work waiting, sampled every
	// hour that two or more queues have work waiting, averaged (1 when
	// they all hold nothing; 0 when no hour had two); every queue is
	// entitled to the same (the queues of one ClusterQueue).
	JainBacklogged float64
	// MoneyGap and MoneyGapP95 are ReplayResult's, sampled hourly the
	// same way, every queue entitled to the same.
	MoneyGap, MoneyGapP95 float64
	// MoneyGapByBlock is the money gap over each GapBlock of the trace
	// from its start, the last one ending at end (NaN: no hour of the
	// block had two queues waiting with spend): where two runs part.
	MoneyGapByBlock []float64
	// ShareByBlock is, per block, each queue's mean share of the
	// backlogged queues' spend less its share of their entitlements, over
	// the block's samples in which it was backlogged (moneyGaps.shares):
	// which queue the gap is made of. HeldByBlock is, per block, the GPUs
	// (units of a flavor's resource) each queue held of each flavor, the
	// mean over the block's hourly samples.
	ShareByBlock []map[string]float64
	HeldByBlock  []map[string]map[string]float64
	// GPUHoursByFlavor is what the started jobs held, up to end.
	GPUHoursByFlavor map[string]float64
	// IdlePaidGPUHours is ReplayResult's, sampled hourly the same way.
	IdlePaidGPUHours float64
	// LongestStall is, per queue, the longest time up to end in which it
	// had work waiting and started none: starvation of a queue, where
	// MaxWait also counts a job waiting behind its own queue's others.
	// MaxStall is the longest of them.
	LongestStall map[string]time.Duration
	MaxStall     time.Duration
}

// GapBlock is the span of RunFigures.MoneyGapByBlock's blocks.
const GapBlock = 12 * time.Hour

// Figures computes RunFigures of jobs from the outcomes of those that
// started, up to end (a job still running then holds until end), with
// the flavors' prices.
func Figures(jobs []TraceJob, outs []JobOutcome, pricePerGPUHour map[string]int64, end time.Duration) RunFigures {
	f := RunFigures{Jobs: len(jobs), Started: len(outs), GPUHoursByFlavor: map[string]float64{}}
	var jct, waits []float64
	started := map[string]JobOutcome{}
	for _, o := range outs {
		started[o.ID] = o
		waits = append(waits, (o.Start - o.Submit).Seconds())
		stop := end
		if o.Finish > 0 {
			jct = append(jct, (o.Finish - o.Submit).Seconds())
			stop = min(o.Finish, end)
		}
		f.GPUHoursByFlavor[o.Flavor] += float64(o.GPUs) * max(stop-o.Start, 0).Hours()
	}
	for _, j := range jobs {
		if _, ok := started[j.ID]; !ok && j.Submit < end {
			waits = append(waits, (end - j.Submit).Seconds())
		}
	}
	f.Finished = len(jct)
	f.AvgJCT = seconds(mean(jct))
	f.MeanWait = seconds(mean(waits))
	if len(waits) > 0 {
		sort.Float64s(waits)
		f.P90Wait = seconds(waits[int(math.Ceil(0.9*float64(len(waits))))-1])
		f.MaxWait = seconds(waits[len(waits)-1])
	}
	// Backlogged Jain, hour by hour.
	queues := map[string]bool{}
	for _, j := range jobs {
		queues[j.Queue] = true
	}
	var sum float64
	n := 0
	var gaps moneyGaps
	blocks := make([]moneyGaps, (end+GapBlock-1)/GapBlock)
	entitled := map[string]float64{}
	for q := range queues {
		entitled[q] = 1
	}
	held := make([]map[string]map[string]float64, len(blocks))
	samples := make([]int, len(blocks))
	for t := time.Duration(0); t < end; t += time.Hour {
		b := t / GapBlock
		if held[b] == nil {
			held[b] = map[string]map[string]float64{}
		}
		samples[b]++
		waiting := map[string]bool{}
		rate := map[string]float64{}
		idle := map[string]float64{}
		for _, j := range jobs {
			o, ok := started[j.ID]
			switch {
			case j.Submit > t:
			case !ok || o.Start > t:
				waiting[j.Queue] = true
			case o.Finish == 0 || o.Finish > t:
				rate[j.Queue] += float64(o.GPUs) * float64(pricePerGPUHour[o.Flavor])
				idle[j.Queue] += float64(o.GPUs) * j.Idle
				if held[b][j.Queue] == nil {
					held[b][j.Queue] = map[string]float64{}
				}
				held[b][j.Queue][o.Flavor] += float64(o.GPUs)
			}
		}
		for q, g := range idle {
			if len(waiting) > 1 || (len(waiting) == 1 && !waiting[q]) {
				f.IdlePaidGPUHours += g
			}
		}
		if len(waiting) < 2 {
			continue
		}
		gaps.sample(slices.Sorted(maps.Keys(waiting)), rate, entitled)
		blocks[b].sample(slices.Sorted(maps.Keys(waiting)), rate, entitled)
		var xs []float64
		for q := range waiting {
			xs = append(xs, rate[q])
		}
		slices.Sort(xs)
		if xs[len(xs)-1] == 0 {
			sum++
		} else {
			sum += jainIndex(xs)
		}
		n++
	}
	if n > 0 {
		f.JainBacklogged = sum / float64(n)
	}
	f.MoneyGap, f.MoneyGapP95, _, _ = gaps.result()
	for i, b := range blocks {
		g, _, n, _ := b.result()
		if n == 0 {
			g = math.NaN()
		}
		f.MoneyGapByBlock = append(f.MoneyGapByBlock, g)
		f.ShareByBlock = append(f.ShareByBlock, b.shares())
		for _, byFlavor := range held[i] {
			for fl := range byFlavor {
				byFlavor[fl] /= float64(samples[i])
			}
		}
		f.HeldByBlock = append(f.HeldByBlock, held[i])
	}
	f.LongestStall = longestStalls(jobs, started, end)
	for _, d := range f.LongestStall {
		f.MaxStall = max(f.MaxStall, d)
	}
	return f
}

// longestStalls is RunFigures.LongestStall, exact: a sweep over each
// queue's submissions and starts in time order.
func longestStalls(jobs []TraceJob, started map[string]JobOutcome, end time.Duration) map[string]time.Duration {
	type event struct {
		at    time.Duration
		delta int // +1 submitted, -1 started
	}
	byQueue := map[string][]event{}
	for _, j := range jobs {
		if j.Submit >= end {
			continue
		}
		byQueue[j.Queue] = append(byQueue[j.Queue], event{j.Submit, +1})
		if o, ok := started[j.ID]; ok && o.Start < end {
			byQueue[j.Queue] = append(byQueue[j.Queue], event{o.Start, -1})
		}
	}
	out := make(map[string]time.Duration, len(byQueue))
	for q, evs := range byQueue {
		// At one instant, submissions before starts: a job started the
		// moment it came never left its queue waiting.
		slices.SortFunc(evs, func(a, b event) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			return cmp.Compare(b.delta, a.delta)
		})
		var longest, from time.Duration
		pending := 0
		for _, e := range evs {
			if e.delta < 0 && pending > 0 {
				longest = max(longest, e.at-from)
			}
			if e.delta < 0 || pending == 0 {
				from = e.at
			}
			pending += e.delta
		}
		if pending > 0 {
			longest = max(longest, end-from)
		}
		out[q] = longest
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Divergence is how far two runs of the same jobs are apart job by job,
// over the jobs that started in both.
type Divergence struct {
	Common int
	// MeanAbsWait and MedianAbsWait are of |wait in a − wait in b|.
	MeanAbsWait, MedianAbsWait time.Duration
	// SameFlavor is the fraction of common jobs that ran on the same
	// flavor in both.
	SameFlavor float64
}

// Diverge compares the outcomes of two runs.
func Diverge(a, b []JobOutcome) Divergence {
	byID := map[string]JobOutcome{}
	for _, o := range b {
		byID[o.ID] = o
	}
	var d []float64
	same := 0
	for _, oa := range a {
		ob, ok := byID[oa.ID]
		if !ok {
			continue
		}
		d = append(d, math.Abs((oa.Start - oa.Submit - (ob.Start - ob.Submit)).Seconds()))
		if oa.Flavor == ob.Flavor {
			same++
		}
	}
	out := Divergence{Common: len(d), MeanAbsWait: seconds(mean(d))}
	if len(d) > 0 {
		sort.Float64s(d)
		out.MedianAbsWait = seconds(d[len(d)/2])
		out.SameFlavor = float64(same) / float64(len(d))
	}
	return out
}
