package attribution

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// QueueMetric says which queue quantity a QueueSample carries.
type QueueMetric uint8

// Queue metrics attribution reads. Others are dropped by ingest.
const (
	QueueMetricUnknown QueueMetric = iota
	// QueuePendingWorkloads is kueue_pending_workloads: a gauge per
	// ClusterQueue and status.
	QueuePendingWorkloads
	// QueueAdmissionWait is a bucket of kueue_admission_wait_time_seconds:
	// a counter of admitted workloads whose wait was at most Le seconds.
	QueueAdmissionWait
	// QueuePendingGPUs is gpuledger_pending_workload_gpus: the GPUs the
	// ClusterQueue's pending workloads ask for, a gauge from gpuledger's
	// controller (or a replay).
	QueuePendingGPUs
	// QueuePendingAge is a bucket of gpuledger_pending_workload_age_seconds:
	// how many of the pending workloads have waited at most Le seconds so
	// far, a gauge histogram from the same source.
	QueuePendingAge
	// EndpointRunning is vllm:num_requests_running and EndpointWaiting
	// vllm:num_requests_waiting: gauges of an inference endpoint's pod
	// (see endpoint.go).
	EndpointRunning
	EndpointWaiting
	// EndpointTokens is vllm:generation_tokens_total and EndpointRequests
	// vllm:request_success_total: counters of an endpoint's pod.
	EndpointTokens
	EndpointRequests
	// EndpointArrivals is gpuledger_endpoint_arrivals_total: a counter of
	// the requests that came to an endpoint, counted in front of its
	// model servers as each arrives (a gateway's, the series a KEDA
	// trigger reads), so it counts too while the endpoint has no pod.
	// Its samples name no Pod; Series tells the gateway's series apart.
	EndpointArrivals
)

// IsEndpoint says whether m is an inference endpoint's metric.
func (m QueueMetric) IsEndpoint() bool { return m >= EndpointRunning && m <= EndpointArrivals }

// QueueSample is one value of one queue series at one instant, or of an
// inference endpoint's series (the Endpoint metrics), which name the
// endpoint's Namespace, Pod and Model instead of a ClusterQueue.
type QueueSample struct {
	TimeMs       int64
	ClusterQueue string
	// Namespace, Pod and Model (vLLM's model_name) of an endpoint's
	// sample.
	Namespace, Pod, Model string
	Metric                QueueMetric
	// Le is the bucket's upper bound, for the histogram metrics.
	Le float64
	// Series tells apart the series of one metric, queue and bound: their
	// other labels (status, priority_class, replica_role), joined.
	Series string
	Value  float64
}

// queueBook is what the Attributor keeps of the queues: each counter's
// last value (its increase is what an hour gets) and the open hours.
// Fields are exported for the snapshot's encoding.
type queueBook struct {
	Last  map[string]*QueueLast
	Hours map[int64]map[string]*queueHour // hour → ClusterQueue
	Out   []ledger.QueueRow
	// Endpoints is the inference endpoints' (endpoint.go).
	Endpoints endpointBook
}

// QueueLast is a counter's last sample.
type QueueLast struct {
	Ms int64
	V  float64
}

// queueHour is one hour of one ClusterQueue in the making.
type queueHour struct {
	// Gauges sums each gauge series' samples (metric, series) and counts
	// them: a series' mean over the hour is Sum / N.
	Gauges map[string]*GaugeSum
	// Admitted is the increase of the wait histogram, per bound.
	Admitted map[float64]float64
	// Ages is the latest value of each pending-age bucket series.
	Ages map[string]*AgeLast
}

// GaugeSum is a gauge series' sum and count of samples in an hour.
type GaugeSum struct {
	Metric QueueMetric
	Sum    float64
	N      int
}

// AgeLast is a pending-age bucket series' latest sample in an hour.
type AgeLast struct {
	Ms     int64
	Le     float64
	Series string
	V      float64
}

