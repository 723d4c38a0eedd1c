package ledger

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// QueueRow is one hour of one ClusterQueue's queue: how much waited, for
// how many GPUs, and how long workloads waited for admission. It comes from
// Kueue's metrics (kueue_pending_workloads, kueue_admission_wait_time_seconds)
// and from what gpuledger's controller, or a replay, knows of the workloads
// still pending (their GPU requests and how long they have waited), so that
// a wait over 30 minutes is seen while the workload is still waiting, not
// only once it is admitted.
type QueueRow struct {
	// Hour is the start of the hour, in UTC.
	Hour         time.Time
	Cluster      string
	ClusterQueue string
	// PendingWorkloads is the hour's mean of kueue_pending_workloads,
	// summed over its statuses (active and inadmissible).
	PendingWorkloads float64
	// PendingGPUs is the hour's mean of the GPUs the pending workloads
	// ask for.
	PendingGPUs float64
	// Admitted is how many workloads were admitted in the hour.
	Admitted float64
	// AdmittedWait is the admitted workloads' waits (from creation or
	// requeue to admission): the hour's increase of Kueue's histogram.
	AdmittedWait Histogram
	// PendingWait is how long the workloads still pending at the hour's
	// last report had waited so far: a lower bound of their waits.
	PendingWait Histogram
}

// Histogram is a cumulative histogram in Prometheus' layout: Counts[i] is
// how many observations were at most Bounds[i], and the last bound is +Inf.
// The zero value is empty.
type Histogram struct {
	Bounds []float64
	Counts []float64
}

// histogramJSON is a Histogram in JSON, which has no +Inf: the finite
// bounds, and the counts with the +Inf bucket's last.
type histogramJSON struct {
	Bounds []float64 `json:"le"`
	Counts []float64 `json:"n"`
}

// MarshalJSON writes {"le": finite bounds, "n": counts}, the +Inf count
// last, since JSON has no +Inf.
func (h Histogram) MarshalJSON() ([]byte, error) {
	if err := h.Check(); err != nil {
		return nil, err
	}
	j := histogramJSON{Bounds: []float64{}, Counts: []float64{}}
	if len(h.Bounds) > 0 {
		j.Bounds, j.Counts = h.Bounds[:len(h.Bounds)-1], h.Counts
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes, and checks it.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Histogram{}
	if len(j.Counts) == 0 && len(j.Bounds) == 0 {
		return nil
	}
	if len(j.Counts) != len(j.Bounds)+1 {
		return fmt.Errorf("histogram has %d finite bounds and %d counts; want one count more than bounds (the +Inf bucket)", len(j.Bounds), len(j.Counts))
	}
	out := Histogram{Bounds: append(j.Bounds, math.Inf(1)), Counts: j.Counts}
	if err := out.Check(); err != nil {
		return err
	}
	*h = out
	return nil
}

// Total is how many observations the histogram holds.
func (h Histogram) Total() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Check says what is wrong with h, if anything: bounds that do not rise to
// +Inf, or counts that are negative, not finite or fall.
func (h Histogram) Check() error {
	if len(h.Bounds) != len(h.Counts) {
		return fmt.Errorf("histogram has %d bounds and %d counts; want as many of each", len(h.Bounds), len(h.Counts))
	}
	if len(h.Bounds) == 0 {
		return nil
	}
	if !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		return fmt.Errorf("histogram's last bound is %g; want +Inf", h.Bounds[len(h.Bounds)-1])
	}
	for i := range h.Bounds {
		if i > 0 && !(h.Bounds[i] > h.Bounds[i-1]) {
			return fmt.Errorf("histogram bound %d is %g after %g; want rising bounds", i, h.Bounds[i], h.Bounds[i-1])
		}
		c := h.Counts[i]
		if !(c >= 0) || math.IsInf(c, 0) || (i > 0 && c < h.Counts[i-1]) {
			return fmt.Errorf("histogram count %d (le %g) is %g; want a finite count, at least the one before it", i, h.Bounds[i], c)
		}
	}
	return nil
}

// Add returns h with o's observations added: the union of the bounds,
// each count the sum of both histograms' cumulative counts at that bound
// (a histogram without a bound counts there what it counts at its next
// lower one, which is exact when both share their bounds, as one
// exporter's series do).
func (h Histogram) Add(o Histogram) Histogram {
	if len(o.Bounds) == 0 {
		return h.clone()
	}
	if len(h.Bounds) == 0 {
		return o.clone()
	}
	if slices.Equal(h.Bounds, o.Bounds) {
		out := h.clone()
		for i := range out.Counts {
			out.Counts[i] += o.Counts[i]
		}
		return out
	}
	bounds := append(slices.Clone(h.Bounds), o.Bounds...)
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	out := Histogram{Bounds: bounds, Counts: make([]float64, len(bounds))}
	for i, b := range bounds {
		out.Counts[i] = h.at(b) + o.at(b)
	}
	return out
}

