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
	// Energy prices the energy the GPUs draw; optional.
	Energy *Energy `yaml:"energy"`
	// CostPolicy says who pays for what nobody used; optional.
	CostPolicy *CostPolicy `yaml:"costPolicy"`
	// Auth lists the API's bearer tokens, by hash; optional (tokens may
	// come from a mounted secret instead, see LoadTokens).
	Auth *Auth `yaml:"auth"`
	// Capacity tunes the expansion trigger; optional.
	Capacity *Capacity `yaml:"capacity"`

	// Warnings are what validation found doubtful but not wrong, such as a
	// GPU model it does not know; sorted by position.
	Warnings []Problem `yaml:"-"`

	// rates holds each flavor's resolved price per GPU-hour in micros,
	// filled in by validation.
	rates map[string]int64
}

// Capacity tunes `gpuledger capacity`'s expansion trigger. Zero fields
// take the defaults.
type Capacity struct {
	// PurchaseGPUs is the block of GPUs an expansion buys. Default 72
	// (nine 8-GPU nodes).
	PurchaseGPUs int `yaml:"purchaseGPUs"`
	// UtilizationPercent is the share of a flavor's GPU time, over
	// WindowDays, that fires the trigger: busy (Measure active, the
	// default) or held (allocated). Default 80. A flavor held this much
	// but busy less says reclaim, not buy; it is also how busy a
	// ClusterQueue's own GPUs must be for its waits to say buy.
	UtilizationPercent int `yaml:"utilizationPercent"`
	// Measure is what UtilizationPercent is of: active (DCGM's busy time,
	// the default) or allocated (what pods held, busy or not).
	Measure string `yaml:"measure"`
	// WindowDays is how long the share must hold. Default 30.
	WindowDays int `yaml:"windowDays"`
	// WaitMinutes is the wait for admission that fires the trigger for
	// a ClusterQueue: its workloads' WaitPercentile wait (admitted ones,
	// and pending ones at their wait so far) over WaitWindowDays and over
	// its last day. Defaults 30 minutes, the 90th percentile, 7 days.
	WaitMinutes    int `yaml:"waitMinutes"`
	WaitPercentile int `yaml:"waitPercentile"`
	WaitWindowDays int `yaml:"waitWindowDays"`
	// ReclaimIdleMinutes is the culling policy the reclaim what-if
	// replays: a workload whose GPUs were idle this long is ended and
	// its GPUs given back (in whole hours, the ledger's resolution).
	// Default 60.
	ReclaimIdleMinutes int `yaml:"reclaimIdleMinutes"`
	// ColdStartSeconds is an inference model's load time, for
	// scale-to-zero on the ledger's endpoints (the API's capacity route
	// and the workbook); ColdStartModels gives it per vLLM model_name;
	// ColdStartPenalty is what one cold start's latency costs. Defaults
	// 120 s and 0.50.
	ColdStartSeconds int            `yaml:"coldStartSeconds"`
	ColdStartModels  map[string]int `yaml:"coldStartModels"`
	ColdStartPenalty Money          `yaml:"coldStartPenalty"`
	// SLAClasses price a cold start per class of endpoints, by namespace:
	// an interactive chat endpoint's slow first answer costs more, and
	// may be allowed less often, than a batch endpoint's. Endpoints of no
	// class take ColdStartPenalty and no request at the p95 waiting.
	SLAClasses []SLAClass `yaml:"slaClasses"`
}

// SLAClass is a class of inference endpoints for scale-to-zero.
type SLAClass struct {
	Name       string   `yaml:"name"`
	Namespaces []string `yaml:"namespaces"`
	// ColdStartPenalty is what one cold start costs its endpoints.
	ColdStartPenalty Money `yaml:"coldStartPenalty"`
	// MaxP95ExtraSeconds is how long the 95th percentile request may wait
	// for a model to load (0: at most 5% of requests wait; -1: no limit).
	MaxP95ExtraSeconds int `yaml:"maxP95ExtraSeconds"`
}

// Auth holds the API's tokens.
type Auth struct {
	Tokens []Token `yaml:"tokens"`
}

