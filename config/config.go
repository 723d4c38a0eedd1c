// Package config owns gpuledger's business-data file: clusters and their
// nodes, ResourceFlavors, Kueue ClusterQueues and LocalQueues, teams, prices
// and budgets. It parses the YAML strictly (an unknown key is an error),
// checks every reference and limit, and reports every problem at once with
// its file position. It knows nothing of telemetry or storage; it turns the
// file into the models that attribution and sim consume.
//
// Process settings (addresses, paths, DSNs) are flags, not config.
package config

import (
	"github.com/gpuledger/gpuledger/ledger"
)

// Config is the whole business-data file.
type Config struct {
	// Currency of every price and budget, an ISO 4217 code such as USD.
	Currency        string         `yaml:"currency"`
	Clusters        []Cluster      `yaml:"clusters"`
	ResourceFlavors []Flavor       `yaml:"resourceFlavors"`
	ClusterQueues   []ClusterQueue `yaml:"clusterQueues"`
	LocalQueues     []LocalQueue   `yaml:"localQueues"`
	Teams           []Team         `yaml:"teams"`
	Prices          []Price        `yaml:"prices"`
}

// Cluster is one Kubernetes cluster and its GPU nodes.
type Cluster struct {
	Name  string `yaml:"name"`
	Nodes []Node `yaml:"nodes"`
}

// Node is a GPU node. Name must match dcgm-exporter's Hostname label.
type Node struct {
	Name string `yaml:"name"`
	// GPUModel is the NVML model name, as dcgm-exporter's modelName label
	// reports it, such as "NVIDIA H100 80GB HBM3".
	GPUModel string `yaml:"gpuModel"`
	GPUs     int    `yaml:"gpus"`
	// Rack is the node's topology domain (rack or InfiniBand block).
	Rack string `yaml:"rack"`
	// Flavor is the ResourceFlavor the node belongs to.
	Flavor string `yaml:"flavor"`
	// MIG is the MIG layout every GPU of the node is partitioned into, as a
	// list of profiles such as [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]; empty
	// when the node's GPUs are not partitioned.
	MIG []string `yaml:"mig"`
}

// Flavor is a Kueue ResourceFlavor.
type Flavor struct {
	Name       string            `yaml:"name"`
	NodeLabels map[string]string `yaml:"nodeLabels"`
}

// ClusterQueue is a Kueue ClusterQueue, reduced to what cost and admission
// need.
type ClusterQueue struct {
	Name string `yaml:"name"`
	// Cohort is the borrowing group; empty for none.
	Cohort  string        `yaml:"cohort"`
	Flavors []FlavorQuota `yaml:"flavors"`
}

// FlavorQuota is the quota of one flavor in a ClusterQueue.
type FlavorQuota struct {
	Name      string          `yaml:"name"`
	Resources []ResourceQuota `yaml:"resources"`
}

// ResourceQuota has Kueue's meaning: NominalQuota is guaranteed;
// BorrowingLimit caps what may be borrowed from the cohort above it (nil: no
// cap); LendingLimit caps what of the unused nominal quota others may borrow
// (nil: all of it).
type ResourceQuota struct {
	// Name is the resource: nvidia.com/gpu, or nvidia.com/mig-<profile>.
	Name           string `yaml:"name"`
	NominalQuota   int    `yaml:"nominalQuota"`
	BorrowingLimit *int   `yaml:"borrowingLimit"`
	LendingLimit   *int   `yaml:"lendingLimit"`
}

// LocalQueue is a Kueue LocalQueue: a namespace's handle on a ClusterQueue.
type LocalQueue struct {
	Namespace    string `yaml:"namespace"`
	Name         string `yaml:"name"`
	ClusterQueue string `yaml:"clusterQueue"`
}

// Team is who pays: it owns ClusterQueues and namespaces.
type Team struct {
	Name          string   `yaml:"name"`
	ClusterQueues []string `yaml:"clusterQueues"`
	Namespaces    []string `yaml:"namespaces"`
	// MonthlyBudget in Currency, a decimal such as "25000.00".
	MonthlyBudget Money `yaml:"monthlyBudget"`
}

// Price is the rate of one flavor.
type Price struct {
	Flavor string `yaml:"flavor"`
	// PerGPUHour is the price of one hour of one whole GPU, a decimal.
	PerGPUHour Money `yaml:"perGPUHour"`
	// Source says where the figure comes from, for reviewers.
	Source string `yaml:"source"`
}

// Money is an exact decimal amount held in micro-units. In YAML it is
// written as a number or a string, such as 6.88 or "6.88"; it is read from
// the text, never through float64.
type Money struct {
	Micros int64
	Set    bool
}

// String formats m as a decimal.
func (m Money) String() string { return ledger.FormatMicros(m.Micros) }
