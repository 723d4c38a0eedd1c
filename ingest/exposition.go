// Package ingest gets telemetry into gpuledger: it parses what dcgm-exporter,
// kube-state-metrics and Kueue publish (Prometheus text exposition, with the
// VictoriaMetrics parser) into attribution's samples, normalising the label
// spellings real deployments produce: Hostname or hostname; namespace, pod
// and container or their exported_ forms after a scrape with honorLabels
// false; and the old uuid, pod_name, pod_namespace and container_name.
//
// It owns parsing and label normalisation only; what a sample costs is
// package attribution's business.
package ingest

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"

	"github.com/gpuledger/gpuledger/attribution"
)

// Sink receives parsed samples. *attribution.Attributor implements it.
type Sink interface {
	Add(s *attribution.Sample)
	AddPod(p attribution.PodInfo)
	AddQueue(q *attribution.QueueSample)
}

// Metric names ingest reads; every other series is skipped.
const (
	MetricGPUUtil         = "DCGM_FI_DEV_GPU_UTIL"
	MetricGREngineActive  = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	MetricFBUsed          = "DCGM_FI_DEV_FB_USED"
	MetricPowerUsage      = "DCGM_FI_DEV_POWER_USAGE"
	MetricTotalEnergy     = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
	MetricKubePodLabels   = "kube_pod_labels"
	MetricKubePodOwner    = "kube_pod_owner"
	MetricKubePodRequests = "kube_pod_container_resource_requests"
	MetricKubePodPhase    = "kube_pod_status_phase"
	MetricKubePodInfo     = "kube_pod_info"
	MetricKueuePending    = "kueue_pending_workloads"
	MetricKueueWait       = "kueue_admission_wait_time_seconds_bucket"
	MetricPendingGPUs     = "gpuledger_pending_workload_gpus"
	MetricPendingAge      = "gpuledger_pending_workload_age_seconds_bucket"
	MetricVLLMRunning     = "vllm:num_requests_running"
	MetricVLLMWaiting     = "vllm:num_requests_waiting"
	MetricVLLMTokens      = "vllm:generation_tokens_total"
	MetricVLLMRequests    = "vllm:request_success_total"
	// MetricArrivals counts an endpoint's requests as they arrive in front
	// of its model servers (a gateway's counter, renamed to this by the
	// scrape or recorded under it), with the endpoint's namespace and
	// model_name.
	MetricArrivals        = "gpuledger_endpoint_arrivals_total"
	LabelQueueDCGM        = "kueue_x_k8s_io_queue_name"
	LabelQueueKubeState   = "label_kueue_x_k8s_io_queue_name"
	maxRecordedLineErrors = 10
)

// ReadMetrics are the names of every metric ingest reads (histograms by
// their _bucket series), for scrape configurations and their tests.
var ReadMetrics = []string{
	MetricGPUUtil, MetricGREngineActive, MetricFBUsed, MetricPowerUsage, MetricTotalEnergy,
	MetricKubePodLabels, MetricKubePodOwner, MetricKubePodRequests, MetricKubePodInfo, MetricKubePodPhase,
	MetricKueuePending, MetricKueueWait, MetricPendingGPUs, MetricPendingAge,
	MetricVLLMRunning, MetricVLLMWaiting, MetricVLLMTokens, MetricVLLMRequests, MetricArrivals,
}

func fieldOf(metric string) attribution.Field {
	switch metric {
	case MetricGPUUtil:
		return attribution.FieldGPUUtil
	case MetricGREngineActive:
		return attribution.FieldGREngineActive
	case MetricFBUsed:
		return attribution.FieldFBUsed
	case MetricPowerUsage:
		return attribution.FieldPowerUsage
	case MetricTotalEnergy:
		return attribution.FieldTotalEnergy
	}
	return attribution.FieldUnknown
}

