package ledger

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// EndpointRow is one hour of one inference endpoint: the model server pods
// of a namespace serving one model (vLLM's model_name), read from their
// own metrics (vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:generation_tokens_total, vllm:request_success_total). It says how
// long the endpoint was busy and the lengths of its idle gaps, from which
// scale-to-zero replays a cooldown exactly per gap bucket.
type EndpointRow struct {
	// Hour is the start of the hour, in UTC.
	Hour      time.Time
	Cluster   string
	Namespace string
	// Model is vLLM's model_name; empty for an endpoint known from GPU
	// activity alone (a serving workload without vLLM's series, busy when
	// its GPUs' activity is at least 5%), which Kind and Name name.
	Model string
	// Kind and Name are the owner kube-state-metrics reported for the
	// endpoint's pods (a Deployment's ReplicaSet, a LeaderWorkerSet): the
	// workload whose WorkloadRows hold its GPU time and cost. Empty when
	// kube-state-metrics said nothing of the pods.
	Kind, Name string
	// Pods is how many pods reported in the hour.
	Pods int
	// ReportedSeconds is how long the endpoint reported: the spans between
	// its consecutive reports (each at most EndpointStale); BusySeconds
	// the part of it with a request running or waiting, or tokens
	// generated.
	ReportedSeconds, BusySeconds float64
	// Requests is the hour's increase of vllm:request_success_total, and
	// GenerationTokens of vllm:generation_tokens_total.
	Requests, GenerationTokens float64
	// Gaps are the idle gaps that ended in the hour (a request came after
	// them).
	Gaps Gaps
	// IdleSince is, when the endpoint was idle at its last report of the
	// hour, the time of its last activity before: an idle gap still open.
	// Zero otherwise.
	IdleSince time.Time
}

// IsServingKind says whether a workload of kind serves a model: a
// Deployment (its pods' owner is a ReplicaSet) or a LeaderWorkerSet.
func IsServingKind(kind string) bool {
	return kind == "ReplicaSet" || kind == "Deployment" || kind == "LeaderWorkerSet"
}

// EndpointStale is the longest span between two reports of an endpoint
// still counted as reported: past it, the endpoint was gone (scaled to
// zero, or not scraped), and neither the span nor a gap across it counts.
const EndpointStale = 5 * time.Minute

// GapBounds are the upper bounds, in seconds, of the idle-gap buckets:
// the cooldowns scale-to-zero chooses among, so that a cooldown's replay
// on the buckets is exact.
var GapBounds = []float64{30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400}

// Gaps is a histogram of idle-gap lengths in GapBounds' buckets (the last
// one above the highest bound): how many gaps fell in each and their
// seconds in all. A gap is the time from one activity of the endpoint to
// the next, with only idle reports between: known to a scrape interval.
// The zero value is empty.
type Gaps struct {
	Counts  []int64   `json:"n"`
	Seconds []float64 `json:"s"`
	// Woken bounds from above the requests that came as gaps ended, by
	// the bucket of each gap's longest possible length (from the busy
	// pod's report before its last activity to the report that ended the
	// gap: the idle time between the last request's end and the next
	// one's arrival is known to a scrape interval). Woken[i*len(WakeBounds)+j]
	// is, summed over those gaps, the requests that arrived from the
	// endpoint's last idle report before the gap's end to WakeBounds[j]
	// after it: the requests a replica scaled down in the gap makes wait
	// while its model loads, when the load takes at most WakeBounds[j].
	// Wakes[i] counts those gaps, Measured[i*len(WakeBounds)+j] those of
	// them whose window j the data covered (the others' count is what the
	// data had when the hour had to close: not a bound). Unmeasured[i]
	// counts the gaps of bucket i with no count at all (an endpoint back
	// after being away, one known from GPU activity alone). A gap whose
	// longest length is within the first bucket (no cooldown scales down
	// in it) has none. All nil in rows from before the ledger kept them:
	// every gap of theirs is unmeasured.
	Woken      []float64 `json:"w,omitempty"`
	Wakes      []int64   `json:"k,omitempty"`
	Measured   []int64   `json:"m,omitempty"`
	Unmeasured []int64   `json:"u,omitempty"`
}

// WakeBounds are the windows after a gap's end, in seconds, whose
// requests Gaps.Woken bounds: a model's load time is rounded up to one of
// them.
var WakeBounds = []float64{30, 60, 120, 300, 600}

// WakeIndex is the smallest of WakeBounds at or above a load of sec
// seconds; false when the load is longer than all of them.
func WakeIndex(sec float64) (int, bool) {
	for j, w := range WakeBounds {
		if sec <= w {
			return j, true
		}
	}
	return 0, false
}

// Bucket is the index of the bucket of a gap of sec seconds.
func Bucket(sec float64) int {
	for j, b := range GapBounds {
		if sec <= b {
			return j
		}
	}
	return len(GapBounds)
}

