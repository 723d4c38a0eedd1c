package ingest

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/internal/testenv"
)

// recorder is a Sink that keeps copies of what it gets.
type recorder struct {
	samples []attribution.Sample
	pods    []attribution.PodInfo
	queues  []attribution.QueueSample
}

func (r *recorder) AddQueue(q *attribution.QueueSample) {
	c := *q
	c.ClusterQueue, c.Series = strings.Clone(c.ClusterQueue), strings.Clone(c.Series)
	r.queues = append(r.queues, c)
}

func (r *recorder) Add(s *attribution.Sample) {
	c := *s
	c.Node, c.GPU, c.Profile, c.Instance = strings.Clone(c.Node), strings.Clone(c.GPU), strings.Clone(c.Profile), strings.Clone(c.Instance)
	c.Namespace, c.Pod, c.Queue = strings.Clone(c.Namespace), strings.Clone(c.Pod), strings.Clone(c.Queue)
	c.ExporterNamespace, c.ExporterPod = strings.Clone(c.ExporterNamespace), strings.Clone(c.ExporterPod)
	r.samples = append(r.samples, c)
}

func (r *recorder) AddPod(p attribution.PodInfo) {
	p.Namespace, p.Pod, p.Queue = strings.Clone(p.Namespace), strings.Clone(p.Pod), strings.Clone(p.Queue)
	p.OwnerKind, p.OwnerName, p.Container = strings.Clone(p.OwnerKind), strings.Clone(p.OwnerName), strings.Clone(p.Container)
	p.Node, p.Kind = strings.Clone(p.Node), strings.Clone(p.Kind)
	r.pods = append(r.pods, p)
}

// TestRealCapture parses a real dcgm-exporter /metrics capture (T4 nodes,
// and one A10G series with a pod) and checks what reaches attribution.
func TestRealCapture(t *testing.T) {
	body := testenv.ReadData(t, "dcgm-exporter/samples/t4-a10g-datadog-fixture.prom")
	var p Parser
	var r recorder
	if err := p.ParseExposition(body, 1_700_000_000_000, &r); err != nil {
		t.Fatal(err)
	}
	type key struct {
		node  string
		field attribution.Field
		value float64
	}
	got := map[key]bool{}
	for _, s := range r.samples {
		if s.TimeMs != 1_700_000_000_000 || s.GPU != "0" || s.Pod != "" || s.Profile != "" {
			t.Errorf("unexpected sample %+v", s)
		}
		got[key{s.Node, s.Field, s.Value}] = true
	}
	// Values as the capture has them.
	for _, k := range []key{
		{"424773df46e0", attribution.FieldPowerUsage, 8.969},
		{"424773df46e0", attribution.FieldTotalEnergy, 128996013},
		{"424773df46e0", attribution.FieldGPUUtil, 0},
	} {
		if !got[k] {
			t.Errorf("missing sample %+v", k)
		}
	}
	st := p.Stats()
	if st.Invalid != 0 || st.Samples == 0 || st.Skipped == 0 {
		t.Errorf("stats %+v: want valid samples and skipped series", st)
	}
}

// TestRealKubeStateMetrics parses kube-state-metrics' own expected output:
// one container requests one nvidia.com/gpu, and nothing in it is invalid.
func TestRealKubeStateMetrics(t *testing.T) {
	body := testenv.ReadData(t, "kube-state-metrics/pod-exposition.prom")
	var p Parser
	var r recorder
	if err := p.ParseExposition(body, 1, &r); err != nil {
		t.Fatal(err)
	}
	want := []attribution.PodInfo{
		{TimeMs: 1, Namespace: "default", Pod: "pod0", Node: "node1", Container: "pod1_con1", Kind: attribution.KindGPU, RequestMilli: 1000},
		{TimeMs: 1, Namespace: "default", Pod: "pod0", Node: "node1"},                   // kube_pod_info
		{TimeMs: 1, Namespace: "default", Pod: "pod0", Phase: attribution.PhaseRunning}, // kube_pod_status_phase
	}
	if diff := cmp.Diff(want, r.pods); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if len(r.samples) != 0 || p.Stats().Lines == 0 {
		t.Errorf("got %d samples from %d lines", len(r.samples), p.Stats().Lines)
	}
}

