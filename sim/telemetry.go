package sim

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
)

// DriverVersion is the NVIDIA driver the modelled nodes report.
const DriverVersion = "570.133.20"

// Telemetry renders the cluster's exporters scrape by scrape: for every
// scrape instant, the dcgm-exporter series of every GPU and MIG instance
// (with the label set and order dcgm-exporter renders, Kubernetes mapping on)
// followed by kube-state-metrics' series of every running pod (labels,
// owner, GPU request with its node, info, Running phase), the vLLM series
// of every inference pod (vllm.go), then, after a
// Model.Run, Kueue's queue series and gpuledger controller's pending
// workloads (kueue.go), as one Prometheus text exposition body. Run must
// have been called first.
type Telemetry struct {
	// ExporterUpgrades, when set, has each node's dcgm-exporter go away for
	// ExporterUpgradeDown once every 30 days (a rolling upgrade, at a time
	// of its own per node): its GPUs report nothing then, while
	// kube-state-metrics still shows their pods running.
	ExporterUpgrades bool

	c        *Cluster
	next     time.Time
	end      time.Time
	interval time.Duration
	tick     uint64
	devs     []devState
	gpus     []*gpuState
	seenPods map[podName]struct{}
	// pods are the indices in devs of the first device of each pod
	// holding one this scrape (rebuilt when a hold changes).
	pods      []int
	podsStale bool
	// kueue renders the queues' series when the cluster has workload
	// times (Model.Run); nil otherwise.
	kueue *kueueSeries
}

type gpuState struct {
	idleW, maxW float64
	slices      float64 // 7 under MIG, 1 otherwise
	load        float64 // busy compute slices this scrape
	powerW      float64
	energyMJ    float64
}

type devState struct {
	d       *Device
	gpu     *gpuState
	share   float64 // compute slices of the device
	head    []byte  // labels up to the pod attributes, without braces
	holdIdx int
	hold    *Hold
	tail    []byte // the holder's container/namespace/pod labels and '}'
	act     float64
	fbMiB   float64
	fbTotal float64
	down    bool // its exporter is gone this scrape
}

// NewTelemetry returns scrapes at every interval over [start, end).
func NewTelemetry(c *Cluster, start, end time.Time, interval time.Duration) *Telemetry {
	t := &Telemetry{c: c, next: start, end: end, interval: interval, seenPods: make(map[podName]struct{})}
	if len(c.Workloads) > 0 {
		t.kueue = newKueueSeries(c.Workloads)
	}
	for _, n := range c.Nodes {
		idle, maxW := powerEnvelope(n.Model)
		slices := 1.0
		if len(n.MIG) > 0 {
			slices = 7
		}
		perGPU := make([]*gpuState, n.GPUs)
		for g := range perGPU {
			perGPU[g] = &gpuState{idleW: idle, maxW: maxW, slices: slices, energyMJ: float64(fnvHash(n.Name, g)%1e6) * 1e3}
			t.gpus = append(t.gpus, perGPU[g])
		}
		for _, d := range n.Devices {
			ds := devState{d: d, gpu: perGPU[d.GPU], share: 1, fbTotal: 81559}
			if d.Profile != "" {
				mp, _ := attribution.ParseMIGProfile(d.Profile)
				ds.share, ds.fbTotal = float64(mp.ComputeSlices), float64(mp.MemoryGB)*1024-500
			}
			ds.head = deviceLabels(d)
			ds.tail = holderLabels(nil, nil)
			t.devs = append(t.devs, ds)
		}
	}
	return t
}

func powerEnvelope(model string) (idle, max float64) {
	switch {
	case strings.Contains(model, "H100"), strings.Contains(model, "H200"):
		return 72, 700
	case strings.Contains(model, "A100"):
		return 58, 400
	}
	return 30, 300
}

func fnvHash(s string, i int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	h.Write([]byte{byte(i), byte(i >> 8)})
	return h.Sum64()
}

var pciBuses = [...]byte{0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB}