// Token is a bearer token of the API, kept as the SHA-256 of its secret
// (hex), never the secret: the file can be reviewed and committed.
type Token struct {
	// Name identifies the token in logs and per-sender metrics.
	Name string `yaml:"name"`
	// SHA256 is the hex SHA-256 of the secret (gpuledger token prints it).
	SHA256 string `yaml:"sha256"`
	// Scopes: write (remote write only), viewer (read every team),
	// admin (everything), team:<name> (read that team only).
	Scopes []string `yaml:"scopes"`
}

// Energy is the site's electricity price and efficiency.
type Energy struct {
	// PricePerKWh in Currency, a decimal such as 0.12.
	PricePerKWh Money `yaml:"pricePerKWh"`
	// PUE is the power usage effectiveness, such as 1.3: what the site draws
	// per watt the GPUs draw, cooling included. Default 1.
	PUE Money `yaml:"pue"`
}

// CostPolicy holds the chargeback policies.
type CostPolicy struct {
	// Unallocated is who pays for GPU time nobody held: platform (kept as
	// platform overhead, the default), quota (shared by nominal quota:
	// teams pay for what they reserve) or usage (shared in proportion to
	// each team's cost in the flavor that hour).
	Unallocated string `yaml:"unallocated"`
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
	// Sharing describes GPUs shared by several pods at once; optional.
	Sharing *Sharing `yaml:"sharing"`
}

// Sharing is how the device plugin shares a node's GPUs.
type Sharing struct {
	// Strategy is time-slicing, mps or fractional (milli-GPU requests, as
	// in Alibaba's GPU-sharing scheduler).
	Strategy string `yaml:"strategy"`
	// Replicas is how many replicas each GPU is advertised as; fractional
	// sharing advertises 1000 milli-GPUs and ignores it.
	Replicas int `yaml:"replicas"`
	// Split is how a shared GPU's cost is divided among the pods holding
	// it: even (the default for time-slicing and mps) or request (by the
	// replicas or milli-GPUs each pod requested, unrequested capacity
	// unallocated; the only choice for fractional).
	Split string `yaml:"split"`
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

// Price is the rate of one flavor, given one of three ways: PerGPUHour
// directly, Catalog (a cloud instance type from the built-in price book), or
// OnPrem (amortised hardware cost).
type Price struct {
	Flavor string `yaml:"flavor"`
	// PerGPUHour is the price of one hour of one whole GPU, a decimal.
	PerGPUHour Money `yaml:"perGPUHour"`
	// Catalog names a cloud instance type, <provider>/<instance type> such
	// as aws/p5.48xlarge; its price per GPU-hour comes from the built-in
	// price book (pricebook.csv).
	Catalog string `yaml:"catalog"`
	// Spot takes the catalog's spot price instead of on-demand.
	Spot bool `yaml:"spot"`
	// ExchangeRate converts a catalog price, which the price book holds in
	// USD, into the config's currency: what one USD costs in it, such as
	// 0.92 for EUR. Required with catalog when the currency is not USD.
	ExchangeRate Money `yaml:"exchangeRate"`
	// OnPrem amortises owned hardware into a price per GPU-hour.
	OnPrem *OnPrem `yaml:"onPrem"`
	// Source says where the figure comes from, for reviewers.
	Source string `yaml:"source"`
}

// OnPrem is the cost of an owned GPU. Its price per GPU-hour is
//
//	purchasePerGPU / (depreciationMonths × 730)
//	+ powerWattsPerGPU / 1000 × pue × electricityPerKWh
//	+ overheadPerGPUMonth / 730
//
// with 730 hours in an average month (8,760 / 12), rounded to the nearest
// micro-unit.
type OnPrem struct {
	// PurchasePerGPU is what one GPU cost with its share of the server,
	// network and installation.
	PurchasePerGPU     Money `yaml:"purchasePerGPU"`
	DepreciationMonths int   `yaml:"depreciationMonths"`
	// PowerWattsPerGPU is the average draw budgeted per GPU, host share
	// included.
	PowerWattsPerGPU  int   `yaml:"powerWattsPerGPU"`
	ElectricityPerKWh Money `yaml:"electricityPerKWh"`
	// PUE defaults to 1.
	PUE Money `yaml:"pue"`
	// OverheadPerGPUMonth covers space, support and staff per GPU.
	OverheadPerGPUMonth Money `yaml:"overheadPerGPUMonth"`
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
