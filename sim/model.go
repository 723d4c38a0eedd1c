package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// Model is the modelled cluster, built once from the YAML config (NewModel)
// or from a trace's queues and its flavors (TraceModel), so that the three
// views of it cannot disagree: what the admission core decides on (queues
// with quotas, nodes with free units), the devices whose telemetry is
// rendered (Cluster), and what attribution prices them at (Attribution).
//
// A run records its pods' holds on the Cluster's devices: build one Model
// per run.
type Model struct {
	Cluster     *Cluster
	Attribution *attribution.Model
	// Queues are the ClusterQueues with their quotas. A replay copies
	// them before it sets weights or preemption.
	Queues map[string]*admission.ClusterQueue
	// Nodes is the admission core's view of the nodes: one per node and
	// resource (a MIG node has one per profile), all free.
	Nodes []admission.Node
	// LocalQueues maps namespace/name to its ClusterQueue.
	LocalQueues map[string]string
	// Rates is what one unit of a flavor's resource costs per second, in
	// micros (a MIG slice its compute share of the GPU's price).
	Rates map[admission.FlavorResource]float64
	// resources are Rates' keys in the order they were priced (sums go in
	// one order).
	resources []admission.FlavorResource
	// NodeUnits is the most units a node offers of one resource: a
	// larger job runs as pods of that many.
	NodeUnits int

	// ref maps Nodes[i] to its node in Cluster and its MIG profile.
	ref []nodeRef
	// nominal is each queue's quota in units, value its worth per
	// second in micros; capacity the units of all nodes.
	nominal  map[string]int
	value    map[string]float64
	capacity int
	// flavors are a trace model's flavors (TraceModel), with defaults.
	flavors []ReplayFlavor
}

type nodeRef struct {
	node    int
	profile string
}

// NewModel builds the model of one configured cluster ("" for the only
// one): its nodes with their GPUs and MIG instances, the ClusterQueues and
// LocalQueues, and the price book.
func NewModel(cfg *config.Config, cluster string) (*Model, error) {
	cl, err := cfg.Cluster(cluster)
	if err != nil {
		return nil, err
	}
	am, err := cfg.AttributionModel(cluster)
	if err != nil {
		return nil, err
	}
	m := &Model{Cluster: &Cluster{Name: cl.Name}, Attribution: am, Queues: map[string]*admission.ClusterQueue{},
		LocalQueues: map[string]string{}, Rates: map[admission.FlavorResource]float64{},
		nominal: map[string]int{}, value: map[string]float64{}}
	gpuModel := map[string]string{} // flavor → GPU model
	for _, n := range cl.Nodes {
		ni := &NodeInfo{Name: n.Name, Model: n.GPUModel, Flavor: n.Flavor, Rack: n.Rack, GPUs: n.GPUs, MIG: n.MIG}
		gpuModel[n.Flavor] = n.GPUModel
		perProfile := map[string]int64{}
		var profiles []string
		for g := 0; g < n.GPUs; g++ {
			if len(n.MIG) == 0 {
				ni.Devices = append(ni.Devices, &Device{Node: ni, GPU: g})
				continue
			}
			for i, p := range n.MIG {
				ni.Devices = append(ni.Devices, &Device{Node: ni, GPU: g, Profile: p, Instance: i + 1})
				if perProfile[p] == 0 {
					profiles = append(profiles, p)
				}
				perProfile[p]++
			}
		}
		idx := len(m.Cluster.Nodes)
		m.Cluster.Nodes = append(m.Cluster.Nodes, ni)
		m.Cluster.Devices = append(m.Cluster.Devices, ni.Devices...)
		if len(n.MIG) == 0 {
			m.addNode(admission.Node{Name: n.Name, Flavor: n.Flavor, Resource: config.ResourceGPU, Domain: n.Rack, Free: int64(n.GPUs)}, nodeRef{node: idx})
			continue
		}
		for _, p := range profiles {
			res := config.MIGResourcePrefix + p
			m.addNode(admission.Node{Name: n.Name + "/" + res, Flavor: n.Flavor, Resource: res, Domain: n.Rack, Free: perProfile[p]},
				nodeRef{node: idx, profile: p})
		}
	}
	limit := func(p *int) int64 {
		if p == nil {
			return -1
		}
		return int64(*p)
	}
	for _, q := range cfg.ClusterQueues {
		aq := &admission.ClusterQueue{Name: q.Name, Cohort: q.Cohort, Team: q.Name, Weight: 1, Quotas: map[admission.FlavorResource]admission.Quota{}}
		for _, fq := range q.Flavors {
			aq.Flavors = append(aq.Flavors, fq.Name)
			for _, r := range fq.Resources {
				fr := admission.FlavorResource{Flavor: fq.Name, Resource: r.Name}
				aq.Quotas[fr] = admission.Quota{Nominal: int64(r.NominalQuota), BorrowingLimit: limit(r.BorrowingLimit), LendingLimit: limit(r.LendingLimit)}
				if _, ok := m.Rates[fr]; !ok {
					m.price(fr, unitRate(cfg.PriceMicros(fq.Name), r.Name, gpuModel[fq.Name]))
				}
				m.nominal[q.Name] += r.NominalQuota
				m.value[q.Name] += float64(r.NominalQuota) * m.Rates[fr]
			}
		}
		m.Queues[q.Name] = aq
	}
	for _, t := range cfg.Teams {
		for _, cq := range t.ClusterQueues {
			if q := m.Queues[cq]; q != nil {
				q.Team = t.Name
			}
		}
	}
	for _, lq := range cfg.LocalQueues {
		m.LocalQueues[lq.Namespace+"/"+lq.Name] = lq.ClusterQueue
	}
	return m, nil
}

