package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// WorkloadTimes is one job of a Model.Run as Kueue sees it: what the
// ledger records of it (its LocalQueue and request, when it was submitted,
// admitted and finished, zero for what did not happen within the run),
// its ClusterQueue and the GPUs it asks for.
type WorkloadTimes struct {
	ledger.WorkloadTime
	ClusterQueue string
	GPUs         float64
}

// kueueSeries renders, scrape by scrape, what Kueue's metrics endpoint
// says of the queues (kueue_pending_workloads and
// kueue_admission_wait_time_seconds of the leader replica) and what
// gpuledger controller's says of the pending workloads
// (gpuledger_pending_workload_gpus and gpuledger_pending_workload_age_seconds),
// from the run's workload times.
type kueueSeries struct {
	wls     []WorkloadTimes // by submit time
	next    int             // the first not yet submitted
	pending []int           // submitted, not yet admitted
	cqs     []string
	// counts are the cumulative bucket counts of each ClusterQueue's
	// admitted workloads' waits, and sums their sum (Kueue's histogram
	// counts from its start: the run's).
	counts map[string][]int
	sums   map[string]float64
}

func newKueueSeries(wls []WorkloadTimes) *kueueSeries {
	k := &kueueSeries{wls: slices.Clone(wls), counts: map[string][]int{}, sums: map[string]float64{}}
	slices.SortStableFunc(k.wls, func(a, b WorkloadTimes) int { return a.Submit.Compare(b.Submit) })
	for _, w := range k.wls {
		if _, ok := k.counts[w.ClusterQueue]; !ok {
			k.cqs = append(k.cqs, w.ClusterQueue)
			k.counts[w.ClusterQueue] = make([]int, len(admission.WaitBuckets))
		}
	}
	slices.Sort(k.cqs)
	return k
}

// appendScrape advances to at and appends the families' lines.
func (k *kueueSeries) appendScrape(dst []byte, at time.Time) []byte {
	for k.next < len(k.wls) && !k.wls[k.next].Submit.After(at) {
		k.pending = append(k.pending, k.next)
		k.next++
	}
	k.pending = slices.DeleteFunc(k.pending, func(i int) bool {
		w := &k.wls[i]
		if w.Admit.IsZero() || w.Admit.After(at) {
			return false
		}
		wait := w.Admit.Sub(w.Submit).Seconds()
		for b, le := range admission.WaitBuckets {
			if wait <= le {
				k.counts[w.ClusterQueue][b]++
			}
		}
		k.sums[w.ClusterQueue] += wait
		return true
	})
	pending := map[string]int{}
	gpus := map[string]float64{}
	ages := map[string][]float64{}
	for _, i := range k.pending {
		w := &k.wls[i]
		pending[w.ClusterQueue]++
		gpus[w.ClusterQueue] += w.GPUs
		ages[w.ClusterQueue] = append(ages[w.ClusterQueue], at.Sub(w.Submit).Seconds())
	}
	dst = append(dst, "# HELP kueue_pending_workloads The number of pending workloads, per 'cluster_queue' and 'status'.\n# TYPE kueue_pending_workloads gauge\n"...)
	for _, cq := range k.cqs {
		dst = fmt.Appendf(dst, "kueue_pending_workloads{cluster_queue=%q,replica_role=\"leader\",status=\"active\"} %d\n", cq, pending[cq])
		dst = fmt.Appendf(dst, "kueue_pending_workloads{cluster_queue=%q,replica_role=\"leader\",status=\"inadmissible\"} 0\n", cq)
	}
	dst = append(dst, "# HELP kueue_admission_wait_time_seconds The time between a workload was created or requeued until admission, per 'cluster_queue'\n# TYPE kueue_admission_wait_time_seconds histogram\n"...)
	for _, cq := range k.cqs {
		c := k.counts[cq]
		for b, le := range admission.WaitBuckets {
			dst = appendBucket(dst, "kueue_admission_wait_time_seconds_bucket{cluster_queue=", cq, `,priority_class="",replica_role="leader",le=`, le, c[b])
		}
		dst = fmt.Appendf(dst, "kueue_admission_wait_time_seconds_sum{cluster_queue=%q,priority_class=\"\",replica_role=\"leader\"} %g\n", cq, k.sums[cq])
		dst = fmt.Appendf(dst, "kueue_admission_wait_time_seconds_count{cluster_queue=%q,priority_class=\"\",replica_role=\"leader\"} %d\n", cq, c[len(c)-1])
	}
	dst = append(dst, "# HELP gpuledger_pending_workload_gpus GPUs the ClusterQueue's pending (not admitted) Workloads ask for.\n# TYPE gpuledger_pending_workload_gpus gauge\n"...)
	for _, cq := range k.cqs {
		dst = fmt.Appendf(dst, "gpuledger_pending_workload_gpus{cluster_queue=%q} %g\n", cq, gpus[cq])
	}
	dst = append(dst, "# HELP gpuledger_pending_workload_age_seconds How long the ClusterQueue's pending Workloads have waited so far.\n# TYPE gpuledger_pending_workload_age_seconds gauge\n"...)
	for _, cq := range k.cqs {
		c := admission.CumulativeCounts(ages[cq])
		for b, le := range admission.WaitBuckets {
			dst = appendBucket(dst, "gpuledger_pending_workload_age_seconds_bucket{cluster_queue=", cq, ",le=", le, c[b])
		}
	}
	return dst
}

// appendBucket appends a bucket's line: head, the ClusterQueue quoted,
// mid, the bound quoted, and the count (what fmt's %q and %d write, at a
// fraction of its cost: these lines are most of a scrape's Kueue series).
func appendBucket(dst []byte, head, cq, mid string, le float64, n int) []byte {
	dst = append(dst, head...)
	dst = strconv.AppendQuote(dst, cq)
	dst = append(dst, mid...)
	dst = strconv.AppendQuote(dst, bound(le))
	dst = append(dst, "} "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\n')
}

// bound writes a bucket bound as Prometheus does: +Inf, or the number.
func bound(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le, 'g', -1, 64)
}