func TestLabelSpellings(t *testing.T) {
	f := func(line string, want attribution.Sample) {
		t.Helper()
		var p Parser
		var r recorder
		if err := p.ParseExposition([]byte(line+"\n"), 1000, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.samples) != 1 {
			t.Fatalf("%s: got %d samples, want 1", line, len(r.samples))
		}
		if diff := cmp.Diff(want, r.samples[0]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", line, diff)
		}
	}
	// Released exporters: Hostname.
	f(`DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-x",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="c",namespace="ns",pod="p"} 87`,
		attribution.Sample{TimeMs: 1000, Node: "node-a", GPU: "1", Namespace: "ns", Pod: "p", Field: attribution.FieldGPUUtil, Value: 87})
	// dcgm-exporter main: hostname; explicit timestamp wins over the default.
	f(`DCGM_FI_DEV_POWER_USAGE{gpu="0",hostname="node-b",namespace="",pod=""} 61.5 1700000000123`,
		attribution.Sample{TimeMs: 1700000000123, Node: "node-b", GPU: "0", Field: attribution.FieldPowerUsage, Value: 61.5})
	// Scraped with honorLabels false: exported_* hold the pod, the plain
	// names the exporter's own pod, whatever their order; the exporter's
	// pod is passed on so that attribution never charges it.
	relabelled := attribution.Sample{TimeMs: 1000, Node: "node-c", GPU: "2", Namespace: "team-a", Pod: "train-1",
		ExporterNamespace: "gpu-operator", ExporterPod: "nvidia-dcgm-exporter-x", Field: attribution.FieldGREngineActive, Value: 0.5}
	f(`DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",Hostname="node-c",exported_namespace="team-a",exported_pod="train-1",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x"} 0.5`, relabelled)
	f(`DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",Hostname="node-c",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x",exported_namespace="team-a",exported_pod="train-1"} 0.5`, relabelled)
	// The same scrape's free GPU: the exporter's labels only (dcgm-exporter
	// wrote pod="", which the scrape dropped and filled with its target's).
	// It reads as held by the exporter's pod; attribution knows better.
	f(`DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="3",Hostname="node-c",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x"} 0`,
		attribution.Sample{TimeMs: 1000, Node: "node-c", GPU: "3", Namespace: "gpu-operator", Pod: "nvidia-dcgm-exporter-x", Field: attribution.FieldGREngineActive})
	// A device allocated through a DRA ResourceClaim.
	f(`DCGM_FI_DEV_GPU_UTIL{gpu="4",Hostname="node-c",namespace="ns",pod="p",dra_claim_name="gpu-claim",dra_driver_name="gpu.nvidia.com"} 3`,
		attribution.Sample{TimeMs: 1000, Node: "node-c", GPU: "4", Namespace: "ns", Pod: "p", DRA: true, Field: attribution.FieldGPUUtil, Value: 3})
	// Old exporters (-o): uuid, pod_name, pod_namespace; MIG instance labels.
	f(`DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",uuid="GPU-y",device="nvidia0",modelName="NVIDIA A100 80GB PCIe",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-d",container_name="w",pod_name="infer-0",pod_namespace="ai-1"} 0.25`,
		attribution.Sample{TimeMs: 1000, Node: "node-d", GPU: "0", Profile: "3g.40gb", Instance: "2", Namespace: "ai-1", Pod: "infer-0", Field: attribution.FieldGREngineActive, Value: 0.25})
	// Pod labels enabled: the Kueue queue rides on the series.
	f(`DCGM_FI_DEV_FB_USED{gpu="3",Hostname="node-e",kueue_x_k8s_io_queue_name="training",namespace="research",pod="p-0"} 40960`,
		attribution.Sample{TimeMs: 1000, Node: "node-e", GPU: "3", Namespace: "research", Pod: "p-0", Queue: "training", Field: attribution.FieldFBUsed, Value: 40960})
}