// Stats counts what a Parser saw.
type Stats struct {
	// Lines is the number of sample lines parsed.
	Lines uint64
	// Samples is the number of DCGM samples passed to the sink.
	Samples uint64
	// Pods is the number of kube_pod_labels series passed to the sink.
	Pods uint64
	// Queues is the number of queue samples (Kueue's, the pending
	// workloads' from gpuledger's controller, and vLLM's endpoint
	// series) passed to the sink.
	Queues uint64
	// Skipped counts series of metrics ingest does not read.
	Skipped uint64
	// Invalid counts lines that are not valid exposition.
	Invalid uint64
	// MissingLabels counts DCGM series without a Hostname or gpu label.
	MissingLabels uint64
	// StaleMarkers counts staleness markers (a series ended) received by
	// remote write.
	StaleMarkers uint64
	// TooNew counts samples a live pipeline dropped for being stamped too
	// far ahead of its clock.
	TooNew uint64
	// BadValues counts samples of metrics ingest reads refused for their
	// value or labels, by reason (BadValueReasons gives each index's
	// name): NaN, infinite, negative, past the field's range, labels that
	// are not UTF-8. Nothing of such a sample is used.
	BadValues [NumBadValueReasons]uint64
}

// Why a sample is refused for its value or labels (Stats.BadValues).
const (
	badNaN = iota
	badInfinite
	badNegative
	badOutOfRange
	badUTF8
	// NumBadValueReasons is how many reasons there are.
	NumBadValueReasons
)

// BadValueReasons names Stats.BadValues' reasons, as metrics and answers
// label them.
var BadValueReasons = [NumBadValueReasons]string{"nan", "infinite", "negative", "out_of_range", "invalid_utf8"}

// fieldMax is the largest value a DCGM field can take: utilisation in
// percent, the graphics engine's activity as a ratio, power in W (no GPU
// draws 10 kW), framebuffer in MiB (1 PiB) and the energy counter in mJ
// (1e18 mJ is 30,000 years at 1 kW). A value past it is a broken exporter
// or a hostile sender; clamping it would bill something nobody measured.
func fieldMax(f attribution.Field) float64 {
	switch f {
	case attribution.FieldGPUUtil:
		return 100
	case attribution.FieldGREngineActive:
		return 1
	case attribution.FieldPowerUsage:
		return 10_000
	case attribution.FieldFBUsed:
		return 1 << 30
	case attribution.FieldTotalEnergy:
		return 1e18
	}
	return math.MaxFloat64
}

// badValue says why a sample of a metric ingest reads cannot be used, -1
// when it can: every metric it reads (DCGM's fields, kube-state-metrics'
// pod series, Kueue's and vLLM's gauges, counters and buckets) is finite
// and not negative, DCGM's fields within their range (fieldMax), and label
// names and values are UTF-8 (as the exposition format and remote write
// require).
func badValue(f attribution.Field, tags []prometheus.Tag, value float64, checkUTF8 bool) int {
	switch {
	case math.IsNaN(value):
		return badNaN
	case math.IsInf(value, 0):
		return badInfinite
	case value < 0:
		return badNegative
	case value > fieldMax(f):
		return badOutOfRange
	}
	for i := range tags {
		if checkUTF8 && (!utf8.ValidString(tags[i].Key) || !utf8.ValidString(tags[i].Value)) {
			return badUTF8
		}
	}
	return -1
}

// Parser parses exposition bodies. It reuses its buffers between calls and
// is not safe for concurrent use.
type Parser struct {
	// rows is VictoriaMetrics' parse of one line, lines a body's rows,
	// and series the labels of the series seen before (seriescache.go).
	rows   prometheus.Rows
	lines  []parsedLine
	series seriesCache
	sample attribution.Sample
	queue  attribution.QueueSample
	stats  Stats
	// errs holds the first invalid lines' messages, for the caller to report.
	errs []string

	// rw is the remote-write decoding, its buffers reused between
	// requests.
	rw RemoteWrite
	// scan is an export line's tokens, reused between lines.
	scan rawExport
	// seriesKey is a gateway series' other labels, reused between samples.
	seriesKey []byte
	// validUTF8 is set while the rows come from a body known to be valid
	// UTF-8 (checked whole, once): their labels need no check of their
	// own.
	validUTF8 bool
	// exportRuns are where each export line's samples start in rw.batch,
	// exportMerged the samples of all lines in time order.
	exportRuns   []int
	exportMerged []rwSample
	// allCached says every row of the body being parsed came through the
	// series cache (handleSeriesRow), none through handleRow.
	allCached bool
}

