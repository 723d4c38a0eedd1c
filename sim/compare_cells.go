package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Cells are the figures as the tab-separated cells of sim-to-real's table:
// started/jobs, finished, avg JCT, mean, p90 and max wait, backlogged
// Jain, money gap, idle paid GPU-hours, longest stall.
func (f RunFigures) Cells() string {
	r := func(d time.Duration) string { return d.Round(time.Minute).String() }
	return fmt.Sprintf("%d/%d\t%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%.0f\t%s", f.Started, f.Jobs, f.Finished, r(f.AvgJCT), r(f.MeanWait), r(f.P90Wait), r(f.MaxWait),
		f.JainBacklogged, f.MoneyGap, f.IdlePaidGPUHours, r(f.MaxStall))
}

// MedianFigures takes each figure's median over the runs.
func MedianFigures(fs []RunFigures) RunFigures {
	pick := func(get func(RunFigures) float64) float64 {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = get(f)
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	d := func(get func(RunFigures) time.Duration) time.Duration {
		return time.Duration(pick(func(f RunFigures) float64 { return float64(get(f)) }))
	}
	return RunFigures{Jobs: fs[0].Jobs,
		Started:          int(pick(func(f RunFigures) float64 { return float64(f.Started) })),
		Finished:         int(pick(func(f RunFigures) float64 { return float64(f.Finished) })),
		AvgJCT:           d(func(f RunFigures) time.Duration { return f.AvgJCT }),
		MeanWait:         d(func(f RunFigures) time.Duration { return f.MeanWait }),
		P90Wait:          d(func(f RunFigures) time.Duration { return f.P90Wait }),
		MaxWait:          d(func(f RunFigures) time.Duration { return f.MaxWait }),
		JainBacklogged:   pick(func(f RunFigures) float64 { return f.JainBacklogged }),
		MoneyGap:         pick(func(f RunFigures) float64 { return f.MoneyGap }),
		IdlePaidGPUHours: pick(func(f RunFigures) float64 { return f.IdlePaidGPUHours }),
		MaxStall:         d(func(f RunFigures) time.Duration { return f.MaxStall })}
}

// SpreadCells are each figure's min–max over the runs, as Cells.
func SpreadCells(fs []RunFigures) string {
	span := func(get func(RunFigures) float64, format func(float64) string) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, f := range fs {
			lo, hi = min(lo, get(f)), max(hi, get(f))
		}
		return format(lo) + "–" + format(hi)
	}
	n := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	dur := func(v float64) string { return time.Duration(v).Round(time.Minute).String() }
	j := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	return strings.Join([]string{
		span(func(f RunFigures) float64 { return float64(f.Started) }, n),
		span(func(f RunFigures) float64 { return float64(f.Finished) }, n),
		span(func(f RunFigures) float64 { return float64(f.AvgJCT) }, dur),
		span(func(f RunFigures) float64 { return float64(f.MeanWait) }, dur),
		span(func(f RunFigures) float64 { return float64(f.P90Wait) }, dur),
		span(func(f RunFigures) float64 { return float64(f.MaxWait) }, dur),
		span(func(f RunFigures) float64 { return f.JainBacklogged }, j),
		span(func(f RunFigures) float64 { return f.MoneyGap }, j),
		span(func(f RunFigures) float64 { return f.IdlePaidGPUHours }, n),
		span(func(f RunFigures) float64 { return float64(f.MaxStall) }, dur),
	}, "\t")
}

// ErrorCells are (s − r) / r per figure, as Cells.
func ErrorCells(s, r RunFigures) string {
	rel := func(a, b float64) string {
		if b == 0 {
			if a == 0 {
				return "0%"
			}
			return "n/a"
		}
		return fmt.Sprintf("%+.0f%%", 100*(a-b)/b)
	}
	return strings.Join([]string{
		rel(float64(s.Started), float64(r.Started)), rel(float64(s.Finished), float64(r.Finished)),
		rel(float64(s.AvgJCT), float64(r.AvgJCT)), rel(float64(s.MeanWait), float64(r.MeanWait)),
		rel(float64(s.P90Wait), float64(r.P90Wait)), rel(float64(s.MaxWait), float64(r.MaxWait)),
		rel(s.JainBacklogged, r.JainBacklogged), rel(s.MoneyGap, r.MoneyGap), rel(s.IdlePaidGPUHours, r.IdlePaidGPUHours),
		rel(float64(s.MaxStall), float64(r.MaxStall))}, "\t")
}

// BlockCells are MoneyGapByBlock's gaps, tab-separated ("-" for a block
// without a sample).
func (f RunFigures) BlockCells() string {
	cells := make([]string, len(f.MoneyGapByBlock))
	for i, g := range f.MoneyGapByBlock {
		cells[i] = "-"
		if !math.IsNaN(g) {
			cells[i] = fmt.Sprintf("%.3f", g)
		}
	}
	return strings.Join(cells, "\t")
}

// Queues are the queues of ShareByBlock and HeldByBlock, sorted.
func (f RunFigures) Queues() []string {
	seen := map[string]bool{}
	for i := range f.ShareByBlock {
		for q := range f.ShareByBlock[i] {
			seen[q] = true
		}
		for q := range f.HeldByBlock[i] {
			seen[q] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// QueueBlockCells are queue's cells by GapBlock, tab-separated: its mean
// share of the backlogged queues' spend less its share of their
// entitlements ("-" when it was never backlogged with another), then the
// GPUs it held of each flavor, the mean over the block's hours.
func (f RunFigures) QueueBlockCells(queue string) string {
	cells := make([]string, len(f.ShareByBlock))
	for i := range f.ShareByBlock {
		cell := "-"
		if d, ok := f.ShareByBlock[i][queue]; ok {
			cell = fmt.Sprintf("%+.3f", d)
		}
		held := f.HeldByBlock[i][queue]
		for _, fl := range slices.Sorted(maps.Keys(held)) {
			cell += fmt.Sprintf(" %s:%.1f", fl, held[fl])
		}
		cells[i] = cell
	}
	return strings.Join(cells, "\t")
}