// AddQueue records one sample of a queue series (see QueueSample). Queue
// samples close no hour; they are booked to the hour they fall in and
// emitted with it. A sample for an hour already emitted is late.
func (a *Attributor) AddQueue(q *QueueSample) { a.addQueue(q, false) }

// PrimeQueue is AddQueue for a sample from before the first hour to emit
// (see Prime): it only sets a counter's last value, so that the first
// hour's increase is what an uninterrupted run would book.
func (a *Attributor) PrimeQueue(q *QueueSample) { a.addQueue(q, true) }

func (a *Attributor) addQueue(q *QueueSample, prime bool) {
	if q.Metric.IsEndpoint() {
		a.addEndpoint(q, prime)
		return
	}
	if prime {
		if q.Metric == QueueAdmissionWait && !math.IsNaN(q.Value) && !math.IsInf(q.Value, 0) {
			if a.queues.Last == nil {
				a.queues.Last = make(map[string]*QueueLast)
			}
			k := a.counterKey(q)
			if last := a.queues.Last[string(k)]; last == nil {
				a.queues.Last[string(k)] = &QueueLast{Ms: q.TimeMs, V: q.Value}
			} else if q.TimeMs > last.Ms {
				*last = QueueLast{Ms: q.TimeMs, V: q.Value}
			}
		}
		return
	}
	if math.IsNaN(q.Value) || math.IsInf(q.Value, 0) || q.Value < 0 || q.Metric == QueueMetricUnknown || q.ClusterQueue == "" ||
		(q.Metric == QueueAdmissionWait || q.Metric == QueuePendingAge) && math.IsNaN(q.Le) {
		a.reject(ReasonBadValue)
		return
	}
	if a.startMs != 0 && q.TimeMs < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	b := &a.queues
	// A snapshot's decoding leaves empty maps nil.
	if b.Hours == nil {
		b.Hours = make(map[int64]map[string]*queueHour)
	}
	if b.Last == nil {
		b.Last = make(map[string]*QueueLast)
	}
	h := floorHour(q.TimeMs)
	byQueue := b.Hours[h]
	if byQueue == nil {
		byQueue = make(map[string]*queueHour)
		b.Hours[h] = byQueue
	}
	qh := byQueue[q.ClusterQueue]
	if qh == nil {
		// The sample's strings may alias a parse buffer: what is kept
		// is copied.
		qh = &queueHour{}
		byQueue[strings.Clone(q.ClusterQueue)] = qh
	}
	if qh.Gauges == nil {
		qh.Gauges = map[string]*GaugeSum{}
	}
	if qh.Admitted == nil {
		qh.Admitted = map[float64]float64{}
	}
	if qh.Ages == nil {
		qh.Ages = map[string]*AgeLast{}
	}
	switch q.Metric {
	case QueuePendingWorkloads, QueuePendingGPUs:
		k := append(append(a.keyBuf[:0], byte('0'+q.Metric), 0), q.Series...)
		a.keyBuf = k
		g := qh.Gauges[string(k)]
		if g == nil {
			g = &GaugeSum{Metric: q.Metric}
			qh.Gauges[string(k)] = g
		}
		g.Sum += q.Value
		g.N++
	case QueuePendingAge:
		k := strconv.AppendFloat(append(append(a.keyBuf[:0], q.Series...), 0), q.Le, 'g', -1, 64)
		a.keyBuf = k
		switch old := qh.Ages[string(k)]; {
		case old == nil:
			qh.Ages[string(k)] = &AgeLast{Ms: q.TimeMs, Le: q.Le, Series: strings.Clone(q.Series), V: q.Value}
		case old.Ms > q.TimeMs:
			a.reject(ReasonOutOfOrder)
			return
		default:
			old.Ms, old.V = q.TimeMs, q.Value
		}
	case QueueAdmissionWait:
		k := a.counterKey(q)
		last := b.Last[string(k)]
		seen := last != nil
		switch {
		case seen && q.TimeMs < last.Ms:
			a.reject(ReasonOutOfOrder)
			return
		case seen && q.TimeMs == last.Ms:
			a.reject(ReasonDuplicate)
			return
		case !seen:
			// The first sample of a counter is its baseline: what it
			// counted before belongs to hours gpuledger did not see.
		case q.Value >= last.V:
			qh.Admitted[q.Le] += q.Value - last.V
		default:
			// A reset (Kueue restarted): it counted q.Value since.
			a.stats.CounterResets++
			qh.Admitted[q.Le] += q.Value
		}
		if seen {
			*last = QueueLast{Ms: q.TimeMs, V: q.Value}
		} else {
			b.Last[string(k)] = &QueueLast{Ms: q.TimeMs, V: q.Value}
		}
	}
	a.stats.Accepted++
}

