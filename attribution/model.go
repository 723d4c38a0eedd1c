// Package attribution is gpuledger's cost model. It decides, for each GPU or
// MIG slice and each interval, which pod held it, which namespace, LocalQueue,
// ClusterQueue and team that pod belonged to, what the time cost at the GPU's
// flavor rate, how much of it was idle, and turns that into hourly ledger rows
// whose costs sum exactly to the cluster's cost.
//
// The package is pure: no I/O, no clock, no logging. Time comes in with the
// samples; rejected samples are counted in Stats for the caller to export.
// It does not parse telemetry (package ingest does) nor store rows (package
// ledger does).
package attribution

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Model is what attribution needs to know about one cluster: its GPU
// inventory with rates, and how pods map to queues and teams.
type Model struct {
	// Cluster is the name written into every row.
	Cluster string
	// GPUs is the priced inventory: every physical GPU of the cluster. A GPU
	// with no telemetry still costs its rate and is charged as unallocated.
	GPUs []GPU
	// LocalQueues maps a LocalQueue (namespace and name) to its ClusterQueue.
	LocalQueues map[QueueRef]string
	// ClusterQueueTeams maps a ClusterQueue to the team that owns it.
	ClusterQueueTeams map[string]string
	// NamespaceTeams maps a namespace to the team that owns it; used when a
	// pod has no queue, or its queue is unknown.
	NamespaceTeams map[string]string
	// Quotas holds each ClusterQueue's nominal quota per flavor in
	// QuotaUnitsPerGPU-ths of a GPU: a whole GPU is 28, a 3g.40gb MIG slice
	// of a 7-slice GPU 12, a 1g.6gb slice of a 4-slice A30 7. Every slice
	// count divides 28, so quotas of slices are exact. A ClusterQueue whose
	// usage in a flavor passes it in an hour is borrowing, and the quota
	// policy shares unallocated cost by it.
	Quotas map[QuotaRef]int64
	// Unallocated says who pays for capacity nobody held.
	Unallocated UnallocatedPolicy
	// EnergyPriceMicrosPerKWh is the electricity price; zero leaves energy
	// unpriced.
	EnergyPriceMicrosPerKWh int64
	// PUEMicros is the data centre's power usage effectiveness in millionths
	// (1.3 = 1,300,000): GPU energy × PUE is what the site draws for it,
	// cooling included. Zero means 1.
	PUEMicros int64
}

// QuotaUnitsPerGPU is the unit of Model.Quotas: the least common multiple
// of the compute slices of MIG-capable GPUs (7 and 4), so that any number of
// any MIG slice is a whole number of units.
const QuotaUnitsPerGPU = 28

// QuotaUnits returns count devices of a kind as Model.Quotas counts them:
// count × 28 for whole GPUs, count × slices × 28 / GPU slices for MIG
// instances of profile on a GPU of gpuModel. ok is false for a profile
// that does not parse or does not fit the GPU.
func QuotaUnits(count int64, profile, gpuModel string) (units int64, ok bool) {
	if profile == "" {
		return count * QuotaUnitsPerGPU, true
	}
	mp, err := ParseMIGProfile(profile)
	total := MIGComputeSlices(gpuModel)
	if err != nil || mp.ComputeSlices > total {
		return 0, false
	}
	return count * int64(mp.ComputeSlices) * QuotaUnitsPerGPU / int64(total), true
}

// MIGKind returns the request kind of a MIG profile, as kube-state-metrics
// names its resource (nvidia.com/mig-3g.40gb is resource
// nvidia_com_mig_3g_40gb): "mig-3g_40gb".
func MIGKind(profile string) string { return KindMIGPrefix + SanitizeName(profile) }

// SanitizeName writes a name as kube-state-metrics writes resource names
// and label keys: every character but letters, digits and '_' becomes '_'
// (nvidia.com/gpu is nvidia_com_gpu).
func SanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// QuotaRef names a ClusterQueue's quota in one flavor.
type QuotaRef struct {
	ClusterQueue, Flavor string
}