func deviceLabels(d *Device) []byte {
	h := fnvHash(d.Node.Name, d.GPU)
	h2 := fnvHash(d.Node.Name+"/uuid", d.GPU)
	uuid := fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(h), uint16(h>>32), uint16(h>>48), uint16(h2), h2>>16&0xffffffffffff)
	b := fmt.Appendf(nil, `gpu="%d",UUID=%q,pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName=%q`,
		d.GPU, uuid, pciBuses[d.GPU%len(pciBuses)], d.GPU, d.Node.Model)
	if d.Profile != "" {
		b = fmt.Appendf(b, `,GPU_I_PROFILE=%q,GPU_I_ID="%d"`, d.Profile, d.Instance)
	}
	return fmt.Appendf(b, `,Hostname=%q,DCGM_FI_DRIVER_VERSION=%q`, d.Node.Name, DriverVersion)
}

func holderLabels(h *Hold, d *Device) []byte {
	if h == nil {
		return []byte(`,container="",namespace="",pod=""}`)
	}
	return fmt.Appendf(nil, `,container=%q,namespace=%q,pod=%q}`, h.Container, h.Job.Namespace, h.Pod)
}

// noise returns a deterministic value in [0, 1) for a job and a tick.
func noise(a, b uint64) float64 {
	x := a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// Activity is the busy fraction of a held device at t: the value
// DCGM_FI_PROF_GR_ENGINE_ACTIVE reports.
func Activity(h *Hold, t time.Time, tick uint64) float64 {
	if h.Waiting {
		return 0
	}
	j := h.Job
	el := t.Sub(h.Start)
	n := noise(uint64(j.ID), tick)
	n2 := noise(uint64(j.ID)+7919, tick)
	switch j.Kind {
	case KindTraining:
		switch {
		case j.Count > 8 && el < 10*time.Minute:
			return 0 // a multi-node job's first pods wait for the rest
		case el < 5*time.Minute:
			return 0.05 * n // loading data and the model
		case n2 < 0.03:
			return 0.1 // evaluation or checkpoint
		}
		return 0.78 + 0.2*n
	case KindNotebook:
		if n < 0.08 {
			return 0.3 + 0.5*n2
		}
		return 0.01 * n2
	case KindInference:
		hour := float64(t.Hour()) + float64(t.Minute())/60
		load := 0.03
		if hour >= 7 && hour < 21 {
			load += 0.55 * math.Sin(math.Pi*(hour-7)/14)
		}
		return min(load*(0.8+0.4*n), 1)
	}
	return 0
}

type metric struct {
	name, help, typ string
	migToo          bool
	value           func(dst []byte, ds *devState) []byte
}

var metrics = []metric{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", false, func(dst []byte, ds *devState) []byte {
		return strconv.AppendInt(dst, int64(math.Round(ds.act*100)), 10)
	}},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", true, func(dst []byte, ds *devState) []byte {
		return strconv.AppendInt(dst, int64(ds.fbMiB), 10)
	}},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", true, func(dst []byte, ds *devState) []byte {
		return appendDecimal(dst, math.Round(ds.gpu.powerW*1000), 3)
	}},
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", "counter", true, func(dst []byte, ds *devState) []byte {
		return strconv.AppendInt(dst, int64(ds.gpu.energyMJ), 10)
	}},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "gauge", true, func(dst []byte, ds *devState) []byte {
		return appendDecimal(dst, math.Round(ds.act*1e6), 6)
	}},
}

// appendDecimal appends n/10^places in decimal without trailing zeros:
// what strconv.AppendFloat(n/10^places, 'f', -1) writes for a whole,
// non-negative n below 2^53 (it parses to the same float64: both are the
// nearest to the same decimal), at a fraction of its cost.
func appendDecimal(dst []byte, n float64, places int) []byte {
	v := uint64(n)
	var pow uint64 = 1
	for range places {
		pow *= 10
	}
	dst = strconv.AppendUint(dst, v/pow, 10)
	frac := v % pow
	if frac == 0 {
		return dst
	}
	for frac%10 == 0 {
		frac /= 10
		places--
	}
	dst = append(dst, '.')
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], frac, 10)
	for range places - len(d) {
		dst = append(dst, '0')
	}
	return append(dst, d...)
}

