package sim

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"time"
)

// ReplayResult is what a policy achieved.
type ReplayResult struct {
	Policy     string `json:"policy"`
	Gating     bool   `json:"gating"`
	Preemption bool   `json:"preemption"`
	Jobs       int    `json:"jobs"`
	// GPUs is the cluster's GPUs as built.
	GPUs     int `json:"gpus"`
	Finished int `json:"finished"`
	// AvgJCTSeconds and P95JCTSeconds are over finished jobs: finish − submit.
	AvgJCTSeconds float64 `json:"avgJctSeconds"`
	P95JCTSeconds float64 `json:"p95JctSeconds"`
	// WaitBySize is the mean wait (last start − submit) per size class.
	WaitBySize map[string]float64 `json:"meanWaitSecondsBySize"`
	// MaxWaitByQueue is the longest wait of a finished job per queue;
	// MaxWaitSeconds the longest of all (starvation shows here).
	MaxWaitByQueue map[string]float64 `json:"maxWaitSecondsByQueue"`
	MaxWaitSeconds float64            `json:"maxWaitSeconds"`
	// Utilization is GPU time of running jobs over GPUs × makespan (the
	// drain after the last submission included); UtilizationWindow the
	// same over the submission window alone (to the last submission).
	Utilization       float64 `json:"utilization"`
	UtilizationWindow float64 `json:"utilizationWindow"`
	// Jain is Jain's fairness index over each queue's GPU time divided by
	// its nominal quota, over the whole replay.
	Jain float64 `json:"jainFairness"`
	// JainCost is the same over each queue's spend divided by the value of
	// its quota (nominal GPUs × their price): fairness in money. It differs
	// from Jain only on a heterogeneous cluster.
	JainCost float64 `json:"jainCost"`
	// JainBacklogged is Jain's index of each queue's spend rate (the GPUs
	// it holds at their prices) over its entitlement (its nominal quota at
	// the same prices), over the queues that contend (work waiting, or holding
	// more than their quota), sampled every SampleEvery that some queue has work
	// waiting, averaged: queues that all want more should hold in
	// proportion to their quotas, and a borrower should not keep a waiting
	// queue's quota.
	JainBacklogged float64 `json:"jainBacklogged"`
	// MoneyGap is money-fairness (moneyGaps), sampled every SampleEvery
	// of the submission window (the drain apart) that two or more queues
	// have work waiting: the mean of the largest
	// gap between a backlogged queue's share of the backlogged queues'
	// spend and its share of their entitlements (its nominal quota's
	// value), a fraction (0.05: 5 points); MoneyGapP95 its 95th
	// percentile; MoneyGapSamples how many samples it is over, and
	// MoneyGapStarved how many more had the backlogged queues holding
	// nothing (no shares to compare).
	MoneyGap        float64 `json:"moneyGap"`
	MoneyGapP95     float64 `json:"moneyGapP95"`
	MoneyGapSamples int     `json:"moneyGapSamples"`
	MoneyGapStarved int     `json:"moneyGapStarved"`
	// IdlePaidGPUHours is GPU time held idle while another queue had
	// work waiting: the idle share of idle-holding jobs (TraceJob.Idle)
	// and the GPUs partial gangs hold for their missing pods.
	IdlePaidGPUHours float64 `json:"idlePaidGpuHours"`
	// FinishTimeFairness is Themis' ρ: a job's completion time here over
	// its completion time with its queue alone on its nominal quota.
	// FTFMean is the mean over jobs; FTFMaxQueue the largest per-queue
	// mean (the worst-treated team; lower is fairer). Jobs that cannot
	// finish alone (larger than the quota) are left out.
	FTFMean     float64 `json:"finishTimeFairnessMean,omitempty"`
	FTFMaxQueue float64 `json:"finishTimeFairnessMaxQueue,omitempty"`
	// PartialGangGPUHours is GPU time held by jobs whose pods were not all
	// placed yet.
	PartialGangGPUHours float64 `json:"partialGangGpuHours"`
	// Evictions counts gangs evicted by ReadyTimeout.
	Evictions int `json:"evictions"`
	// Preemptions counts jobs preempted; PreemptedGPUHours is the work
	// they lost.
	Preemptions       int     `json:"preemptions"`
	PreemptedGPUHours float64 `json:"preemptedGpuHours"`
	// CostMicrosByQueue is each queue's GPU time at the price.
	CostMicrosByQueue map[string]int64 `json:"costMicrosByQueue"`
	// LedgerHours is how many hours the closed loop wrote to the Store,
	// from that many hours of scrapes (0 without it).
	LedgerHours int           `json:"ledgerHours,omitempty"`
	Scrapes     int           `json:"scrapes,omitempty"`
	Makespan    time.Duration `json:"-"`
	// Outcomes are the jobs that started, in submission order, on the
	// replay's clock: for comparing the replay with another run of the
	// same jobs (a real Kueue) job by job.
	Outcomes []JobOutcome `json:"-"`
	jct      map[string]float64
}

