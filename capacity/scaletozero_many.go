package capacity

// Scale to zero over many endpoints: recommending on every core, and
// summing the recommendations per model and over seeds.

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RecommendAll recommends for every endpoint (Recommend, on arrivals
// drawn with seed and the endpoint's index), on every core.
func RecommendAll(ctx context.Context, eps []Endpoint, seed uint64, cs ColdStart, price int64, maxP95 time.Duration) []ScaleToZero {
	out := make([]ScaleToZero, len(eps))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = Recommend(eps[i], Arrivals(eps[i], seed+uint64(i)*1_000_003), cs, price, maxP95)
			}
		}()
	}
	for i := range eps {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// ModelFigures are one seed's sums over a model's endpoints
// (Summarise), per day: always-on GPU-hours, those the default and the
// best policy save and their cold starts, their median p95 extra
// latency, how many endpoints go to zero and their net saving a month.
type ModelFigures struct {
	alwaysOn, defSaved, defCold, bestSaved, bestCold float64
	defP95, bestP95                                  time.Duration
	toZero                                           int
	net                                              int64
}

// Summarise sums recs into one seed's ModelFigures.
func Summarise(recs []ScaleToZero) ModelFigures {
	var f ModelFigures
	var defP95, bestP95 []time.Duration
	for _, r := range recs {
		d := r.Best.Days
		f.alwaysOn += r.Best.AlwaysOnGPUHours / d
		f.defSaved += r.Default.SavedGPUHours / d
		f.defCold += r.Default.ColdStartsPerDay
		f.bestSaved += r.Best.SavedGPUHours / d
		f.bestCold += r.Best.ColdStartsPerDay
		defP95, bestP95 = append(defP95, r.Default.P95ExtraLatency), append(bestP95, r.Best.P95ExtraLatency)
		if r.MinReplicas == 0 {
			f.toZero++
			f.net += int64(float64(r.Best.NetSavingMicros) * 30 / d)
		}
	}
	med := func(xs []time.Duration) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		return xs[len(xs)/2]
	}
	f.defP95, f.bestP95 = med(defP95), med(bestP95)
	return f
}

// SpreadFigures are the mean [min-max] of each figure over seeds, as
// tab-separated cells.
func SpreadFigures(fs []ModelFigures) string {
	cell := func(get func(ModelFigures) float64, format string) string {
		lo, hi, sum := get(fs[0]), get(fs[0]), 0.0
		for _, f := range fs {
			v := get(f)
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		if len(fs) == 1 || lo == hi {
			return fmt.Sprintf(format, sum/float64(len(fs)))
		}
		return fmt.Sprintf(format+" ["+format+"-"+format+"]", sum/float64(len(fs)), lo, hi)
	}
	dur := func(get func(ModelFigures) time.Duration) string {
		return cell(func(f ModelFigures) float64 { return get(f).Seconds() }, "%.0fs")
	}
	return strings.Join([]string{
		cell(func(f ModelFigures) float64 { return f.alwaysOn }, "%.0f"),
		cell(func(f ModelFigures) float64 { return f.defSaved }, "%.0f"),
		cell(func(f ModelFigures) float64 { return f.defCold }, "%.0f"),
		dur(func(f ModelFigures) time.Duration { return f.defP95 }),
		cell(func(f ModelFigures) float64 { return f.bestSaved }, "%.0f"),
		cell(func(f ModelFigures) float64 { return f.bestCold }, "%.0f"),
		dur(func(f ModelFigures) time.Duration { return f.bestP95 }),
		cell(func(f ModelFigures) float64 { return float64(f.toZero) }, "%.0f"),
		cell(func(f ModelFigures) float64 { return float64(f.net) / 1e6 }, "%.0f"),
	}, "\t") + "\t"
}

// PrewarmText writes pre-warm windows as "07-09h 17-19h".
func PrewarmText(ws []DailyWindow) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%02d-%02dh", int(w.From.Hours()), int(w.To.Hours())))
	}
	return strings.Join(parts, " ")
}

// KEDAName makes a Kubernetes name of an endpoint's: model/client →
// model-client.
func KEDAName(s string) string {
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(s))
}

// ParseColdStarts reads a comma-separated list of model=GPUs:load (such as
// m-small=1:30s): each model's replica size in GPUs and the time a cold
// replica takes to load, each cold start costing penaltyMicros.
func ParseColdStarts(v string, penaltyMicros int64) (map[string]ColdStart, error) {
	out := map[string]ColdStart{}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		model, spec, ok := strings.Cut(item, "=")
		g, l, ok2 := strings.Cut(spec, ":")
		gpus, err1 := strconv.Atoi(g)
		load, err2 := time.ParseDuration(l)
		if !ok || !ok2 || model == "" || err1 != nil || gpus < 1 || err2 != nil || load < 0 {
			return nil, fmt.Errorf("item %q: want model=GPUs:load such as m-small=1:30s (GPUs a whole number of at least 1, load a duration)", item)
		}
		out[model] = ColdStart{Load: load, GPUsPerReplica: float64(gpus), PenaltyMicros: penaltyMicros}
	}
	return out, nil
}
