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
	// RateMicrosPerHour is the price of one hour of the whole GPU.
	RateMicrosPerHour int64
	// MIG lists the MIG profiles the GPU is partitioned into (such as
	// "3g.40gb"); empty when the GPU is not partitioned.
	MIG []string
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
func MIGComputeSlices(model string) int {
	if strings.Contains(strings.ToUpper(model), "A30") {
		return 4
	}
	return 7
}