// JobOutcome is what became of one job: when it was submitted, started
// (its last start) and finished (0: still running at the end), on which
// flavor.
type JobOutcome struct {
	ID, Queue, Flavor     string
	GPUs                  int
	Submit, Start, Finish time.Duration
}

func sizeClass(gpus int) string {
	switch {
	case gpus == 1:
		return "1"
	case gpus <= 4:
		return "2-4"
	case gpus <= 8:
		return "5-8"
	}
	return ">8"
}

// sampleJain takes one sample of JainBacklogged: when some queue has work
// waiting, Jain's index of held/nominal over the queues that contend: those
// with work waiting and those holding more than their quota.
func (r *replay) sampleJain() {
	var xs []float64
	waiting := false
	for _, q := range r.names {
		nominal := r.model.nominal[q]
		used := r.held(q)
		if r.queues.In(q) <= 0 && used <= int64(nominal) {
			continue
		}
		waiting = waiting || r.queues.In(q) > 0
		xs = append(xs, r.spendRate(q)/r.model.value[q])
	}
	if !waiting {
		return
	}
	if r.nextJain <= r.window {
		r.sampleMoneyGap()
	}
	r.jainN++
	j := jainIndex(xs)
	if j == 0 {
		j = 1 // all hold nothing: equal
	}
	r.jainSum += j
}

// sampleMoneyGap takes one sample of MoneyGap.
func (r *replay) sampleMoneyGap() {
	var backlogged []string
	spend, entitled := map[string]float64{}, map[string]float64{}
	for _, q := range r.names {
		if r.queues.In(q) <= 0 {
			continue
		}
		backlogged = append(backlogged, q)
		spend[q], entitled[q] = r.spendRate(q), r.model.value[q]
	}
	r.gaps.sample(backlogged, spend, entitled)
}

// spendRate is what queue q's held GPUs cost now, at their flavors' rates.
func (r *replay) spendRate(q string) float64 {
	var rate float64
	for _, fr := range r.model.resources {
		rate += float64(r.snap.Usage[q][fr]) * r.model.Rates[fr]
	}
	return rate
}