// Stats returns the counters so far.
func (p *Parser) Stats() Stats { return p.stats }

// ParseExposition parses one Prometheus text exposition body, such as one
// scrape of dcgm-exporter, and passes its samples to sink in time order.
// Lines without a timestamp get defaultMs (the scrape time, in Unix
// milliseconds). Invalid
// lines are skipped and counted; the returned error describes the first few
// of them, after every valid line was delivered.
//
// body is only read during the call; nothing keeps a reference to it.
func (p *Parser) ParseExposition(body []byte, defaultMs int64, sink Sink) error {
	p.errs = p.errs[:0]
	invalid := p.stats.Invalid
	// The rows' strings are the series cache's or copies: nothing keeps
	// body. The rows are overwritten by the next call.
	p.unmarshal(unsafe.String(unsafe.SliceData(body), len(body)))
	// Unquoting a label value turns escapes into ASCII: a valid body has
	// valid labels. A cached series' labels were checked when it was
	// cached: the check of the whole body is for the others.
	p.validUTF8 = p.allCached || utf8.Valid(body)
	defer func() { p.validUTF8 = false }()
	// Attribution takes samples in time order: a body of timestamped lines
	// (a file of many scrapes) is put in order, each series' own order kept.
	rowTime := func(r *prometheus.Row) int64 {
		if r.Timestamp == 0 {
			return defaultMs
		}
		return r.Timestamp
	}
	byTime := func(a, b parsedLine) int { return cmp.Compare(rowTime(&a.Row), rowTime(&b.Row)) }
	if !slices.IsSortedFunc(p.lines, byTime) {
		slices.SortStableFunc(p.lines, byTime)
	}
	for i := range p.lines {
		l := &p.lines[i]
		ts := l.Timestamp
		if ts == 0 {
			ts = defaultMs
		}
		if l.series != nil {
			p.handleSeriesRow(l.series, l.Value, ts, sink)
			continue
		}
		p.handleRow(l.Metric, l.Tags, l.Value, ts, sink)
	}
	p.stats.Lines += uint64(len(p.lines))
	if n := p.stats.Invalid - invalid; n > 0 {
		return fmt.Errorf("%d invalid exposition line(s) skipped, first: %s", n, p.errs[0])
	}
	return nil
}

func (p *Parser) logLineError(s string) {
	p.stats.Invalid++
	if len(p.errs) < maxRecordedLineErrors {
		p.errs = append(p.errs, s)
	}
}

// isPodMetric says whether a metric is one of kube-state-metrics' pod
// series ingest reads.
func isPodMetric(metric string) bool {
	switch metric {
	case MetricKubePodLabels, MetricKubePodOwner, MetricKubePodRequests, MetricKubePodPhase, MetricKubePodInfo:
		return true
	}
	return false
}

// handleRow turns one sample of one series into what attribution takes.
// All decoders (exposition, remote write, export JSON lines) end here, so
// label spellings are normalised in one place.
func (p *Parser) handleRow(metric string, tags []prometheus.Tag, value float64, ts int64, sink Sink) {
	isPod, qm, f := isPodMetric(metric), queueMetricOf(metric), fieldOf(metric)
	if !isPod && qm == attribution.QueueMetricUnknown && f == attribution.FieldUnknown {
		p.stats.Skipped++
		return
	}
	if r := badValue(f, tags, value, !p.validUTF8); r >= 0 {
		p.stats.BadValues[r]++
		return
	}
	p.handleKnownRow(metric, isPod, qm, f, tags, value, ts, sink)
}

// handleKnownRow is handleRow past the checks of the metric and the value.
func (p *Parser) handleKnownRow(metric string, isPod bool, qm attribution.QueueMetric, f attribution.Field, tags []prometheus.Tag, value float64, ts int64, sink Sink) {
	if isPod {
		p.handlePodRow(metric, tags, value, ts, sink)
		return
	}
	switch {
	case qm == attribution.QueueMetricUnknown:
	case qm.IsEndpoint():
		p.handleEndpointRow(qm, tags, value, ts, sink)
		return
	default:
		p.handleQueueRow(qm, tags, value, ts, sink)
		return
	}
	p.emitDCGM(dcgmSample(f, tags), value, ts, sink)
}