func TestKubePodInfo(t *testing.T) {
	body := `# TYPE kube_pod_labels gauge
kube_pod_labels{namespace="research",pod="train-1-0",uid="u1",label_kueue_x_k8s_io_queue_name="training"} 1
kube_pod_labels{namespace="default",pod="web",uid="u2",label_app="web"} 1
kube_pod_labels{namespace="research",pod="sweep-0",label_job_name="sweep-a",label_jobset_sigs_k8s_io_jobset_name="sweep",label_kueue_x_k8s_io_queue_name="training"} 1
kube_pod_owner{namespace="research",pod="train-1-0",uid="u1",owner_kind="Job",owner_name="train-1",owner_is_controller="true"} 1
kube_pod_owner{namespace="default",pod="bare",uid="u3",owner_kind="<none>",owner_name="<none>",owner_is_controller="<none>"} 1
kube_pod_container_resource_requests{namespace="nb",pod="nb-0",uid="u4",container="jupyter",node="n1",resource="nvidia_com_gpu",unit="integer"} 2
kube_pod_container_resource_requests{namespace="nb",pod="nb-0",uid="u4",container="jupyter",node="n1",resource="cpu",unit="core"} 4
kube_pod_container_resource_requests{namespace="ali",pod="p-1",uid="u5",container="main",node="n2",resource="alibabacloud_com_gpu_milli",unit="integer"} 250
kube_pod_container_resource_requests{namespace="serve",pod="llm-0",container="vllm",node="mig-1",resource="nvidia_com_mig_3g_40gb",unit="integer"} 1
kube_pod_container_resource_requests{namespace="nb",pod="nb-1",container="jupyter",node="ts-1",resource="nvidia_com_gpu_shared",unit="integer"} 1
kube_pod_info{namespace="nb",pod="nb-0",uid="u4",host_ip="10.0.0.1",pod_ip="10.1.0.5",node="n1",created_by_kind="StatefulSet",created_by_name="nb",priority_class="",host_network="false"} 1
kube_pod_status_phase{namespace="nb",pod="nb-0",uid="u4",phase="Pending"} 0
kube_pod_status_phase{namespace="nb",pod="nb-0",uid="u4",phase="Running"} 1
kube_pod_status_phase{namespace="nb",pod="done-0",uid="u6",phase="Running"} 0
`
	var p Parser
	var r recorder
	if err := p.ParseExposition([]byte(body), 1, &r); err != nil {
		t.Fatal(err)
	}
	want := []attribution.PodInfo{
		{TimeMs: 1, Namespace: "research", Pod: "train-1-0", Queue: "training"},
		{TimeMs: 1, Namespace: "research", Pod: "sweep-0", Queue: "training", OwnerKind: "JobSet", OwnerName: "sweep"},
		{TimeMs: 1, Namespace: "research", Pod: "train-1-0", OwnerKind: "Job", OwnerName: "train-1"},
		{TimeMs: 1, Namespace: "nb", Pod: "nb-0", Node: "n1", Container: "jupyter", Kind: attribution.KindGPU, RequestMilli: 2000},
		{TimeMs: 1, Namespace: "ali", Pod: "p-1", Node: "n2", Container: "main", Kind: attribution.KindGPU, RequestMilli: 250_000},
		{TimeMs: 1, Namespace: "serve", Pod: "llm-0", Node: "mig-1", Container: "vllm", Kind: attribution.MIGKind("3g.40gb"), RequestMilli: 1000},
		{TimeMs: 1, Namespace: "nb", Pod: "nb-1", Node: "ts-1", Container: "jupyter", Kind: attribution.KindGPU, RequestMilli: 1000},
		{TimeMs: 1, Namespace: "nb", Pod: "nb-0", Node: "n1"},
		{TimeMs: 1, Namespace: "nb", Pod: "nb-0", Phase: attribution.PhaseRunning},
		{TimeMs: 1, Namespace: "nb", Pod: "done-0", Phase: attribution.PhaseNotRunning},
	}
	if diff := cmp.Diff(want, r.pods); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// TestKubePodInfoRelabelled: kube-state-metrics scraped with honorLabels
// false (the Prometheus Operator's default ServiceMonitor) carries the pod
// in exported_namespace and exported_pod, and its own pod in namespace and
// pod: the queue, owner, request and phase are the exported pod's.
func TestKubePodInfoRelabelled(t *testing.T) {
	body := `kube_pod_labels{namespace="monitoring",pod="kube-state-metrics-7c9",exported_namespace="research",exported_pod="train-1-0",label_kueue_x_k8s_io_queue_name="training"} 1
kube_pod_owner{namespace="monitoring",pod="kube-state-metrics-7c9",exported_namespace="research",exported_pod="train-1-0",owner_kind="Job",owner_name="train-1"} 1
kube_pod_container_resource_requests{namespace="monitoring",pod="kube-state-metrics-7c9",container="kube-state-metrics",exported_namespace="research",exported_pod="train-1-0",exported_container="worker",node="n1",resource="nvidia_com_gpu",unit="integer"} 4
kube_pod_status_phase{namespace="monitoring",pod="kube-state-metrics-7c9",exported_namespace="research",exported_pod="train-1-0",phase="Running"} 1
`
	var p Parser
	var r recorder
	if err := p.ParseExposition([]byte(body), 7, &r); err != nil {
		t.Fatal(err)
	}
	want := []attribution.PodInfo{
		{TimeMs: 7, Namespace: "research", Pod: "train-1-0", Queue: "training"},
		{TimeMs: 7, Namespace: "research", Pod: "train-1-0", OwnerKind: "Job", OwnerName: "train-1"},
		{TimeMs: 7, Namespace: "research", Pod: "train-1-0", Node: "n1", Container: "worker", Kind: attribution.KindGPU, RequestMilli: 4000},
		{TimeMs: 7, Namespace: "research", Pod: "train-1-0", Phase: attribution.PhaseRunning},
	}
	if diff := cmp.Diff(want, r.pods); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

// TestInvalidLinesKeepTheRest: bad lines are counted and reported, and every
// good line around them still reaches the sink.
func TestInvalidLinesKeepTheRest(t *testing.T) {
	body := `DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} 10
DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n" 10
DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="n"} ten
DCGM_FI_DEV_GPU_UTIL{Hostname="n"} 5
DCGM_FI_DEV_GPU_UTIL{gpu="3",Hostname="n"} 30
`
	var p Parser
	var r recorder
	err := p.ParseExposition([]byte(body), 1, &r)
	if err == nil || !strings.Contains(err.Error(), "2 invalid exposition line(s)") || !strings.Contains(err.Error(), `gpu=\"1\"`) {
		t.Errorf("error %v: want 2 invalid lines reported, the first quoted", err)
	}
	if len(r.samples) != 2 || r.samples[0].GPU != "0" || r.samples[1].GPU != "3" {
		t.Errorf("samples %+v: want gpu 0 and 3", r.samples)
	}
	if st := p.Stats(); st.Invalid != 2 || st.MissingLabels != 1 {
		t.Errorf("stats %+v: want 2 invalid, 1 missing labels", st)
	}
}

// FuzzParseExposition: any body parses without panic, and every sample
// delivered names its device.
func FuzzParseExposition(f *testing.F) {
	f.Add([]byte(`DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n",namespace="a",pod="b"} 10`))
	f.Add([]byte("kube_pod_labels{namespace=\"a\",pod=\"b\",label_kueue_x_k8s_io_queue_name=\"q\"} 1\n# HELP x\n"))
	f.Add([]byte(`DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n\"x",exported_pod="p"} NaN 12`))
	f.Add([]byte("kueue_admission_wait_time_seconds_bucket{cluster_queue=\"q\",le=\"+Inf\"} 3\ngpuledger_pending_workload_age_seconds_bucket{cluster_queue=\"q\",le=\"x\"} 1\n"))
	f.Add([]byte("vllm:num_requests_running{model_name=\"m\",namespace=\"a\",pod=\"b\"} 2\nvllm:generation_tokens_total{model_name=\"m\",exported_pod=\"b\"} 1e3\n"))
	if b, err := os.ReadFile("../../shared/data/dcgm-exporter/samples/t4-a10g-datadog-fixture.prom"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Parser
		var r recorder
		_ = p.ParseExposition(body, 1, &r)
		for _, s := range r.samples {
			if s.Node == "" || s.GPU == "" || s.Field == attribution.FieldUnknown {
				t.Fatalf("sample without device or field: %+v", s)
			}
		}
	})
}

// TestKueueSeries: Kueue's queue series and the controller's pending
// workloads reach attribution with their ClusterQueue, bucket bound and
// series labels; a follower replica's series and a series without a
// ClusterQueue do not; a bound that is not a number is a line error.
func TestKueueSeries(t *testing.T) {
	const t0ms = 1_790_000_000_000
	body := []byte(`# TYPE kueue_pending_workloads gauge
kueue_pending_workloads{cluster_queue="cq-a",status="active",replica_role="leader"} 3
kueue_pending_workloads{cluster_queue="cq-a",status="inadmissible",replica_role="leader"} 1
kueue_pending_workloads{cluster_queue="cq-a",status="active",replica_role="follower"} 3
kueue_pending_workloads{status="active"} 9
kueue_admission_wait_time_seconds_bucket{cluster_queue="cq-a",priority_class="high",replica_role="leader",le="1280"} 4
kueue_admission_wait_time_seconds_bucket{cluster_queue="cq-a",priority_class="high",replica_role="leader",le="+Inf"} 6
kueue_admission_wait_time_seconds_bucket{cluster_queue="cq-a",priority_class="high",replica_role="leader",le="soon"} 6
kueue_admission_wait_time_seconds_sum{cluster_queue="cq-a",priority_class="high",replica_role="leader"} 6000
gpuledger_pending_workload_gpus{cluster_queue="cq-a"} 32
gpuledger_pending_workload_age_seconds_bucket{cluster_queue="cq-a",le="1800"} 2
`)
	var p Parser
	var r recorder
	err := p.ParseExposition(body, t0ms, &r)
	if err == nil || !strings.Contains(err.Error(), `le="soon"`) {
		t.Errorf("error %v; want one naming le=\"soon\"", err)
	}
	inf := math.Inf(1)
	want := []attribution.QueueSample{
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueuePendingWorkloads, Series: "active,", Value: 3},
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueuePendingWorkloads, Series: "inadmissible,", Value: 1},
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueueAdmissionWait, Le: 1280, Series: ",high", Value: 4},
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueueAdmissionWait, Le: inf, Series: ",high", Value: 6},
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueuePendingGPUs, Series: ",", Value: 32},
		{TimeMs: t0ms, ClusterQueue: "cq-a", Metric: attribution.QueuePendingAge, Le: 1800, Series: ",", Value: 2},
	}
	if diff := cmp.Diff(want, r.queues); diff != "" {
		t.Errorf("queue samples (-want +got):\n%s", diff)
	}
	st := p.Stats()
	if st.Queues != 6 || st.MissingLabels != 1 {
		t.Errorf("stats %+v; want 6 queue samples and 1 without a ClusterQueue", st)
	}
}