// jainIndex is Jain's fairness index of xs, (Σx)² / (n·Σx²); 0 when every
// x is 0.
func jainIndex(xs []float64) float64 {
	var s1, s2 float64
	for _, x := range xs {
		s1 += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s1 * s1 / (float64(len(xs)) * s2)
}

func (r *replay) result(jobs int) ReplayResult {
	o := r.opts
	res := ReplayResult{Policy: o.Policy, Gating: o.Gating, Preemption: o.Preemption, Jobs: jobs, GPUs: r.model.capacity, Finished: len(r.jcts), Makespan: r.now,
		Evictions: r.evictions, Preemptions: r.preempted, PreemptedGPUHours: r.lostSec / 3600,
		WaitBySize: map[string]float64{}, MaxWaitByQueue: r.maxWait, CostMicrosByQueue: map[string]int64{}, PartialGangGPUHours: r.heldSec / 3600, IdlePaidGPUHours: r.idlePaidSec / 3600, jct: r.jcts}
	if len(r.jcts) > 0 {
		all := make([]float64, 0, len(r.jcts))
		var sum float64
		for _, v := range r.jcts {
			all = append(all, v)
		}
		sort.Float64s(all)
		for _, v := range all {
			sum += v
		}
		res.AvgJCTSeconds = sum / float64(len(all))
		res.P95JCTSeconds = all[int(math.Ceil(0.95*float64(len(all))))-1]
	}
	for c, ws := range r.waits {
		var sum float64
		for _, v := range ws {
			sum += v
		}
		res.WaitBySize[c] = sum / float64(len(ws))
	}
	if r.now > 0 {
		res.Utilization = r.busySec / (float64(r.model.capacity) * r.now.Seconds())
	}
	if w := min(r.window, r.now); w > 0 {
		res.UtilizationWindow = r.busyWindowSec / (float64(r.model.capacity) * w.Seconds())
	}
	var byTime, byCost []float64
	for _, q := range r.names {
		byTime = append(byTime, r.usedSec[q]/float64(r.model.nominal[q]))
		byCost = append(byCost, r.usedCost[q]/r.model.value[q])
		res.CostMicrosByQueue[q] = int64(math.Round(r.usedCost[q]))
	}
	for _, w := range r.maxWait {
		res.MaxWaitSeconds = max(res.MaxWaitSeconds, w)
	}
	res.Jain = jainIndex(byTime)
	res.JainCost = jainIndex(byCost)
	if r.jainN > 0 {
		res.JainBacklogged = r.jainSum / float64(r.jainN)
	}
	res.MoneyGap, res.MoneyGapP95, res.MoneyGapSamples, res.MoneyGapStarved = r.gaps.result()
	if o.Isolated != nil {
		perQueue := map[string][2]float64{}
		var sum float64
		n := 0
		ids := make([]string, 0, len(r.jcts))
		for id := range r.jcts {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			iso, ok := o.Isolated[id]
			if !ok || iso <= 0 {
				continue
			}
			rho := r.jcts[id] / iso
			sum += rho
			n++
			q := r.byID[id].Queue
			perQueue[q] = [2]float64{perQueue[q][0] + rho, perQueue[q][1] + 1}
		}
		if n > 0 {
			res.FTFMean = sum / float64(n)
		}
		for _, q := range r.names {
			if v := perQueue[q]; v[1] > 0 {
				res.FTFMaxQueue = max(res.FTFMaxQueue, v[0]/v[1])
			}
		}
	}
	for _, j := range r.jobs {
		if j.run == nil {
			continue
		}
		o := JobOutcome{ID: j.ID, Queue: j.Queue, Flavor: j.fr.Flavor, GPUs: j.GPUs, Submit: j.Submit, Start: j.start}
		if jct, ok := r.jcts[j.ID]; ok {
			o.Finish = j.Submit + time.Duration(jct*float64(time.Second))
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	if r.loop != nil {
		res.LedgerHours = int(r.loop.written.Sub(o.Epoch) / time.Hour)
		res.Scrapes = r.loop.scrapes
	}
	return res
}

// IsolatedJCT replays each queue alone on its nominal quota (no cohort,
// FIFO, gangs gated) and returns every job's completion time there, the
// denominator of finish-time fairness. Jobs larger than their queue's
// quota cannot finish alone and are absent.
func IsolatedJCT(queues []TraceQueue, jobs []TraceJob, opts ReplayOptions) (map[string]float64, error) {
	byQueue := map[string][]TraceJob{}
	for _, j := range jobs {
		byQueue[j.Queue] = append(byQueue[j.Queue], j)
	}
	out := map[string]float64{}
	for _, q := range queues {
		alone := q
		alone.Cohort, alone.BorrowingLimit = "", 0
		o := ReplayOptions{Policy: "fifo", Gating: true, NodeSize: opts.NodeSize, CapacityScale: opts.CapacityScale, Limit: opts.Limit, Flavors: opts.Flavors}
		res, err := Replay([]TraceQueue{alone}, byQueue[q.Name], o)
		if err != nil {
			return nil, fmt.Errorf("queue %s alone: %w", q.Name, err)
		}
		maps.Copy(out, res.jct)
	}
	return out, nil
}