// UnallocatedPolicy says who pays for GPU time nobody held.
type UnallocatedPolicy uint8

// Unallocated-cost policies.
const (
	// UnallocatedPlatform keeps it on TeamUnallocated rows: platform
	// overhead.
	UnallocatedPlatform UnallocatedPolicy = iota
	// UnallocatedByQuota shares each flavor's unallocated cost among the
	// ClusterQueues with nominal quota in it, in proportion to the quota:
	// teams pay for what they reserve.
	UnallocatedByQuota
	// UnallocatedByUsage shares each flavor's unallocated cost among the
	// teams that used the flavor that hour, in proportion to their cost.
	UnallocatedByUsage
)

// ParseUnallocatedPolicy parses "platform", "quota" or "usage".
func ParseUnallocatedPolicy(s string) (UnallocatedPolicy, bool) {
	switch s {
	case "", "platform":
		return UnallocatedPlatform, true
	case "quota":
		return UnallocatedByQuota, true
	case "usage":
		return UnallocatedByUsage, true
	}
	return 0, false
}

// QueueRef names a LocalQueue.
type QueueRef struct {
	Namespace, Name string
}

// GPU is one physical GPU of the inventory.
type GPU struct {
	// Node is the node name, as dcgm-exporter's Hostname label reports it.
	Node string
	// Index is the GPU's index on the node (dcgm-exporter's gpu label).
	Index string
	// Model is the GPU model name (dcgm-exporter's modelName label).
	Model string
	// Flavor is the Kueue ResourceFlavor of the node.
	Flavor string
	// RateMicrosPerHour is the price of one hour of the whole GPU;
	// RateSource says where it comes from (a price book entry, an on-prem
	// amortisation), for the lines.
	RateMicrosPerHour int64
	RateSource        string
	// MIG lists the MIG profiles the GPU is partitioned into (such as
	// "3g.40gb"); empty when the GPU is not partitioned.
	MIG []string
	// Replicas is how many replicas the device plugin advertises for the
	// GPU (time-slicing or MPS), or 1000 for milli-GPU fractional requests.
	// 0 or 1: the GPU (or each MIG instance) is held by one pod at a time.
	Replicas int
	// SplitByRequest splits a shared GPU among its pods by what each pod
	// requested (replicas, or milli-GPUs), leaving unrequested replicas
	// unallocated; otherwise evenly among the pods that held it.
	SplitByRequest bool
}

// HourlyCostMicros returns what the whole inventory costs in one hour: the
// amount that every hour's rows must sum to.
func (m *Model) HourlyCostMicros() int64 {
	var sum int64
	for i := range m.GPUs {
		sum += m.GPUs[i].RateMicrosPerHour
	}
	return sum
}

// MIGProfile is a parsed MIG profile name such as "3g.40gb": the number of
// compute slices (GPU instance size) and memory in GB.
type MIGProfile struct {
	ComputeSlices int
	MemoryGB      int
}

// ParseMIGProfile parses a profile name of the form "<n>g.<m>gb", optionally
// with a suffix such as "+me" (media extensions), as NVIDIA names them.
func ParseMIGProfile(s string) (MIGProfile, error) {
	base, _, _ := strings.Cut(s, "+")
	g, mem, ok := strings.Cut(base, "g.")
	if !ok || !strings.HasSuffix(mem, "gb") {
		return MIGProfile{}, fmt.Errorf("MIG profile %q is not of the form <slices>g.<memory>gb, such as 3g.40gb", s)
	}
	n, err1 := strconv.Atoi(g)
	m, err2 := strconv.Atoi(strings.TrimSuffix(mem, "gb"))
	if err1 != nil || err2 != nil || n <= 0 || m <= 0 {
		return MIGProfile{}, fmt.Errorf("MIG profile %q is not of the form <slices>g.<memory>gb, such as 3g.40gb", s)
	}
	return MIGProfile{ComputeSlices: n, MemoryGB: m}, nil
}

