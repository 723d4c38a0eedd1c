package capacity

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// WaitRule is the queue-wait trigger: fire for a ClusterQueue when the
// Quantile of its workloads' waits for admission is over Threshold over
// the whole Window and over its last day too (so a queue that has caught
// up does not fire on last week's backlog). The waits are those of the
// workloads admitted in the period (Kueue's histogram) and of those still
// pending at its end, at how long they have waited so far: a queue whose
// workloads wait for hours fires while they wait, not only once they are
// admitted. As with Rule, the ledger must have the queue from before the
// window began and for MinCoverage of its hours.
type WaitRule struct {
	Quantile    float64
	Threshold   time.Duration
	Window      time.Duration
	MinCoverage float64
	// Busy is the share of the GPU time the queue's own pods held that
	// must have been busy for its waits to call for buying: a queue that
	// waits while its own GPUs sit idle (notebooks left open) needs them
	// given back, not more (the verdict is reclaim). Default 0.8, the
	// utilisation rule's threshold.
	Busy float64
	// PurchaseGPUs is the block an expansion buys.
	PurchaseGPUs int
}

// DefaultWaitRule: the p90 wait over 30 minutes over a week and its last
// day, 95% of the hours present, the queue's own GPUs 80% busy, blocks
// of 72 GPUs.
var DefaultWaitRule = WaitRule{Quantile: 0.9, Threshold: 30 * time.Minute, Window: 7 * 24 * time.Hour, MinCoverage: 0.95, Busy: 0.8, PurchaseGPUs: 72}

// QueueWait is the wait trigger's verdict on one ClusterQueue.
type QueueWait struct {
	ClusterQueue string
	// Flavor is the flavor the queue's workloads ran on most in the
	// window (by GPU time held): the one to buy more of.
	Flavor string
	Verdict
	// Wait is the window's quantile wait and LastDay its last day's, in
	// seconds (NaN: no workload admitted or pending).
	Wait, LastDay float64
	// Admitted is how many workloads were admitted in the window; Pending
	// how many were pending at its end (per the controller's ages) and
	// PendingGPUs the mean GPUs they asked for over the last day.
	Admitted, Pending, PendingGPUs float64
	// Daily is the quantile wait of each day of the window, oldest first.
	Daily []DayWait
}

// DayWait is one day's quantile wait (seconds; NaN when nothing waited)
// and how many workloads were admitted that day.
type DayWait struct {
	Day      time.Time
	Wait     float64
	Admitted float64
}

// dayWaits is a day's admitted waits and the pending ones at its last
// hour.
type dayWaits struct {
	admitted, pending ledger.Histogram
	lastHour          time.Time
}

// QueueUse is what a ClusterQueue's pods held of its flavor over the
// window, and how they used it (GPU-seconds).
type QueueUse struct {
	Flavor                   string
	Held, Active, Unmeasured float64
	Holders                  []IdleHolder
}

// Waits evaluates the wait rule at now for every ClusterQueue in rows,
// with the flavor each queue runs on and what its pods held of it over the
// window, and each flavor's price per GPU-hour.
func Waits(rows []ledger.QueueRow, use map[string]QueueUse, now time.Time, r WaitRule, priceMicrosPerGPUHour map[string]int64) []QueueWait {
	if r.Busy == 0 {
		r.Busy = DefaultWaitRule.Busy
	}
	to := now.UTC().Truncate(time.Hour)
	from := to.Add(-r.Window)
	byQueue := map[string][]ledger.QueueRow{}
	for _, q := range rows {
		if q.Hour.Before(to) {
			byQueue[q.ClusterQueue] = append(byQueue[q.ClusterQueue], q)
		}
	}
	var out []QueueWait
	for _, cq := range slices.Sorted(maps.Keys(byQueue)) {
		hours := byQueue[cq]
		sort.Slice(hours, func(i, j int) bool { return hours[i].Hour.Before(hours[j].Hour) })
		u := use[cq]
		w := QueueWait{ClusterQueue: cq, Flavor: u.Flavor,
			Verdict: newVerdict(to, r.Window, hours[0].Hour, r.PurchaseGPUs, priceMicrosPerGPUHour[u.Flavor])}
		// The window's admitted waits, and its last day's.
		var window, lastDayWaits ledger.Histogram
		var last ledger.QueueRow
		days := map[time.Time]*dayWaits{}
		seen := map[time.Time]bool{}
		lastDay := to.Add(-24 * time.Hour)
		var pendingGPUs float64
		var pendingHours int
		for _, h := range hours {
			day := h.Hour.Truncate(24 * time.Hour)
			d := days[day]
			if d == nil {
				d = &dayWaits{}
				days[day] = d
			}
			d.admitted = d.admitted.Add(h.AdmittedWait)
			if !h.Hour.Before(d.lastHour) {
				d.pending, d.lastHour = h.PendingWait, h.Hour
			}
			if !h.Hour.Before(lastDay) {
				lastDayWaits = lastDayWaits.Add(h.AdmittedWait)
			}
			if h.Hour.Before(from) {
				continue
			}
			seen[h.Hour] = true
			window = window.Add(h.AdmittedWait)
			w.Admitted += h.Admitted
			last = h
			if !h.Hour.Before(lastDay) {
				pendingGPUs += h.PendingGPUs
				pendingHours++
			}
		}
		w.HoursWithData = len(seen)
		w.Pending = last.PendingWait.Total()
		if pendingHours > 0 {
			w.PendingGPUs = pendingGPUs / float64(pendingHours)
		}
		// Both with what was pending at the window's end.
		w.Wait = window.Add(last.PendingWait).Quantile(r.Quantile)
		w.LastDay = lastDayWaits.Add(last.PendingWait).Quantile(r.Quantile)
		var xs, ys []float64
		for _, d := range slices.SortedFunc(maps.Keys(days), time.Time.Compare) {
			dd := days[d]
			q := dd.admitted.Add(dd.pending).Quantile(r.Quantile)
			if !d.Before(from.Truncate(24 * time.Hour)) {
				w.Daily = append(w.Daily, DayWait{Day: d, Wait: q, Admitted: dd.admitted.Total()})
			}
			if !math.IsNaN(q) {
				xs, ys = append(xs, d.Sub(from).Hours()/24), append(ys, q)
			}
		}
		threshold := r.Threshold.Seconds()
		switch short := w.notEnough("queue "+cq, r.MinCoverage); {
		case short != "":
			w.Why = short
		case w.Wait > threshold && w.LastDay > threshold:
			waited := fmt.Sprintf("p%.0f wait for admission in %s %s from %s to %s (%s on the last day; %.0f admitted, %.0f still pending), over %s",
				100*r.Quantile, cq, Duration(w.Wait), from.Format(time.DateOnly), to.Format(time.DateOnly), Duration(w.LastDay), w.Admitted, w.Pending,
				Duration(threshold))
			if measured := u.Held - u.Unmeasured; measured > 0 && u.Active/measured < r.Busy {
				w.Action = ActionReclaim
				w.Reclaim = reclaimOf(u.Held, u.Active, u.Unmeasured, int(r.Window/time.Hour), u.Holders, priceMicrosPerGPUHour[u.Flavor])
				w.Why = fmt.Sprintf("%s, while its own %s GPUs were %.1f%% busy (%.1f held idle on average, %s a month): give those back first",
					waited, u.Flavor, 100*w.Reclaim.HeldActive, w.Reclaim.IdleGPUs, ledger.FormatCents(w.Reclaim.IdleCostMonthlyMicros))
				break
			}
			w.Fired, w.Action = true, ActionBuy
			w.Why = waited
		case w.Wait > threshold:
			w.Why = fmt.Sprintf("p%.0f wait %s over the window, but %s on its last day: the queue has caught up", 100*r.Quantile,
				Duration(w.Wait), Duration(w.LastDay))
		case math.IsNaN(w.Wait):
			w.Why = "no workload admitted or pending in the window"
		default:
			w.Why = fmt.Sprintf("p%.0f wait %s over the window, not over %s", 100*r.Quantile, Duration(w.Wait), Duration(threshold))
		}
		if w.Flavor == "" && w.Fired {
			w.Why += "; no flavor is known for the queue (none of its workloads ran in the window), so no price"
		}
		if w.Action == "" {
			w.Forecast = forecast(xs, ys, threshold, from, to)
		}
		out = append(out, w)
	}
	return out
}