// emitDCGM passes on a DCGM sample, or counts it as missing the labels
// that name its device.
func (p *Parser) emitDCGM(sample attribution.Sample, value float64, ts int64, sink Sink) {
	s := &p.sample
	*s = sample
	s.TimeMs, s.Value = ts, value
	if s.Node == "" || s.GPU == "" {
		p.stats.MissingLabels++
		return
	}
	p.stats.Samples++
	sink.Add(s)
}

// dcgmSample is the sample a DCGM series' labels describe, without its
// time and value.
func dcgmSample(f attribution.Field, tags []prometheus.Tag) attribution.Sample {
	s := attribution.Sample{Field: f}
	// With honorLabels false a scrape renames the exporter's namespace, pod
	// and container to exported_*, and the plain names then describe the
	// exporter itself: the exported_ spelling names the holder, and the
	// plain one is passed on as the exporter's pod, which attribution
	// learns is never a holder (the series of a free GPU carry only it).
	var ns, pod string
	relabelled := false
	for _, t := range tags {
		switch t.Key {
		case "Hostname", "hostname":
			s.Node = t.Value
		case "gpu":
			s.GPU = t.Value
		case "GPU_I_PROFILE":
			s.Profile = t.Value
		case "GPU_I_ID":
			s.Instance = t.Value
		case "namespace", "pod_namespace":
			ns = t.Value
		case "exported_namespace":
			s.Namespace, relabelled = t.Value, true
		case "pod", "pod_name":
			pod = t.Value
		case "exported_pod":
			s.Pod, relabelled = t.Value, true
		case LabelQueueDCGM:
			s.Queue = t.Value
		case "dra_claim_name":
			s.DRA = t.Value != ""
		case "job":
			s.Job = t.Value
		}
	}
	if relabelled {
		s.ExporterNamespace, s.ExporterPod = ns, pod
	} else {
		s.Namespace, s.Pod = ns, pod
	}
	return s
}

// scrapedPod reads the namespace and pod a series is about from a
// scrape's labels: with honorLabels false the target's own labels are
// renamed exported_* and the plain ones name the scraped pod itself, so
// exported_* win.
type scrapedPod struct {
	ns, pod, expNS, expPod string
	hasNS, hasPod          bool
}

// take keeps t when it is one of those labels, and says whether it was.
func (s *scrapedPod) take(t prometheus.Tag) bool {
	switch t.Key {
	case "namespace":
		s.ns = t.Value
	case "exported_namespace":
		s.expNS, s.hasNS = t.Value, true
	case "pod":
		s.pod = t.Value
	case "exported_pod":
		s.expPod, s.hasPod = t.Value, true
	default:
		return false
	}
	return true
}

// names returns the namespace and pod, exported_* first.
func (s *scrapedPod) names() (ns, pod string) {
	ns, pod = s.ns, s.pod
	if s.hasNS {
		ns = s.expNS
	}
	if s.hasPod {
		pod = s.expPod
	}
	return ns, pod
}

// Pod labels that name a pod's top-level workload, most specific first:
// kube_pod_owner names only the direct owner (the Job of a JobSet, the
// ReplicaSet of a Deployment), these name what a team submitted.
var workloadLabels = []struct{ label, kind string }{
	{"label_jobset_sigs_k8s_io_jobset_name", "JobSet"},
	{"label_training_kubeflow_org_job_name", "PyTorchJob"},
	{"label_ray_io_cluster", "RayCluster"},
	{"label_leaderworkerset_sigs_k8s_io_name", "LeaderWorkerSet"},
	{"label_batch_kubernetes_io_job_name", "Job"},
	{"label_job_name", "Job"},
}

// handlePodRow reads what kube-state-metrics says of a pod at ts: its
// queue and workload labels (kube_pod_labels), its owner (kube_pod_owner),
// its node (kube_pod_info, and the requests), its containers' GPU requests
// (kube_pod_container_resource_requests with a GPU resource: nvidia_com_gpu
// and its shared variants, nvidia_com_mig_<profile>, or a milli-GPU
// resource such as alibabacloud_com_gpu_milli) and whether it is Running
// (the phase="Running" series of kube_pod_status_phase). Scraped with
// honorLabels false, the pod's labels are exported_* and the plain ones
// name kube-state-metrics' own pod: exported_* win.
func (p *Parser) handlePodRow(metric string, tags []prometheus.Tag, value float64, ts int64, sink Sink) {
	p.emitPod(metric, podSeriesLabelsOf(tags), value, ts, sink)
}