// Next appends the next scrape's body to dst and returns its time. ok is
// false after the last scrape.
func (t *Telemetry) Next(dst []byte) (at time.Time, body []byte, ok bool) {
	if !t.next.Before(t.end) {
		return time.Time{}, dst, false
	}
	at = t.next
	t.next = t.next.Add(t.interval)
	t.tick++
	for _, g := range t.gpus {
		g.load = 0
	}
	for i := range t.devs {
		ds := &t.devs[i]
		ds.down = t.ExporterUpgrades && exporterDown(ds.d.Node.Name, at)
		holds := ds.d.Holds
		for ds.holdIdx < len(holds) && !holds[ds.holdIdx].End.After(at) {
			ds.holdIdx++
		}
		var h *Hold
		if ds.holdIdx < len(holds) && !holds[ds.holdIdx].Start.After(at) {
			h = &holds[ds.holdIdx]
		}
		if h != ds.hold {
			ds.hold = h
			ds.tail = holderLabels(h, ds.d)
			t.podsStale = true
		}
		ds.act, ds.fbMiB = 0, 0
		if h != nil {
			ds.act = Activity(h, at, t.tick)
			ds.fbMiB = math.Min(ds.fbTotal, 2048+ds.fbTotal*(0.3+0.6*ds.act))
		}
		ds.gpu.load += ds.act * ds.share
	}
	secs := t.interval.Seconds()
	for _, g := range t.gpus {
		g.powerW = g.idleW + (g.maxW-g.idleW)*g.load/g.slices
		g.energyMJ += g.powerW * secs * 1000
	}
	for _, m := range metrics {
		dst = append(dst, "# HELP "...)
		dst = append(dst, m.name...)
		dst = append(dst, ' ')
		dst = append(dst, m.help...)
		dst = append(dst, "\n# TYPE "...)
		dst = append(dst, m.name...)
		dst = append(dst, ' ')
		dst = append(dst, m.typ...)
		dst = append(dst, '\n')
		for i := range t.devs {
			ds := &t.devs[i]
			if ds.d.Profile != "" && !m.migToo || ds.down {
				continue
			}
			dst = append(dst, m.name...)
			dst = append(dst, '{')
			dst = append(dst, ds.head...)
			dst = append(dst, ds.tail...)
			dst = append(dst, ' ')
			dst = m.value(dst, ds)
			dst = append(dst, '\n')
		}
	}
	// kube-state-metrics: one family at a time, as the text format wants.
	for fam, head := range ksmFamilies {
		dst = append(dst, head...)
		t.eachPod(func(ds *devState) {
			h := ds.hold
			if h.ksm[0] == nil {
				h.ksm = kubeStateLines(h, ds.d.Node.Name)
			}
			dst = append(dst, h.ksm[fam]...)
		})
	}
	dst = t.appendVLLM(dst)
	if t.kueue != nil {
		dst = t.kueue.appendScrape(dst, at)
	}
	return at, dst, true
}

// ExporterUpgradeDown is how long a node's dcgm-exporter is gone in a
// rolling upgrade: past the 5-minute staleness bound, so that its GPUs'
// time is unobserved and their pods' cost comes from kube-state-metrics.
const ExporterUpgradeDown = 12 * time.Minute

// exporterDown says whether node's exporter is being upgraded at t: once
// every 30 days from the Unix epoch, at an offset of the node's own.
func exporterDown(node string, t time.Time) bool {
	const period = 30 * 24 * time.Hour
	offset := time.Duration(fnvHash(node, 0)%uint64(period/time.Minute)) * time.Minute
	in := (time.Duration(t.UnixNano()) - offset) % period
	if in < 0 {
		in += period
	}
	return in < ExporterUpgradeDown
}

