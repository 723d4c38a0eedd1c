package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang/snappy"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
)

// defaultCounters are dcgm-exporter's etc/default-counters.csv
// (../shared/data/dcgm-exporter/default-counters.csv): what a stock
// deployment sends for every GPU.
var defaultCounters = []string{
	"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
	"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL",
	"DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
	"DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
	"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
}

// podPhases are kube-state-metrics' kube_pod_status_phase series: one per
// phase, 1 for the pod's phase and 0 for the others.
var podPhases = []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}

// Teams in the fleet: each pod's namespace is one team's.
const teams = 50

// rowsPerBlock is how many series vmagent puts in one remote-write
// request (its -remoteWrite.maxRowsPerBlock default).
const rowsPerBlock = 10_000

// fleet is a GPU fleet's remote-write stream as vmagent sends it: every
// 15 s, every default dcgm-exporter counter of every GPU with the labels
// dcgm-exporter renders (label-schema.md) plus vmagent's job and instance,
// and kube-state-metrics' pod series (info, phase, resource requests,
// labels, owner), cut into requests of rowsPerBlock series. Bodies are
// built once and kept compressed, as a sender holds them.
type fleet struct {
	gpus, nodes int
	start       time.Time
	// scrapes[s] holds scrape s's bodies, snappy-compressed.
	scrapes [][][]byte
	// series is how many series (one sample each) a scrape sends; gpu
	// how many of them are dcgm-exporter's.
	series, gpu int
	// bytes is the compressed size of one scrape.
	bytes int
	// pods[n] is the pod on node n, "" for an idle node.
	pods []string
}

// lastMs is the newest stamp of scrape s: its last node's, or its pods'.
func (f *fleet) lastMs(s int) int64 {
	last := int64(4_321)
	for n := range f.nodes {
		last = max(last, int64(n*7919%15_000))
	}
	return f.start.UnixMilli() + int64(s)*15_000 + last
}

// serveClock is the clock gpuledger serve is given: past the last
// scrape's stamp and a marker's (a reorder window past it), so that no
// sample is too new and the window is moved by the samples, as in a live
// feed, while requests come. The hour is not settled while a measurement
// runs.
func (f *fleet) serveClock() time.Time {
	return f.start.Add(time.Duration(len(f.scrapes))*15*time.Second + reorderWindowMs*time.Millisecond + 45*time.Second)
}

// marker is one request of one kube-state-metrics sample stamped ms: the
// phase of the first busy node's pod. It stands for the next scrape,
// whose samples move gpuledger's reorder window past the ones before ms
// less the window; the marker itself stays in the window.
func (f *fleet) marker(ms int64) []byte {
	for n, pod := range f.pods {
		if pod == "" {
			continue
		}
		var one []prompb.TimeSeries
		for _, ts := range appendPod(nil, n, pod, ms) {
			if ts.Labels[0].Value == "kube_pod_status_phase" && slices.Contains(ts.Labels, label("phase", "Running")) {
				one = append(one, ts)
			}
		}
		wr := prompb.WriteRequest{Timeseries: one}
		return snappy.Encode(nil, wr.MarshalProtobuf(nil))
	}
	return nil
}

// makeFleet builds scrapes scrapes of a fleet of gpus GPUs (eight a
// node; 70% of the nodes run one pod that holds all eight), the first
// stamped start. The seed draws which nodes are busy and the values.
func makeFleet(gpus, scrapes int, start time.Time, seed uint64) *fleet {
	rng := rand.New(rand.NewPCG(seed, 17))
	f := &fleet{gpus: gpus, nodes: gpus / 8, start: start}
	pods := make([]string, f.nodes)
	f.pods = pods
	for n := range pods {
		if rng.Float64() < 0.7 {
			pods[n] = fmt.Sprintf("train-%05d-%s-0", n, strconv.FormatUint(rng.Uint64()%1e6, 36))
		}
	}
	for s := range scrapes {
		var all []prompb.TimeSeries
		for n := range f.nodes {
			// vmagent scrapes each target at its own offset in the interval.
			ts := start.UnixMilli() + int64(s)*15_000 + int64(n*7919%15_000)
			all = appendNode(all, rng, n, pods[n], s, ts)
		}
		f.gpu = len(all)
		ts := start.UnixMilli() + int64(s)*15_000 + 4_321
		for n, pod := range pods {
			if pod != "" {
				all = appendPod(all, n, pod, ts)
			}
		}
		f.series = len(all)
		var bodies [][]byte
		size := 0
		for i := 0; i < len(all); i += rowsPerBlock {
			wr := prompb.WriteRequest{Timeseries: all[i:min(i+rowsPerBlock, len(all))]}
			body := snappy.Encode(nil, wr.MarshalProtobuf(nil))
			bodies = append(bodies, body)
			size += len(body)
		}
		f.scrapes = append(f.scrapes, bodies)
		f.bytes = size
	}
	return f
}