// unitRate is what one unit of resource costs per second, in micros, on a
// flavor priced at perGPUHour micros: a whole GPU, or a MIG slice's compute
// share of it.
func unitRate(perGPUHour int64, resource, gpuModel string) float64 {
	units := int64(attribution.QuotaUnitsPerGPU)
	if prof, ok := strings.CutPrefix(resource, config.MIGResourcePrefix); ok {
		if u, ok := attribution.QuotaUnits(1, prof, gpuModel); ok {
			units = u
		}
	}
	return float64(perGPUHour) / 3600 * float64(units) / attribution.QuotaUnitsPerGPU
}

func (m *Model) price(fr admission.FlavorResource, perSecond float64) {
	m.Rates[fr] = perSecond
	m.resources = append(m.resources, fr)
}

func (m *Model) addNode(n admission.Node, ref nodeRef) {
	m.Nodes = append(m.Nodes, n)
	m.ref = append(m.ref, ref)
	m.capacity += int(n.Free)
	m.NodeUnits = max(m.NodeUnits, int(n.Free))
}

// FlavorCapacity is the units of each flavor's nodes.
func (m *Model) FlavorCapacity() map[string]int {
	out := map[string]int{}
	for _, n := range m.Nodes {
		out[n.Flavor] += int(n.Free)
	}
	return out
}

// TraceCluster says how a trace's queues become a cluster (TraceModel).
type TraceCluster struct {
	// NodeSize is the GPUs of a node. Default 8.
	NodeSize int
	// CapacityScale shrinks every queue's quota, and so the cluster, to
	// this fraction (at least one node each). 0 means 1.
	CapacityScale float64
	// Flavors split every queue's quota and the nodes between GPU types
	// at their prices; empty: one flavor "gpu" at PriceMicrosPerGPUHour.
	Flavors               []ReplayFlavor
	PriceMicrosPerGPUHour int64
	// NodesPerRack nodes share a topology domain. Default 8.
	NodesPerRack int
	// Energy prices for attribution (0: none).
	EnergyPriceMicrosPerKWh, PUEMicros int64
	// SharedGPUs, when > 0, makes the queues LocalQueues of one
	// ClusterQueue of this many GPUs (split between the flavors by their
	// shares) instead of ClusterQueues of their own quotas: each queue may
	// use every GPU, so only the capacity bounds it, and each flavor is one
	// node, since Kueue without topology-aware scheduling admits by quota
	// alone. NodeSize and CapacityScale are then unused.
	SharedGPUs int
}