// MIGComputeSlices returns how many compute slices a GPU model has in MIG
// mode: 4 on the A30, 7 on the A100, H100, H200 and B200. A slice's share of
// the GPU's cost is its compute slices over this number.
//
// The profiles NVIDIA defines (compute slices g, memory): on the A100 40GB
// 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb; on the A100 80GB and
// H100 80GB 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; on the
// H100 94GB 1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb; on the
// H200 1g.18gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb; on the A30
// (4 slices) 1g.6gb, 2g.12gb, 4g.24gb. A slice is priced by its compute
// share g/7 (g/4 on the A30), not its memory share: the 1g.20gb profile
// costs what 1g.10gb costs, and a layout's unused compute slices are
// unallocated capacity. Layouts are checked to fit in the compute slices.
func MIGComputeSlices(model string) int {
	if strings.Contains(strings.ToUpper(model), "A30") {
		return 4
	}
	return 7
}

// GPUModelInfo is what gpuledger knows of a GPU model: whether it can be
// partitioned with MIG, and the MIG profiles NVIDIA defines for it.
type GPUModelInfo struct {
	// Known is false for a model gpuledger has no entry for.
	Known bool
	// MIG says whether the model supports MIG.
	MIG bool
	// Profiles lists its MIG profiles (without +me); nil when MIG is
	// supported but the list is not known here.
	Profiles []string
}

// gpuModels maps an NVML name's tokens to the model's facts; the first
// entry whose tokens all appear in the name wins. Profiles from NVIDIA's
// MIG user guide (supported profiles per GPU).
var gpuModels = []struct {
	tokens   []string
	mig      bool
	profiles []string
}{
	{[]string{"H100", "NVL"}, true, []string{"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
	{[]string{"H100", "94GB"}, true, []string{"1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}},
	{[]string{"GH200"}, true, nil},
	{[]string{"H200"}, true, []string{"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
	{[]string{"H100"}, true, []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
	{[]string{"H800"}, true, []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
	{[]string{"H20"}, true, nil},
	{[]string{"B200"}, true, nil},
	{[]string{"GB200"}, true, nil},
	{[]string{"A100", "40GB"}, true, []string{"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
	{[]string{"A100"}, true, []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
	{[]string{"A800"}, true, []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
	{[]string{"A30"}, true, []string{"1g.6gb", "2g.12gb", "4g.24gb"}},
	{[]string{"T4"}, false, nil},
	{[]string{"L4"}, false, nil},
	{[]string{"L40"}, false, nil},
	{[]string{"L40S"}, false, nil},
	{[]string{"L20"}, false, nil},
	{[]string{"A10"}, false, nil},
	{[]string{"A10G"}, false, nil},
	{[]string{"A16"}, false, nil},
	{[]string{"A2"}, false, nil},
	{[]string{"A40"}, false, nil},
	{[]string{"V100"}, false, nil},
	{[]string{"V100S"}, false, nil},
	{[]string{"P100"}, false, nil},
	{[]string{"P4"}, false, nil},
	{[]string{"RTX"}, false, nil},
}

// GPUModel returns what gpuledger knows of the NVML model name, such as
// "NVIDIA H100 80GB HBM3" or "NVIDIA A100-SXM4-40GB".
func GPUModel(name string) GPUModelInfo {
	var tokens []string
	for _, t := range strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == ' ' || r == '-' || r == '_' }) {
		tokens = append(tokens, t)
	}
	for _, m := range gpuModels {
		all := true
		for _, want := range m.tokens {
			if !slices.Contains(tokens, want) {
				all = false
				break
			}
		}
		if all {
			return GPUModelInfo{Known: true, MIG: m.mig, Profiles: m.profiles}
		}
	}
	return GPUModelInfo{}
}
