package ingest

import (
	"fmt"
	"math"
	"strconv"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	"github.com/gpuledger/gpuledger/attribution"
)

// The queue rows: Kueue's and gpuledger controller's ClusterQueue series
// and the inference endpoints' vLLM and gateway series, read into
// attribution's queue samples.

func queueMetricOf(metric string) attribution.QueueMetric {
	switch metric {
	case MetricKueuePending:
		return attribution.QueuePendingWorkloads
	case MetricKueueWait:
		return attribution.QueueAdmissionWait
	case MetricPendingGPUs:
		return attribution.QueuePendingGPUs
	case MetricPendingAge:
		return attribution.QueuePendingAge
	case MetricVLLMRunning:
		return attribution.EndpointRunning
	case MetricVLLMWaiting:
		return attribution.EndpointWaiting
	case MetricVLLMTokens:
		return attribution.EndpointTokens
	case MetricVLLMRequests:
		return attribution.EndpointRequests
	case MetricArrivals:
		return attribution.EndpointArrivals
	}
	return attribution.QueueMetricUnknown
}

// handleEndpointRow reads a sample of an inference endpoint's vLLM series:
// the model (model_name), the pod and namespace the scrape gave it
// (exported_* win, as for kube-state-metrics), and the other labels that
// tell its series apart (engine, finished_reason). A gateway's arrivals
// name the endpoint by namespace and model_name alone; every other label
// (the gateway's pod, instance, job) tells its counters apart.
func (p *Parser) handleEndpointRow(m attribution.QueueMetric, tags []prometheus.Tag, value float64, ts int64, sink Sink) {
	t := p.endpointTemplate(m, tags)
	p.emitQueue(&t, value, ts, sink)
}

// queueTemplate is what a queue or endpoint series' labels make of its
// samples: the sample without its time and value, or what is wrong.
type queueTemplate struct {
	q attribution.QueueSample
	// outcome says what becomes of the samples; msg is a line error's.
	outcome queueOutcome
	msg     string
}

type queueOutcome uint8

const (
	queueDeliver queueOutcome = iota
	queueMissingLabels
	queueSkipped
	queueLineError
)

// emitQueue passes on a queue or endpoint sample, or counts why not.
func (p *Parser) emitQueue(t *queueTemplate, value float64, ts int64, sink Sink) {
	switch t.outcome {
	case queueMissingLabels:
		p.stats.MissingLabels++
		return
	case queueSkipped:
		p.stats.Skipped++
		return
	case queueLineError:
		p.logLineError(t.msg)
		return
	}
	q := &p.queue
	*q = t.q
	q.TimeMs, q.Value = ts, value
	p.stats.Queues++
	sink.AddQueue(q)
}

func (p *Parser) endpointTemplate(m attribution.QueueMetric, tags []prometheus.Tag) queueTemplate {
	t := queueTemplate{q: attribution.QueueSample{Metric: m}}
	q := &t.q
	var engine, reason string
	var at scrapedPod
	series := p.seriesKey[:0]
	for _, t := range tags {
		if at.take(t) {
			if m == attribution.EndpointArrivals && (t.Key == "pod" || t.Key == "exported_pod") {
				series = appendLabel(series, t)
			}
			continue
		}
		switch t.Key {
		case "model_name":
			q.Model = t.Value
		case "engine":
			engine = t.Value
		case "finished_reason":
			reason = t.Value
		case "__name__":
		default:
			if m == attribution.EndpointArrivals {
				series = appendLabel(series, t)
			}
		}
	}
	p.seriesKey = series
	q.Namespace, q.Pod = at.names()
	if m == attribution.EndpointArrivals {
		q.Pod = ""
		if q.Model == "" || q.Namespace == "" {
			t.outcome = queueMissingLabels
			return t
		}
		q.Series = string(series)
		return t
	}
	if q.Model == "" || q.Namespace == "" || q.Pod == "" {
		t.outcome = queueMissingLabels
		return t
	}
	q.Series = engine + "," + reason
	return t
}

// appendLabel appends a label as key=value, to a series key.
func appendLabel(dst []byte, t prometheus.Tag) []byte {
	dst = append(append(dst, t.Key...), '=')
	return append(append(dst, t.Value...), ',')
}

// handleQueueRow reads a sample of a queue series: the ClusterQueue, the
// bucket bound of a histogram, and the other labels that tell its series
// apart. Kueue replicas that are not the leader (replica_role="follower")
// are skipped: with high availability every replica exports, and only the
// leader's counts are the queue's.
func (p *Parser) handleQueueRow(m attribution.QueueMetric, tags []prometheus.Tag, value float64, ts int64, sink Sink) {
	t := queueTemplateOf(m, tags)
	p.emitQueue(&t, value, ts, sink)
}

func queueTemplateOf(m attribution.QueueMetric, tags []prometheus.Tag) queueTemplate {
	t := queueTemplate{q: attribution.QueueSample{Metric: m}}
	q := &t.q
	var status, priority, role, le string
	for _, t := range tags {
		switch t.Key {
		case "cluster_queue":
			q.ClusterQueue = t.Value
		case "status":
			status = t.Value
		case "priority_class":
			priority = t.Value
		case "replica_role":
			role = t.Value
		case "le":
			le = t.Value
		}
	}
	if role == "follower" {
		t.outcome = queueSkipped
		return t
	}
	if q.ClusterQueue == "" {
		t.outcome = queueMissingLabels
		return t
	}
	if m == attribution.QueueAdmissionWait || m == attribution.QueuePendingAge {
		b, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsNaN(b) {
			t.outcome = queueLineError
			t.msg = fmt.Sprintf("%s{cluster_queue=%q}: le=%q is not a bucket bound; want a number or +Inf", queueMetricName(m), q.ClusterQueue, le)
			return t
		}
		q.Le = b
	}
	q.Series = status + "," + priority
	return t
}

func queueMetricName(m attribution.QueueMetric) string {
	for _, n := range []string{MetricKueuePending, MetricKueueWait, MetricPendingGPUs, MetricPendingAge, MetricVLLMRunning, MetricVLLMWaiting, MetricVLLMTokens, MetricVLLMRequests} {
		if queueMetricOf(n) == m {
			return n
		}
	}
	return "?"
}
