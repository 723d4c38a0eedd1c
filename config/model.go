package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

func sortStrings(s []string) { slices.Sort(s) }

// Cluster returns the named cluster, or the only one when name is empty.
func (c *Config) Cluster(name string) (*Cluster, error) {
	if name == "" && len(c.Clusters) == 1 {
		return &c.Clusters[0], nil
	}
	for i := range c.Clusters {
		if c.Clusters[i].Name == name {
			return &c.Clusters[i], nil
		}
	}
	names := make([]string, len(c.Clusters))
	for i := range c.Clusters {
		names[i] = c.Clusters[i].Name
	}
	return nil, fmt.Errorf("cluster %q is not in the config; want one of %v", name, names)
}

// PriceMicros returns the per-GPU-hour price of a flavor, however the
// config gave it (directly, from the price book, or amortised).
func (c *Config) PriceMicros(flavor string) int64 {
	return c.rates[flavor]
}

// PriceSource says where a flavor's price comes from, for the lines that
// explain a bill: "configured perGPUHour", "price book aws/p5.48xlarge
// on-demand" (or spot, with its exchange rate), or "on-prem amortisation"
// with its terms; the price's own source: note, when it has one.
func (c *Config) PriceSource(flavor string) string {
	for _, pr := range c.Prices {
		if pr.Flavor != flavor {
			continue
		}
		var s string
		switch {
		case pr.Catalog != "":
			kind := "on-demand"
			if pr.Spot {
				kind = "spot"
			}
			s = fmt.Sprintf("price book %s %s", pr.Catalog, kind)
			if pr.ExchangeRate.Set {
				s += fmt.Sprintf(" at %s %s per USD", pr.ExchangeRate, c.Currency)
			}
		case pr.OnPrem != nil:
			o := pr.OnPrem
			s = fmt.Sprintf("on-prem amortisation: %s %s a GPU over %d months, %d W, %s a month overhead", ledger.FormatCents(o.PurchasePerGPU.Micros),
				c.Currency, o.DepreciationMonths, o.PowerWattsPerGPU, ledger.FormatCents(o.OverheadPerGPUMonth.Micros))
		default:
			s = "configured perGPUHour"
		}
		if pr.Source != "" {
			s += " (" + pr.Source + ")"
		}
		return s
	}
	return ""
}

// TeamBudgets returns each team's monthly budget in micro-units.
func (c *Config) TeamBudgets() map[string]int64 {
	m := make(map[string]int64, len(c.Teams))
	for _, t := range c.Teams {
		m[t.Name] = t.MonthlyBudget.Micros
	}
	return m
}

// TeamNames returns the teams in config order.
func (c *Config) TeamNames() []string {
	names := make([]string, len(c.Teams))
	for i, t := range c.Teams {
		names[i] = t.Name
	}
	return names
}

// AttributionModel returns the cost model of one cluster: every GPU of its
// nodes priced at its flavor's rate, and the queue and team mappings.
func (c *Config) AttributionModel(cluster string) (*attribution.Model, error) {
	cl, err := c.Cluster(cluster)
	if err != nil {
		return nil, err
	}
	m := &attribution.Model{
		Cluster:           cl.Name,
		LocalQueues:       make(map[attribution.QueueRef]string, len(c.LocalQueues)),
		ClusterQueueTeams: make(map[string]string),
		NamespaceTeams:    make(map[string]string),
	}
	flavorModel := make(map[string]string)
	for _, n := range cl.Nodes {
		rate := c.PriceMicros(n.Flavor)
		flavorModel[n.Flavor] = n.GPUModel
		replicas, byRequest := 0, false
		if sh := n.Sharing; sh != nil {
			replicas, byRequest = sh.Replicas, sh.Split == "request"
			if sh.Strategy == "fractional" {
				replicas, byRequest = 1000, true
			}
		}
		for i := 0; i < n.GPUs; i++ {
			m.GPUs = append(m.GPUs, attribution.GPU{
				Node: n.Name, Index: strconv.Itoa(i), Model: n.GPUModel,
				Flavor: n.Flavor, RateMicrosPerHour: rate, RateSource: c.PriceSource(n.Flavor), MIG: n.MIG,
				Replicas: replicas, SplitByRequest: byRequest,
			})
		}
	}
	m.Quotas = make(map[attribution.QuotaRef]int64)
	for _, cq := range c.ClusterQueues {
		for _, f := range cq.Flavors {
			for _, r := range f.Resources {
				m.Quotas[attribution.QuotaRef{ClusterQueue: cq.Name, Flavor: f.Name}] += quotaUnits(r, flavorModel[f.Name])
			}
		}
	}
	if c.CostPolicy != nil {
		m.Unallocated, _ = attribution.ParseUnallocatedPolicy(c.CostPolicy.Unallocated)
	}
	if c.Energy != nil {
		m.EnergyPriceMicrosPerKWh = c.Energy.PricePerKWh.Micros
		m.PUEMicros = c.Energy.PUE.Micros
	}
	for _, lq := range c.LocalQueues {
		m.LocalQueues[attribution.QueueRef{Namespace: lq.Namespace, Name: lq.Name}] = lq.ClusterQueue
	}
	for _, t := range c.Teams {
		for _, cq := range t.ClusterQueues {
			m.ClusterQueueTeams[cq] = t.Name
		}
		for _, ns := range t.Namespaces {
			m.NamespaceTeams[ns] = t.Name
		}
	}
	return m, nil
}

// quotaUnits converts a resource quota into attribution's quota units
// (attribution.QuotaUnitsPerGPU per GPU): a whole GPU is 28, a MIG slice its
// compute share of the GPU model's, exactly.
func quotaUnits(r ResourceQuota, model string) int64 {
	if r.Name == ResourceGPU {
		u, _ := attribution.QuotaUnits(int64(r.NominalQuota), "", model)
		return u
	}
	prof, _ := strings.CutPrefix(r.Name, MIGResourcePrefix)
	u, _ := attribution.QuotaUnits(int64(r.NominalQuota), prof, model)
	return u
}