func nodeName(n int) string { return fmt.Sprintf("gpu-node-%05d", n) }

func teamOf(n int) string { return fmt.Sprintf("team-%02d", n%teams) }

func label(name, value string) prompb.Label { return prompb.Label{Name: name, Value: value} }

// appendNode appends one dcgm-exporter scrape of node n's eight GPUs.
func appendNode(all []prompb.TimeSeries, rng *rand.Rand, n int, pod string, s int, ts int64) []prompb.TimeSeries {
	host := nodeName(n)
	for g := range 8 {
		act := 0.0
		if pod != "" {
			act = 0.5 + 0.5*rng.Float64()
		}
		for _, c := range defaultCounters {
			labels := []prompb.Label{
				label("__name__", c), label("gpu", strconv.Itoa(g)),
				label("UUID", fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", n, g)),
				label("pci_bus_id", fmt.Sprintf("00000000:%02X:00.0", 0x18+g)),
				label("device", "nvidia"+strconv.Itoa(g)), label("modelName", "NVIDIA H100 80GB HBM3"),
				label("Hostname", host), label("DCGM_FI_DRIVER_VERSION", "570.133.20"),
			}
			if pod != "" {
				labels = append(labels, label("container", "trainer"), label("namespace", teamOf(n)), label("pod", pod))
			}
			labels = append(labels, label("job", "dcgm-exporter"), label("instance", host+":9400"))
			v := float64(rng.IntN(1000))
			switch c {
			case "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
				v = act
			case "DCGM_FI_DEV_GPU_UTIL":
				v = float64(int(act * 100))
			case "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
				v = float64(1e9 + s*10_000_000)
			}
			all = append(all, prompb.TimeSeries{Labels: labels, Samples: []prompb.Sample{{Value: v, Timestamp: ts}}})
		}
	}
	return all
}

// appendPod appends kube-state-metrics' series of the pod on node n.
func appendPod(all []prompb.TimeSeries, n int, pod string, ts int64) []prompb.TimeSeries {
	ns := teamOf(n)
	uid := fmt.Sprintf("%08x-1111-4222-8333-%012x", n, n)
	common := func(name string, more ...prompb.Label) []prompb.Label {
		l := []prompb.Label{label("__name__", name), label("namespace", ns), label("pod", pod), label("uid", uid)}
		l = append(l, more...)
		return append(l, label("job", "kube-state-metrics"), label("instance", "kube-state-metrics:8080"))
	}
	sample := func(v float64) []prompb.Sample { return []prompb.Sample{{Value: v, Timestamp: ts}} }
	jobName := strings.TrimSuffix(pod, "-0")
	all = append(all, prompb.TimeSeries{Labels: common("kube_pod_info", label("host_ip", "10.0.0.1"), label("pod_ip", "10.1.0.1"),
		label("node", nodeName(n)), label("created_by_kind", "Job"), label("created_by_name", jobName),
		label("priority_class", ""), label("host_network", "false")), Samples: sample(1)})
	for _, ph := range podPhases {
		v := 0.0
		if ph == "Running" {
			v = 1
		}
		all = append(all, prompb.TimeSeries{Labels: common("kube_pod_status_phase", label("phase", ph)), Samples: sample(v)})
	}
	for _, r := range []struct {
		resource, unit string
		v              float64
	}{{"cpu", "core", 96}, {"memory", "byte", 1.6e12}, {"nvidia_com_gpu", "integer", 8}} {
		all = append(all, prompb.TimeSeries{Labels: common("kube_pod_container_resource_requests", label("container", "trainer"),
			label("node", nodeName(n)), label("resource", r.resource), label("unit", r.unit)), Samples: sample(r.v)})
	}
	all = append(all, prompb.TimeSeries{Labels: common("kube_pod_labels", label("label_kueue_x_k8s_io_queue_name", "training"),
		label("label_batch_kubernetes_io_job_name", jobName)), Samples: sample(1)})
	all = append(all, prompb.TimeSeries{Labels: common("kube_pod_owner", label("owner_kind", "Job"), label("owner_name", jobName),
		label("owner_is_controller", "true")), Samples: sample(1)})
	return all
}

// config is a gpuledger configuration of the fleet: its nodes, the teams
// by namespace and the H100's price.
func (f *fleet) config() string {
	var b strings.Builder
	b.WriteString("currency: USD\nclusters:\n  - name: fleet\n    nodes:\n")
	for n := range f.nodes {
		fmt.Fprintf(&b, "      - {name: %s, gpuModel: NVIDIA H100 80GB HBM3, gpus: 8, flavor: h100}\n", nodeName(n))
	}
	b.WriteString("resourceFlavors:\n  - name: h100\nteams:\n")
	for i := range teams {
		fmt.Fprintf(&b, "  - {name: team-%02d, namespaces: [team-%02d]}\n", i, i)
	}
	b.WriteString("prices:\n  - {flavor: h100, perGPUHour: 6.88}\n")
	return b.String()
}