// kubeStateLines renders what kube-state-metrics publishes of a running
// pod on node: its labels (with the Kueue queue), its owner, its
// container's GPU request (nvidia.com/gpu, or the MIG profile's resource),
// its info and its Running phase.
func kubeStateLines(h *Hold, node string) [len(ksmFamilies)][]byte {
	var out [len(ksmFamilies)][]byte
	j := h.Job
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(j.ID), uint64(len(h.Pod))<<32|uint64(j.ID))
	out[0] = fmt.Appendf(nil, "kube_pod_labels{namespace=%q,pod=%q,uid=%q,label_kueue_x_k8s_io_queue_name=%q} 1\n",
		j.Namespace, h.Pod, uid, j.Queue)
	kind, name := "Job", j.Name
	switch {
	case j.Kind == KindInference:
		kind, name = "ReplicaSet", j.Name+"-7d9f8b6c5"
	case j.Kind == KindNotebook:
		kind = "StatefulSet"
	case j.Count > 8:
		kind = "PyTorchJob"
	}
	out[1] = fmt.Appendf(nil, "kube_pod_owner{namespace=%q,pod=%q,uid=%q,owner_kind=%q,owner_name=%q,owner_is_controller=\"true\"} 1\n",
		j.Namespace, h.Pod, uid, kind, name)
	out[2] = fmt.Appendf(nil, "kube_pod_container_resource_requests{namespace=%q,pod=%q,uid=%q,container=%q,node=%q,resource=%q,unit=\"integer\"} %d\n",
		j.Namespace, h.Pod, uid, h.Container, node, sanitizeResource(j.Resource), h.PodDevices)
	out[3] = fmt.Appendf(nil, "kube_pod_info{namespace=%q,pod=%q,uid=%q,host_ip=\"\",pod_ip=\"\",node=%q,created_by_kind=%q,created_by_name=%q,priority_class=\"\",host_network=\"false\"} 1\n",
		j.Namespace, h.Pod, uid, node, kind, name)
	out[4] = fmt.Appendf(nil, "kube_pod_status_phase{namespace=%q,pod=%q,uid=%q,phase=\"Running\"} 1\n", j.Namespace, h.Pod, uid)
	return out
}

// podName is a pod's namespace and name.
type podName struct{ namespace, pod string }

// eachPod calls fn once for each pod holding a device this scrape, with
// the first device it holds.
func (t *Telemetry) eachPod(fn func(ds *devState)) {
	if t.podsStale {
		t.podsStale = false
		t.pods = t.pods[:0]
		clear(t.seenPods)
		for i := range t.devs {
			h := t.devs[i].hold
			if h == nil {
				continue
			}
			key := podName{h.Job.Namespace, h.Pod}
			if _, dup := t.seenPods[key]; dup {
				continue
			}
			t.seenPods[key] = struct{}{}
			t.pods = append(t.pods, i)
		}
	}
	for _, i := range t.pods {
		fn(&t.devs[i])
	}
}

// sanitizeResource writes a job's resource as kube-state-metrics does in
// its resource label: nvidia.com/mig-3g.40gb is nvidia_com_mig_3g_40gb.
func sanitizeResource(r string) string {
	if r == "" {
		r = config.ResourceGPU
	}
	return attribution.SanitizeName(r)
}

// ksmFamilies are the kube-state-metrics families rendered, in the order of
// kubeStateLines' result.
var ksmFamilies = [...]string{
	"# HELP kube_pod_labels [STABLE] Kubernetes labels converted to Prometheus labels.\n# TYPE kube_pod_labels gauge\n",
	"# HELP kube_pod_owner [STABLE] Information about the Pod's owner.\n# TYPE kube_pod_owner gauge\n",
	"# HELP kube_pod_container_resource_requests [STABLE] The number of requested request resource by a container.\n# TYPE kube_pod_container_resource_requests gauge\n",
	"# HELP kube_pod_info [STABLE] Information about pod.\n# TYPE kube_pod_info gauge\n",
	"# HELP kube_pod_status_phase [STABLE] The pods current phase.\n# TYPE kube_pod_status_phase gauge\n",
}

// AppendTimestamped appends body with every sample line stamped with ms, as
// an exposition file holding many scrapes (or one VictoriaMetrics imports)
// needs: "metric{labels} value ms".
func AppendTimestamped(dst, body []byte, ms int64) []byte {
	ts := strconv.AppendInt([]byte{' '}, ms, 10)
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := body
		if i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		dst = append(dst, line...)
		if len(line) > 0 && line[0] != '#' {
			dst = append(dst, ts...)
		}
		dst = append(dst, '\n')
	}
	return dst
}
