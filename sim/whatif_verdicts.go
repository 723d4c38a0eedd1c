package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// WhatIfWindow is how far back the what-if replays the workloads.
const WhatIfWindow = 30 * 24 * time.Hour

// WhatIfs replays the last WhatIfWindow's workloads (their times in the
// ledger) through the admission core with each fired verdict's block, sets
// the verdict's WhatIf to what it would have done, and returns those
// sentences, for a buy and for a reclaim verdict alike: on the same
// replay, reclaiming (the configuration's culling policy ending the
// workloads whose GPUs stayed idle, from the ledger's hourly workload
// rows) against buying the block. Without workload times in the ledger it says so once.
func WhatIfs(ctx context.Context, store ledger.Store, cfg *config.Config, cluster string, now time.Time,
	recs []capacity.Recommendation, waits []capacity.QueueWait) ([]string, error) {
	type target struct {
		v      *capacity.Verdict
		flavor string
		queues []string
	}
	var targets []target
	for i := range recs {
		if recs[i].Fired || recs[i].Action == capacity.ActionReclaim {
			targets = append(targets, target{&recs[i].Verdict, recs[i].Flavor, nil})
		}
	}
	for i := range waits {
		if (waits[i].Fired || waits[i].Action == capacity.ActionReclaim) && waits[i].Flavor != "" {
			targets = append(targets, target{&waits[i].Verdict, waits[i].Flavor, []string{waits[i].ClusterQueue}})
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	to := now.UTC().Truncate(time.Hour)
	from := to.Add(-WhatIfWindow)
	// Workloads submitted before the window and still waiting or running
	// in it are carried in: a year back finds the long-lived ones.
	times, err := store.WorkloadTimes(ctx, cluster, from.Add(-carryInLookback), to)
	if err != nil {
		return nil, err
	}
	if len(times) == 0 {
		return []string{"no workload times in the ledger for the last 30 days (gpuledger controller records them): no what-if"}, nil
	}
	idleFor := reclaimIdle(cfg.Capacity)
	hours, err := workloadHours(ctx, store, cluster, from, to)
	if err != nil {
		return nil, err
	}
	cull, joined := CullAfter(times, hours, idleFor, cullBusyBelow)
	cur := cfg.Currency
	var out []string
	for _, t := range targets {
		wi, err := ReplayWhatIf(cfg, cluster, times, WhatIfQuery{Flavor: t.flavor, GPUs: t.v.PurchaseGPUs, Queues: t.queues,
			From: from, To: to, Since: t.v.From, Cull: cull})
		if err != nil {
			t.v.WhatIf = err.Error()
			out = append(out, t.v.WhatIf)
			continue
		}
		outcome := func(b, a *WhatIfOutcome) string {
			var s strings.Builder
			for _, q := range t.queues {
				fmt.Fprintf(&s, "%s's p90 wait (admitted since %s, or waiting) %s -> %s, ", q, t.v.From.Format(time.DateOnly),
					capacity.Duration(b.QueueWaitP90[q]), capacity.Duration(a.QueueWaitP90[q]))
			}
			fmt.Fprintf(&s, "the cluster's p90 wait %s -> %s, mean %s -> %s, admitted %d -> %d, still waiting %d -> %d, %s allocated %.1f%% -> %.1f%%",
				capacity.Duration(b.WaitP90), capacity.Duration(a.WaitP90), capacity.Duration(b.WaitMean), capacity.Duration(a.WaitMean),
				b.Admitted, a.Admitted, b.Pending, a.Pending, wi.Flavor, 100*b.Allocated, 100*a.Allocated)
			return s.String()
		}
		replayed := fmt.Sprintf("%d workloads submitted %s to %s, or waiting or running then (%d), replayed from an empty cluster; %d never admitted ran for the others' median",
			wi.Replayed, wi.From.Format(time.DateOnly), wi.To.Format(time.DateOnly), wi.CarriedIn, wi.Guessed)
		buy := fmt.Sprintf("+%d %s GPUs (%d nodes) as quota of %s: %s", wi.GPUs, wi.Flavor, wi.Nodes, strings.Join(wi.Queues, ", "), outcome(&wi.Before, &wi.After))
		rc := wi.Reclaimed
		t.v.WhatIf = fmt.Sprintf("reclaim or buy, on one replay (%s): reclaim, a culling policy ending each workload (not a serving ReplicaSet or Deployment) whose GPUs were busy under %.0f%% for %s (%d workloads joined to their hourly rows; %d ended early, %.0f GPU-hours a month freed): %s, +0.00 %s a month; buy %s, +%s %s a month",
			replayed, 100*cullBusyBelow, capacity.Duration(idleFor.Seconds()), joined, rc.Culled, rc.FreedGPUHoursMonth,
			outcome(&wi.Before, &rc.WhatIfOutcome), cur, buy, ledger.FormatCents(t.v.MonthlyCostMicros), cur)
		out = append(out, t.v.WhatIf)
	}
	return out, nil
}

// carryInLookback is how far before the what-if's window it looks for
// workloads still waiting or running in it.
const carryInLookback = 365 * 24 * time.Hour

// cullBusyBelow is how busy (DCGM's activity over the measured GPU time)
// an hour of a workload may be and still count as idle for the culling
// policy of the reclaim what-if.
const cullBusyBelow = 0.05

// reclaimIdle is the configuration's culling policy: how long a
// workload's GPUs stay idle before it is ended.
func reclaimIdle(c *config.Capacity) time.Duration {
	if c != nil && c.ReclaimIdleMinutes > 0 {
		return time.Duration(c.ReclaimIdleMinutes) * time.Minute
	}
	return time.Hour
}

// workloadHours reads the ledger's workload rows of [from, to) hour by
// hour: each owner's GPU time held, busy and unmeasured in each hour.
func workloadHours(ctx context.Context, store ledger.Store, cluster string, from, to time.Time) ([]ledger.WorkloadRow, error) {
	var out []ledger.WorkloadRow
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		rows, err := store.TopWorkloads(ctx, ledger.Query{From: h, To: h.Add(time.Hour), Step: ledger.StepHour, Cluster: cluster}, math.MaxInt32)
		if err != nil {
			return nil, fmt.Errorf("read the workloads of %s: %w", h.Format(time.RFC3339), err)
		}
		out = append(out, rows...)
	}
	return out, nil
}