// podSeriesLabels are what a kube-state-metrics pod series' labels say.
type podSeriesLabels struct {
	pi                                                    attribution.PodInfo
	resource, ownerKind, ownerName, wlKind, wlName, phase string
}

func podSeriesLabelsOf(tags []prometheus.Tag) podSeriesLabels {
	var l podSeriesLabels
	pi := &l.pi
	var node string
	var expNode bool
	var at scrapedPod
	wlRank := len(workloadLabels)
	for _, t := range tags {
		if at.take(t) {
			continue
		}
		switch t.Key {
		case "node":
			node = t.Value
		case "exported_node":
			pi.Node, expNode = t.Value, true
		case "container":
			pi.Container = t.Value
		case "exported_container":
			pi.Container = t.Value
		case "resource":
			l.resource = t.Value
		case "phase":
			l.phase = t.Value
		case "owner_kind":
			l.ownerKind = t.Value
		case "owner_name":
			l.ownerName = t.Value
		case LabelQueueKubeState:
			pi.Queue = t.Value
		default:
			for i := 0; i < wlRank; i++ {
				if t.Key == workloadLabels[i].label && t.Value != "" {
					l.wlKind, l.wlName, wlRank = workloadLabels[i].kind, t.Value, i
					break
				}
			}
		}
	}
	pi.Namespace, pi.Pod = at.names()
	if !expNode {
		pi.Node = node
	}
	return l
}

// emitPod passes on what a sample of a pod series says of its pod.
func (p *Parser) emitPod(metric string, l podSeriesLabels, value float64, ts int64, sink Sink) {
	pi := l.pi
	pi.TimeMs = ts
	if pi.Pod == "" {
		p.stats.MissingLabels++
		return
	}
	switch metric {
	case MetricKubePodLabels:
		pi.OwnerKind, pi.OwnerName = l.wlKind, l.wlName
		pi.Node = ""
	case MetricKubePodOwner:
		if l.ownerName == "" || l.ownerName == "<none>" {
			return
		}
		pi.OwnerKind, pi.OwnerName = l.ownerKind, l.ownerName
		pi.Node = ""
	case MetricKubePodRequests:
		kind, ok := gpuResourceKind(l.resource)
		if !ok || !(value > 0) || math.IsInf(value, 0) {
			p.stats.Skipped++
			return
		}
		pi.Kind = kind
		pi.RequestMilli = int64(math.Round(value * 1000))
	case MetricKubePodPhase:
		if l.phase != "Running" {
			p.stats.Skipped++
			return
		}
		pi.Phase = attribution.PhaseNotRunning
		if value == 1 {
			pi.Phase = attribution.PhaseRunning
		}
		pi.Node = ""
	}
	if pi.Queue == "" && pi.OwnerName == "" && pi.RequestMilli == 0 && pi.Phase == attribution.PhaseUnknown && pi.Node == "" {
		p.stats.Skipped++
		return
	}
	p.stats.Pods++
	sink.AddPod(pi)
}

// gpuResourceKind maps a kube-state-metrics resource label (sanitised:
// nvidia_com_gpu) to attribution's request kind: whole or shared GPUs
// (nvidia_com_gpu, nvidia_com_gpu_shared, a *gpu_milli resource), or a MIG
// profile (nvidia_com_mig_3g_40gb is kind mig-3g_40gb).
func gpuResourceKind(r string) (string, bool) {
	switch {
	case r == "nvidia_com_gpu" || strings.HasPrefix(r, "nvidia_com_gpu_") || strings.HasSuffix(r, "gpu_milli"):
		return attribution.KindGPU, true
	case strings.HasPrefix(r, "nvidia_com_mig_"):
		return attribution.KindMIGPrefix + strings.TrimPrefix(r, "nvidia_com_mig_"), true
	}
	return "", false
}