// Duration writes seconds as minutes or hours ("-" for NaN).
func Duration(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s >= 2*3600:
		return fmt.Sprintf("%.1f h", s/3600)
	}
	return fmt.Sprintf("%.0f min", s/60)
}

// QueueUses reads from the ledger, for each ClusterQueue, the flavor its
// workloads held the most GPU time on in [from, to), what they held of
// it, how busy it was, and the namespaces holding it idle (holders, by
// flavor, from ReadHolders).
func QueueUses(ctx context.Context, s ledger.Store, cluster string, from, to time.Time, holders map[string][]IdleHolder) (map[string]QueueUse, error) {
	rows, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepMonth, Cluster: cluster,
		GroupBy: []ledger.Dimension{ledger.DimClusterQueue, ledger.DimFlavor}})
	if err != nil {
		return nil, fmt.Errorf("read the queues' flavors from the ledger: %w", err)
	}
	type key struct{ cq, flavor string }
	use := map[key]QueueUse{}
	for _, r := range rows {
		if r.ClusterQueue == "" || r.Team == ledger.TeamUnallocated {
			continue
		}
		k := key{r.ClusterQueue, r.Flavor}
		u := use[k]
		u.Flavor = r.Flavor
		u.Held += r.GPUSeconds
		u.Active += r.ActiveGPUSeconds
		u.Unmeasured += r.UnmeasuredGPUSeconds
		use[k] = u
	}
	best := map[string]QueueUse{}
	for k, u := range use {
		cur, ok := best[k.cq]
		if !ok || u.Held > cur.Held || u.Held == cur.Held && u.Flavor < cur.Flavor {
			best[k.cq] = u
		}
	}
	for cq, u := range best {
		for _, h := range holders[u.Flavor] {
			if h.ClusterQueue == cq {
				u.Holders = append(u.Holders, h)
			}
		}
		best[cq] = u
	}
	return best, nil
}

// EvaluateWaits reads the cluster's queue hours (the window, and a year
// for the trend) and the queues' flavors from the ledger, and evaluates
// the wait rule at now.
func EvaluateWaits(ctx context.Context, s ledger.Store, cluster string, now time.Time, r WaitRule, priceMicrosPerGPUHour map[string]int64) ([]QueueWait, error) {
	to := now.UTC().Truncate(time.Hour)
	rows, err := s.QueueHours(ctx, cluster, to.Add(-max(r.Window, 90*24*time.Hour)), to)
	if err != nil {
		return nil, fmt.Errorf("read the queues' hours from the ledger: %w", err)
	}
	holders, err := ReadHolders(ctx, s, cluster, to.Add(-r.Window), to, priceMicrosPerGPUHour)
	if err != nil {
		return nil, err
	}
	use, err := QueueUses(ctx, s, cluster, to.Add(-r.Window), to, holders)
	if err != nil {
		return nil, err
	}
	return Waits(rows, use, now, r, priceMicrosPerGPUHour), nil
}
