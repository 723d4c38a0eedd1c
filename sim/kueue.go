package sim

import (
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
	cq      []int           // each workload's index in cqs
	next    int             // the first not yet submitted
	pending []int           // submitted, not yet admitted
	cqs     []string
	// counts are the cumulative bucket counts of each ClusterQueue's
	// admitted workloads' waits, and sums their sum (Kueue's histogram
	// counts from its start: the run's).
	counts [][]int
	sums   []float64
	// heads are each ClusterQueue's lines up to the value, rendered once:
	// a scrape appends only the values.
	heads []kueueHeads
	// per scrape, by ClusterQueue: pending workloads, their GPUs and ages.
	nPending []int
	gpus     []float64
	ages     [][]float64
}

type kueueHeads struct {
	active, inadmissible, sum, count, gpus []byte
	wait, age                              [][]byte // by bucket
}

func newKueueSeries(wls []WorkloadTimes) *kueueSeries {
	k := &kueueSeries{wls: slices.Clone(wls)}
	slices.SortStableFunc(k.wls, func(a, b WorkloadTimes) int { return a.Submit.Compare(b.Submit) })
	for _, w := range k.wls {
		if !slices.Contains(k.cqs, w.ClusterQueue) {
			k.cqs = append(k.cqs, w.ClusterQueue)
		}
	}
	slices.Sort(k.cqs)
	k.cq = make([]int, len(k.wls))
	for i, w := range k.wls {
		k.cq[i], _ = slices.BinarySearch(k.cqs, w.ClusterQueue)
	}
	n := len(k.cqs)
	k.counts, k.sums, k.nPending, k.gpus, k.ages = make([][]int, n), make([]float64, n), make([]int, n), make([]float64, n), make([][]float64, n)
	k.heads = make([]kueueHeads, n)
	for i, cq := range k.cqs {
		k.counts[i] = make([]int, len(admission.WaitBuckets))
		q := strconv.Quote(cq)
		h := &k.heads[i]
		h.active = []byte("kueue_pending_workloads{cluster_queue=" + q + `,replica_role="leader",status="active"} `)
		h.inadmissible = []byte("kueue_pending_workloads{cluster_queue=" + q + `,replica_role="leader",status="inadmissible"} 0` + "\n")
		h.sum = []byte("kueue_admission_wait_time_seconds_sum{cluster_queue=" + q + `,priority_class="",replica_role="leader"} `)
		h.count = []byte("kueue_admission_wait_time_seconds_count{cluster_queue=" + q + `,priority_class="",replica_role="leader"} `)
		h.gpus = []byte("gpuledger_pending_workload_gpus{cluster_queue=" + q + "} ")
		for _, le := range admission.WaitBuckets {
			b := strconv.Quote(bound(le))
			h.wait = append(h.wait, []byte("kueue_admission_wait_time_seconds_bucket{cluster_queue="+q+`,priority_class="",replica_role="leader",le=`+b+"} "))
			h.age = append(h.age, []byte("gpuledger_pending_workload_age_seconds_bucket{cluster_queue="+q+",le="+b+"} "))
		}
	}
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
				k.counts[k.cq[i]][b]++
			}
		}
		k.sums[k.cq[i]] += wait
		return true
	})
	clear(k.nPending)
	clear(k.gpus)
	for c := range k.ages {
		k.ages[c] = k.ages[c][:0]
	}
	for _, i := range k.pending {
		w, c := &k.wls[i], k.cq[i]
		k.nPending[c]++
		k.gpus[c] += w.GPUs
		k.ages[c] = append(k.ages[c], at.Sub(w.Submit).Seconds())
	}
	dst = append(dst, "# HELP kueue_pending_workloads The number of pending workloads, per 'cluster_queue' and 'status'.\n# TYPE kueue_pending_workloads gauge\n"...)
	for c := range k.cqs {
		h := &k.heads[c]
		dst = append(strconv.AppendInt(append(dst, h.active...), int64(k.nPending[c]), 10), '\n')
		dst = append(dst, h.inadmissible...)
	}
	dst = append(dst, "# HELP kueue_admission_wait_time_seconds The time between a workload was created or requeued until admission, per 'cluster_queue'\n# TYPE kueue_admission_wait_time_seconds histogram\n"...)
	for c := range k.cqs {
		h, n := &k.heads[c], k.counts[c]
		for b := range admission.WaitBuckets {
			dst = append(strconv.AppendInt(append(dst, h.wait[b]...), int64(n[b]), 10), '\n')
		}
		dst = append(strconv.AppendFloat(append(dst, h.sum...), k.sums[c], 'g', -1, 64), '\n')
		dst = append(strconv.AppendInt(append(dst, h.count...), int64(n[len(n)-1]), 10), '\n')
	}
	dst = append(dst, "# HELP gpuledger_pending_workload_gpus GPUs the ClusterQueue's pending (not admitted) Workloads ask for.\n# TYPE gpuledger_pending_workload_gpus gauge\n"...)
	for c := range k.cqs {
		dst = append(strconv.AppendFloat(append(dst, k.heads[c].gpus...), k.gpus[c], 'g', -1, 64), '\n')
	}
	dst = append(dst, "# HELP gpuledger_pending_workload_age_seconds How long the ClusterQueue's pending Workloads have waited so far.\n# TYPE gpuledger_pending_workload_age_seconds gauge\n"...)
	for c := range k.cqs {
		n := admission.CumulativeCounts(k.ages[c])
		for b := range admission.WaitBuckets {
			dst = append(strconv.AppendInt(append(dst, k.heads[c].age[b]...), int64(n[b]), 10), '\n')
		}
	}
	return dst
}

// bound writes a bucket bound as Prometheus does: +Inf, or the number.
func bound(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le, 'g', -1, 64)
}