// Add counts one gap of sec seconds.
func (g *Gaps) Add(sec float64) {
	g.alloc()
	i := Bucket(sec)
	g.Counts[i]++
	g.Seconds[i] += sec
}

func (g *Gaps) alloc() {
	if g.Counts == nil {
		g.Counts, g.Seconds = make([]int64, len(GapBounds)+1), make([]float64, len(GapBounds)+1)
	}
	if g.Woken == nil {
		n := len(GapBounds) + 1
		g.Woken, g.Wakes, g.Measured, g.Unmeasured = make([]float64, n*len(WakeBounds)), make([]int64, n), make([]int64, n*len(WakeBounds)), make([]int64, n)
	}
}

// AddWoken records, for one gap already counted by Add whose longest
// possible length is in bucket i, the requests that arrived within each
// of WakeBounds of its end; the data covered the first complete windows.
func (g *Gaps) AddWoken(i int, woken []float64, complete int) {
	g.alloc()
	g.Wakes[i]++
	for j, n := range woken {
		g.Woken[i*len(WakeBounds)+j] += n
		if j < complete {
			g.Measured[i*len(WakeBounds)+j]++
		}
	}
}

// AddUnmeasured records one gap already counted by Add, in bucket i,
// whose requests are not known.
func (g *Gaps) AddUnmeasured(i int) {
	g.alloc()
	g.Unmeasured[i]++
}

// Merge adds o's gaps to g.
func (g *Gaps) Merge(o Gaps) {
	if o.Counts == nil {
		return
	}
	if g.Counts == nil {
		g.Counts, g.Seconds = make([]int64, len(GapBounds)+1), make([]float64, len(GapBounds)+1)
	}
	for i := range o.Counts {
		g.Counts[i] += o.Counts[i]
		g.Seconds[i] += o.Seconds[i]
	}
	g.alloc()
	if o.Woken == nil {
		// A row from before the ledger counted requests: none of its
		// gaps is measured.
		for i, n := range o.Counts {
			g.Unmeasured[i] += n
		}
		return
	}
	for i := range o.Woken {
		g.Woken[i] += o.Woken[i]
		g.Measured[i] += o.Measured[i]
	}
	for i := range o.Wakes {
		g.Wakes[i] += o.Wakes[i]
		g.Unmeasured[i] += o.Unmeasured[i]
	}
}

// WokenOver bounds from above the requests that waited for a load of at
// most WakeBounds[j] after the gaps that may have been longer than bound
// (one of GapBounds, or 0 for all), over the measured gaps; unmeasured is
// how many such gaps have no count.
func (g Gaps) WokenOver(bound float64, j int) (requests float64, unmeasured int64) {
	for i := range g.Counts {
		if i < len(GapBounds) && GapBounds[i] <= bound {
			continue
		}
		if g.Woken == nil {
			unmeasured += g.Counts[i]
			continue
		}
		unmeasured += g.Unmeasured[i] + g.Wakes[i] - g.Measured[i*len(WakeBounds)+j]
		requests += g.Woken[i*len(WakeBounds)+j]
	}
	return requests, unmeasured
}

// Over returns how many gaps were longer than bound (one of GapBounds, or
// 0 for all) and their seconds beyond it: exact at a bound, since a
// bucket's gaps are all on one side of it.
func (g Gaps) Over(bound float64) (count int64, beyond float64) {
	for i := range g.Counts {
		if i < len(GapBounds) && GapBounds[i] <= bound {
			continue
		}
		count += g.Counts[i]
		beyond += g.Seconds[i] - bound*float64(g.Counts[i])
	}
	return count, beyond
}