// TraceModel builds the cluster a trace's queues run on: each queue gets
// its nominal quota, rounded to whole nodes (at least one) after scaling;
// the cluster has as many nodes as the quotas add up to, named node-0,
// node-1, …, split between the flavors by their shares in order; and each
// flavor's GPUs are the queues' nominal quota of it, in proportion to
// their quotas (the quotas of a flavor add up to its GPUs). Every queue is a team with a
// namespace and a LocalQueue of its name.
func TraceModel(queues []TraceQueue, tc TraceCluster) (*Model, error) {
	if tc.NodeSize <= 0 {
		tc.NodeSize = GPUsPerNode
	}
	if tc.NodesPerRack <= 0 {
		tc.NodesPerRack = 8
	}
	scale := tc.CapacityScale
	if scale <= 0 {
		scale = 1
	}
	flavors := slices.Clone(tc.Flavors)
	if len(flavors) == 0 {
		flavors = []ReplayFlavor{{Name: "gpu", Share: 1, PriceMicrosPerGPUHour: tc.PriceMicrosPerGPUHour}}
	}
	m := &Model{Cluster: &Cluster{Name: "replay"}, Queues: map[string]*admission.ClusterQueue{}, LocalQueues: map[string]string{},
		Rates: map[admission.FlavorResource]float64{}, nominal: map[string]int{}, value: map[string]float64{}}
	am := &attribution.Model{Cluster: "replay", LocalQueues: map[attribution.QueueRef]string{},
		ClusterQueueTeams: map[string]string{}, NamespaceTeams: map[string]string{}, Quotas: map[attribution.QuotaRef]int64{},
		EnergyPriceMicrosPerKWh: tc.EnergyPriceMicrosPerKWh, PUEMicros: tc.PUEMicros}
	m.Attribution = am
	var flavorNames []string
	perGPU := make([]int, len(flavors)) // units of its resource a GPU has
	for i, f := range flavors {
		if f.Name == "" || (f.Share <= 0 && f.GPUs <= 0) || f.PriceMicrosPerGPUHour <= 0 {
			return nil, fmt.Errorf("flavor %q: share %g, %d GPUs, price %d; want a name, a share > 0 (or GPUs) and a price > 0", f.Name, f.Share, f.GPUs, f.PriceMicrosPerGPUHour)
		}
		if f.Model == "" {
			flavors[i].Model = ReplayGPUModel
		}
		if f.Resource == "" {
			flavors[i].Resource = config.ResourceGPU
		}
		perGPU[i] = 1
		if prof, ok := strings.CutPrefix(flavors[i].Resource, config.MIGResourcePrefix); ok {
			mp, err := attribution.ParseMIGProfile(prof)
			if err != nil {
				return nil, fmt.Errorf("flavor %s: %w", f.Name, err)
			}
			if tc.SharedGPUs <= 0 || f.GPUs <= 0 {
				return nil, fmt.Errorf("flavor %s: MIG slices (%s) need the flavor's GPUs given, on a shared cluster", f.Name, prof)
			}
			perGPU[i] = attribution.MIGComputeSlices(flavors[i].Model) / mp.ComputeSlices
		}
		m.price(admission.FlavorResource{Flavor: f.Name, Resource: flavors[i].Resource}, unitRate(f.PriceMicrosPerGPUHour, flavors[i].Resource, flavors[i].Model))
		flavorNames = append(flavorNames, f.Name)
	}
	m.flavors = flavors
	// Shared: each flavor's GPUs (given, or the last taking the rest).
	var flavorGPUs []int
	if tc.SharedGPUs > 0 {
		left := tc.SharedGPUs
		for k, f := range flavors {
			n := int(math.Round(float64(tc.SharedGPUs) * f.Share))
			if k == len(flavors)-1 || len(flavors) == 1 {
				n = left
			}
			if f.GPUs > 0 {
				n = f.GPUs
			}
			n = min(n, left)
			if n <= 0 {
				return nil, fmt.Errorf("flavor %s: share %g of %d GPUs leaves it none; want more GPUs or a larger share", f.Name, f.Share, tc.SharedGPUs)
			}
			flavorGPUs = append(flavorGPUs, n)
			left -= n
		}
	}
	// Each queue's GPUs, and the nodes that make them.
	totalNodes := 0
	gpusOf := make([]int64, len(queues))
	for i, q := range queues {
		nodes := max(int(math.Round(float64(q.NominalGPUs)/float64(tc.NodeSize)*scale)), 1)
		gpusOf[i] = int64(nodes * tc.NodeSize)
		if flavorGPUs != nil {
			nodes, gpusOf[i] = 0, int64(tc.SharedGPUs)
		}
		totalNodes += nodes
	}
	// Nodes go to the flavors by their shares, the last taking the rest.
	var nodeFlavor []int
	for k, f := range flavors {
		n := int(math.Round(float64(totalNodes) * f.Share))
		if k == len(flavors)-1 || len(flavors) == 1 {
			n = totalNodes - len(nodeFlavor)
		}
		for range min(n, totalNodes-len(nodeFlavor)) {
			nodeFlavor = append(nodeFlavor, k)
		}
	}
	// A flavor's GPUs are its nodes'; they go to the queues as nominal
	// quota in proportion to the queues' GPUs (largest remainder), so
	// that no flavor's quotas add up to more GPUs than it has.
	quota := make([][]int64, len(flavors))
	for k := range flavors {
		switch {
		case flavorGPUs != nil:
			quota[k] = make([]int64, len(queues))
			for i := range queues {
				quota[k][i] = int64(flavorGPUs[k] * perGPU[k])
			}
		default:
			var have int64
			for _, fi := range nodeFlavor {
				if fi == k {
					have += int64(tc.NodeSize)
				}
			}
			quota[k] = ledger.SplitLargestRemainder(have, gpusOf, nil)
		}
	}
	for i, q := range queues {
		cq := &admission.ClusterQueue{Name: q.Name, Cohort: q.Cohort, Team: q.Name, Weight: 1, Flavors: flavorNames,
			Quotas: map[admission.FlavorResource]admission.Quota{}}
		for k, f := range flavors {
			share := f.Share
			if len(flavors) == 1 {
				share = 1
			}
			borrow := int64(q.BorrowingLimit)
			if q.BorrowingLimit >= 0 {
				borrow = int64(math.Round(float64(q.BorrowingLimit) * scale * share))
			}
			fr := admission.FlavorResource{Flavor: f.Name, Resource: f.Resource}
			n := quota[k][i]
			cq.Quotas[fr] = admission.Quota{Nominal: n, BorrowingLimit: borrow, LendingLimit: -1}
			m.value[q.Name] += float64(n) * m.Rates[fr]
			am.Quotas[attribution.QuotaRef{ClusterQueue: q.Name, Flavor: f.Name}] = n * attribution.QuotaUnitsPerGPU
		}
		m.Queues[q.Name] = cq
		m.nominal[q.Name] = int(gpusOf[i])
		m.LocalQueues[q.Name+"/"+q.Name] = q.Name
		am.LocalQueues[attribution.QueueRef{Namespace: q.Name, Name: q.Name}] = q.Name
		am.ClusterQueueTeams[q.Name] = q.Name
		am.NamespaceTeams[q.Name] = q.Name
	}
	size := func(int) int { return tc.NodeSize }
	if flavorGPUs != nil {
		nodeFlavor = nodeFlavor[:0]
		for k := range flavors {
			nodeFlavor = append(nodeFlavor, k)
		}
		size = func(k int) int { return flavorGPUs[k] }
	}
	for i, fi := range nodeFlavor {
		f := flavors[fi]
		name := "node-" + strconv.Itoa(i)
		n := &NodeInfo{Name: name, Model: f.Model, Flavor: f.Name, GPUs: size(fi), Rack: "rack-" + strconv.Itoa(i/tc.NodesPerRack)}
		profile, _ := strings.CutPrefix(f.Resource, config.MIGResourcePrefix)
		if profile == f.Resource {
			profile = ""
		}
		for range perGPU[fi] {
			if profile != "" {
				n.MIG = append(n.MIG, profile)
			}
		}
		for g := range n.GPUs {
			if profile == "" {
				n.Devices = append(n.Devices, &Device{Node: n, GPU: g})
			}
			for inst := range len(n.MIG) {
				n.Devices = append(n.Devices, &Device{Node: n, GPU: g, Profile: profile, Instance: inst + 1})
			}
			am.GPUs = append(am.GPUs, attribution.GPU{Node: name, Index: strconv.Itoa(g), Model: f.Model,
				Flavor: f.Name, RateMicrosPerHour: f.PriceMicrosPerGPUHour})
		}
		m.Cluster.Nodes = append(m.Cluster.Nodes, n)
		m.Cluster.Devices = append(m.Cluster.Devices, n.Devices...)
		admName := name
		if profile != "" {
			admName = name + "/" + f.Resource
		}
		m.addNode(admission.Node{Name: admName, Flavor: f.Name, Resource: f.Resource, Domain: n.Rack, Free: int64(n.GPUs * perGPU[fi])}, nodeRef{node: i, profile: profile})
	}
	return m, nil
}

// queueNames returns the queues, sorted: sums go in one order.
func (m *Model) queueNames() []string {
	names := make([]string, 0, len(m.Queues))
	for q := range m.Queues {
		names = append(names, q)
	}
	sort.Strings(names)
	return names
}