// TestVLLMSeries: vLLM's series reach attribution as endpoint samples with
// their model, namespace and pod (exported_* winning, as a scrape with
// honorLabels false writes them) and the labels that tell their series
// apart; a series without a model or pod does not; vLLM's other series
// are skipped.
func TestVLLMSeries(t *testing.T) {
	const t0ms = 1_790_000_000_000
	body := []byte(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama-8b",namespace="serve",pod="llama-7d9f8b6c5-x2x4z"} 3
vllm:num_requests_waiting{engine="0",model_name="llama-8b",namespace="serve",pod="llama-7d9f8b6c5-x2x4z"} 0
vllm:generation_tokens_total{engine="0",model_name="llama-8b",namespace="monitoring",pod="vmagent-0",exported_namespace="serve",exported_pod="llama-7d9f8b6c5-x2x4z"} 12345
vllm:request_success_total{engine="0",finished_reason="stop",model_name="llama-8b",namespace="serve",pod="llama-7d9f8b6c5-x2x4z"} 77
vllm:request_success_total{engine="0",finished_reason="length",model_name="llama-8b",namespace="serve",pod="llama-7d9f8b6c5-x2x4z"} 3
vllm:num_requests_running{engine="0",namespace="serve",pod="p"} 1
vllm:num_requests_running{engine="0",model_name="m",namespace="serve"} 1
vllm:kv_cache_usage_perc{engine="0",model_name="llama-8b",namespace="serve",pod="llama-7d9f8b6c5-x2x4z"} 0.4
`)
	var p Parser
	var r recorder
	if err := p.ParseExposition(body, t0ms, &r); err != nil {
		t.Fatal(err)
	}
	ep := func(m attribution.QueueMetric, series string, v float64) attribution.QueueSample {
		return attribution.QueueSample{TimeMs: t0ms, Namespace: "serve", Pod: "llama-7d9f8b6c5-x2x4z", Model: "llama-8b", Metric: m, Series: series, Value: v}
	}
	want := []attribution.QueueSample{
		ep(attribution.EndpointRunning, "0,", 3),
		ep(attribution.EndpointWaiting, "0,", 0),
		ep(attribution.EndpointTokens, "0,", 12345),
		ep(attribution.EndpointRequests, "0,stop", 77),
		ep(attribution.EndpointRequests, "0,length", 3),
	}
	if diff := cmp.Diff(want, r.queues); diff != "" {
		t.Errorf("endpoint samples (-want +got):\n%s", diff)
	}
	if st := p.Stats(); st.Queues != 5 || st.MissingLabels != 2 || st.Skipped != 1 {
		t.Errorf("stats %+v; want 5 endpoint samples, 2 without a model or pod, 1 skipped", st)
	}
}

// TestArrivalSeries: a gateway's arrivals reach attribution as endpoint
// samples with no pod, their namespace (exported_* winning) and model,
// every other label (the gateway's pod among them) telling its counters
// apart; one without a model does not, one without a pod does.
func TestArrivalSeries(t *testing.T) {
	const t0ms = 1_790_000_000_000
	body := []byte(`# TYPE gpuledger_endpoint_arrivals_total counter
gpuledger_endpoint_arrivals_total{model_name="llama-8b",namespace="serve",pod="epp-0",job="inference-gateway"} 41
gpuledger_endpoint_arrivals_total{model_name="llama-8b",namespace="gateways",pod="epp-1",exported_namespace="serve"} 7
gpuledger_endpoint_arrivals_total{model_name="llama-8b",namespace="serve"} 2
gpuledger_endpoint_arrivals_total{namespace="serve",pod="epp-0"} 1
`)
	var p Parser
	var r recorder
	if err := p.ParseExposition(body, t0ms, &r); err != nil {
		t.Fatal(err)
	}
	ep := func(series string, v float64) attribution.QueueSample {
		return attribution.QueueSample{TimeMs: t0ms, Namespace: "serve", Model: "llama-8b", Metric: attribution.EndpointArrivals, Series: series, Value: v}
	}
	want := []attribution.QueueSample{
		ep("pod=epp-0,job=inference-gateway,", 41),
		ep("pod=epp-1,", 7),
		ep("", 2),
	}
	if diff := cmp.Diff(want, r.queues); diff != "" {
		t.Errorf("arrival samples (-want +got):\n%s", diff)
	}
	if st := p.Stats(); st.Queues != 3 || st.MissingLabels != 1 {
		t.Errorf("stats %+v; want 3 arrival samples, 1 without a model", st)
	}
}