// counterKey names a wait-histogram bucket series among the counters, in
// a.keyBuf.
func (a *Attributor) counterKey(q *QueueSample) []byte {
	k := append(append(a.keyBuf[:0], q.ClusterQueue...), 0)
	k = strconv.AppendFloat(append(append(k, q.Series...), 0), q.Le, 'g', -1, 64)
	a.keyBuf = k
	return k
}

// appendQueueHours emits the queue rows of hour h and of any hour before
// it still open (queue samples that came before the first DCGM sample).
func (a *Attributor) appendQueueHours(h int64, forced bool) {
	for _, hour := range slices.Sorted(maps.Keys(a.queues.Hours)) {
		if hour <= h {
			a.appendQueueHour(hour)
		}
	}
	a.appendEndpointHours(h, forced)
}

func (a *Attributor) appendQueueHour(h int64) {
	byQueue := a.queues.Hours[h]
	delete(a.queues.Hours, h)
	for _, cq := range slices.Sorted(maps.Keys(byQueue)) {
		qh := byQueue[cq]
		r := ledger.QueueRow{Hour: time.UnixMilli(h).UTC(), Cluster: a.model.Cluster, ClusterQueue: cq}
		for _, g := range qh.Gauges {
			mean := g.Sum / float64(g.N)
			switch g.Metric {
			case QueuePendingWorkloads:
				r.PendingWorkloads += mean
			case QueuePendingGPUs:
				r.PendingGPUs += mean
			}
		}
		r.AdmittedWait = cumulative(qh.Admitted)
		r.Admitted = r.AdmittedWait.Total()
		ages := map[float64]float64{}
		for _, s := range qh.Ages {
			ages[s.Le] += s.V
		}
		r.PendingWait = cumulative(ages)
		a.queues.Out = append(a.queues.Out, r)
	}
}

// cumulative makes a Histogram of per-bound increases of cumulative
// buckets: each bound's count is already cumulative in Prometheus' layout,
// so the increases are too; one with no +Inf bound gets one holding its
// highest count. A bound whose increase is below a lower bound's (a scrape
// that caught the buckets mid-update) is raised to it.
func cumulative(inc map[float64]float64) ledger.Histogram {
	if len(inc) == 0 {
		return ledger.Histogram{}
	}
	bounds := slices.Sorted(maps.Keys(inc))
	h := ledger.Histogram{}
	run := 0.0
	for _, b := range bounds {
		run = max(run, inc[b])
		h.Bounds, h.Counts = append(h.Bounds, b), append(h.Counts, run)
	}
	if !math.IsInf(bounds[len(bounds)-1], 1) {
		h.Bounds, h.Counts = append(h.Bounds, math.Inf(1)), append(h.Counts, run)
	}
	if run == 0 {
		return ledger.Histogram{}
	}
	return h
}

// QueueRows returns the queue rows of the hours emitted since the last
// call (by Emit, Ready or the data), and forgets them.
func (a *Attributor) QueueRows() []ledger.QueueRow {
	out := a.queues.Out
	a.queues.Out = nil
	return out
}