// at is the cumulative count at bound b: the count of the highest bound
// not above it.
func (h Histogram) at(b float64) float64 {
	i, found := slices.BinarySearch(h.Bounds, b)
	if found {
		return h.Counts[i]
	}
	if i == 0 {
		return 0
	}
	return h.Counts[i-1]
}

func (h Histogram) clone() Histogram {
	return Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts)}
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) as Prometheus'
// histogram_quantile does: linearly within the bucket it falls in, the
// first bucket starting at 0, and the highest finite bound when it falls
// in the +Inf bucket. NaN for an empty histogram.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total <= 0 || len(h.Bounds) < 2 {
		return math.NaN()
	}
	rank := q * total
	// The first bucket whose cumulative count reaches the rank.
	i, _ := slices.BinarySearch(h.Counts, rank)
	if i >= len(h.Bounds)-1 {
		return h.Bounds[len(h.Bounds)-2]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.Bounds[i-1], h.Counts[i-1]
	}
	in := h.Counts[i] - below
	if in <= 0 {
		return h.Bounds[i]
	}
	return lower + (h.Bounds[i]-lower)*(rank-below)/in
}

// Check says what is wrong with r, if anything, naming the field.
func (r *QueueRow) Check() error {
	if !r.Hour.Equal(r.Hour.Truncate(time.Hour)) {
		return fmt.Errorf("queue row hour %s is not the start of an hour", r.Hour)
	}
	if r.Cluster == "" || r.ClusterQueue == "" {
		return fmt.Errorf("queue row of %s: cluster %q and cluster queue %q must both be set", r.Hour.Format(time.RFC3339), r.Cluster, r.ClusterQueue)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"pending workloads", r.PendingWorkloads}, {"pending GPUs", r.PendingGPUs}, {"admitted", r.Admitted}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("queue row %s/%s at %s: %s is %g; want a finite count of at least 0", r.Cluster, r.ClusterQueue,
				r.Hour.Format(time.RFC3339), f.name, f.v)
		}
	}
	if err := r.AdmittedWait.Check(); err != nil {
		return fmt.Errorf("queue row %s/%s at %s: admitted wait: %w", r.Cluster, r.ClusterQueue, r.Hour.Format(time.RFC3339), err)
	}
	if err := r.PendingWait.Check(); err != nil {
		return fmt.Errorf("queue row %s/%s at %s: pending wait: %w", r.Cluster, r.ClusterQueue, r.Hour.Format(time.RFC3339), err)
	}
	return nil
}

// WorkloadTime is one workload's life in Kueue: when it was submitted
// (created, or requeued), admitted and finished, in which LocalQueue, and
// what it asked for. gpuledger controller (from the Workloads) and the
// simulator record them; the capacity what-if replays the last month's
// through the admission core with more GPUs.
type WorkloadTime struct {
	Cluster, Namespace, Name string
	// LocalQueue is the Workload's queueName, in Namespace.
	LocalQueue string
	// Resource is nvidia.com/gpu or nvidia.com/mig-<profile>; Count how
	// many of it the workload asks for in all.
	Resource string
	Count    int
	Submit   time.Time
	// Admit and Finish are zero while the workload waits or runs.
	Admit, Finish time.Time
}

// Check says what is wrong with w, if anything, naming the field.
func (w *WorkloadTime) Check() error {
	switch {
	case w.Cluster == "" || w.Namespace == "" || w.Name == "":
		return fmt.Errorf("workload time: cluster %q, namespace %q and name %q must all be set", w.Cluster, w.Namespace, w.Name)
	case w.Submit.IsZero():
		return fmt.Errorf("workload %s/%s: no submit time", w.Namespace, w.Name)
	case w.Count < 0:
		return fmt.Errorf("workload %s/%s: count %d; want at least 0", w.Namespace, w.Name, w.Count)
	case !w.Admit.IsZero() && w.Admit.Before(w.Submit):
		return fmt.Errorf("workload %s/%s: admitted %s before its submission %s", w.Namespace, w.Name, w.Admit.Format(time.RFC3339), w.Submit.Format(time.RFC3339))
	case !w.Finish.IsZero() && (w.Admit.IsZero() || w.Finish.Before(w.Admit)):
		return fmt.Errorf("workload %s/%s: finished %s without an admission before it (admitted %s)", w.Namespace, w.Name,
			w.Finish.Format(time.RFC3339), w.Admit.Format(time.RFC3339))
	}
	return nil
}

// MilliOrZero is t in Unix milliseconds, 0 for the zero time: how the
// stores keep a workload's admission and finish not yet seen.
func MilliOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// TimeOrZero reads what MilliOrZero writes, in UTC.
func TimeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