// Check says what is wrong with g, if anything.
func (g Gaps) Check() error {
	if g.Counts == nil && g.Seconds == nil && g.Woken == nil && g.Wakes == nil && g.Measured == nil && g.Unmeasured == nil {
		return nil
	}
	if len(g.Counts) != len(GapBounds)+1 || len(g.Seconds) != len(GapBounds)+1 {
		return fmt.Errorf("gaps have %d counts and %d sums; want %d of each (GapBounds and one above)", len(g.Counts), len(g.Seconds), len(GapBounds)+1)
	}
	if g.Woken != nil || g.Wakes != nil || g.Measured != nil || g.Unmeasured != nil {
		n, w := len(GapBounds)+1, len(WakeBounds)
		if len(g.Wakes) != n || len(g.Unmeasured) != n || len(g.Woken) != n*w || len(g.Measured) != n*w {
			return fmt.Errorf("gaps have %d counted and %d unmeasured gaps, %d woken requests and %d measured windows; want %d, %d, %d and %d (per bucket, and per bucket and WakeBounds)",
				len(g.Wakes), len(g.Unmeasured), len(g.Woken), len(g.Measured), n, n, n*w, n*w)
		}
		// A gap's longest possible length is at least its length: every
		// gap above a bound has a count or a mark above it.
		var gaps, marked int64
		for i := len(g.Counts) - 1; i > 0; i-- {
			gaps += g.Counts[i]
			marked += g.Wakes[i] + g.Unmeasured[i]
			if marked < gaps {
				return fmt.Errorf("gaps have %d longer than %g s and %d measured or unmeasured ones that long; want at least as many (a gap is counted, or marked unmeasured, by its longest possible length)",
					gaps, GapBounds[i-1], marked)
			}
		}
		for i, k := range g.Wakes {
			if k < 0 || g.Unmeasured[i] < 0 {
				return fmt.Errorf("gap bucket %d has %d counted and %d unmeasured gaps; want at least 0 of each", i, k, g.Unmeasured[i])
			}
			for j := range WakeBounds {
				prev := k
				if j > 0 {
					prev = g.Measured[i*w+j-1]
				}
				if m := g.Measured[i*w+j]; m < 0 || m > prev {
					return fmt.Errorf("gap bucket %d has %d gaps measured within %g s of %d; want 0 to %d (a window is covered only if the shorter ones are)",
						i, m, WakeBounds[j], k, prev)
				}
				v := g.Woken[i*w+j]
				if !(v >= 0) || math.IsInf(v, 0) || j > 0 && v < g.Woken[i*w+j-1]*(1-1e-9) {
					return fmt.Errorf("gap bucket %d has %g requests woken within %g s; want a finite number of at least 0, and at least those within %g s",
						i, v, WakeBounds[j], WakeBounds[max(j-1, 0)])
				}
			}
		}
	}
	for i := range g.Counts {
		lo, hi := 0.0, math.Inf(1)
		if i > 0 {
			lo = GapBounds[i-1]
		}
		if i < len(GapBounds) {
			hi = GapBounds[i]
		}
		n, s := float64(g.Counts[i]), g.Seconds[i]
		// A sum of many gaps may round a little past its bucket's edge.
		if g.Counts[i] < 0 || math.IsNaN(s) || math.IsInf(s, 0) || s < lo*n*(1-1e-9) || s > hi*n*(1+1e-9) {
			return fmt.Errorf("gap bucket %d (%g, %g] has %d gaps of %g s in all; want a count of at least 0 and seconds between %g and %g per gap",
				i, lo, hi, g.Counts[i], s, lo, hi)
		}
	}
	return nil
}

// UnmarshalJSON reads {"n": counts, "s": seconds}, and checks it.
func (g *Gaps) UnmarshalJSON(b []byte) error {
	var j struct {
		Counts     []int64   `json:"n"`
		Seconds    []float64 `json:"s"`
		Woken      []float64 `json:"w"`
		Wakes      []int64   `json:"k"`
		Measured   []int64   `json:"m"`
		Unmeasured []int64   `json:"u"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Gaps{Counts: j.Counts, Seconds: j.Seconds, Woken: j.Woken, Wakes: j.Wakes, Measured: j.Measured, Unmeasured: j.Unmeasured}
	if err := out.Check(); err != nil {
		return err
	}
	*g = out
	return nil
}

// Check says what is wrong with r, if anything, naming the field.
func (r *EndpointRow) Check() error {
	if !r.Hour.Equal(r.Hour.Truncate(time.Hour)) {
		return fmt.Errorf("endpoint row hour %s is not the start of an hour", r.Hour)
	}
	if r.Cluster == "" || r.Namespace == "" || r.Model == "" && r.Name == "" {
		return fmt.Errorf("endpoint row of %s: cluster %q, namespace %q and model %q (or, without one, the workload's name %q) must all be set",
			r.Hour.Format(time.RFC3339), r.Cluster, r.Namespace, r.Model, r.Name)
	}
	at := func() string {
		return fmt.Sprintf("endpoint row %s/%s/%s at %s", r.Cluster, r.Namespace, r.Model, r.Hour.Format(time.RFC3339))
	}
	if r.Pods < 0 {
		return fmt.Errorf("%s: pods is %d; want at least 0", at(), r.Pods)
	}
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"reported seconds", r.ReportedSeconds, 3600}, {"busy seconds", r.BusySeconds, r.ReportedSeconds},
		{"requests", r.Requests, math.Inf(1)}, {"generation tokens", r.GenerationTokens, math.Inf(1)}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) || f.v > f.max {
			return fmt.Errorf("%s: %s is %g; want a finite number from 0 to %g", at(), f.name, f.v, f.max)
		}
	}
	if err := r.Gaps.Check(); err != nil {
		return fmt.Errorf("%s: %w", at(), err)
	}
	if !r.IdleSince.IsZero() && !r.IdleSince.Before(r.Hour.Add(time.Hour)) {
		return fmt.Errorf("%s: idle since %s, after the hour; want a time before its end", at(), r.IdleSince.Format(time.RFC3339))
	}
	return nil
}
