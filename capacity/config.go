package capacity

// What gpuledger's configuration (its capacity: section, nodes and
// queues) asks of the capacity rules: the expansion and queue-wait
// triggers, the endpoints' cold starts, the Prometheus rules' inputs.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
)

// WaitRuleOf is the configuration's queue-wait trigger.
func WaitRuleOf(c *config.Capacity) WaitRule {
	r := DefaultWaitRule
	if c == nil {
		return r
	}
	if c.PurchaseGPUs > 0 {
		r.PurchaseGPUs = c.PurchaseGPUs
	}
	if c.WaitMinutes > 0 {
		r.Threshold = time.Duration(c.WaitMinutes) * time.Minute
	}
	if c.WaitPercentile > 0 {
		r.Quantile = float64(c.WaitPercentile) / 100
	}
	if c.WaitWindowDays > 0 {
		r.Window = time.Duration(c.WaitWindowDays) * 24 * time.Hour
	}
	if c.UtilizationPercent > 0 {
		r.Busy = float64(c.UtilizationPercent) / 100
	}
	return r
}

// EndpointOptionsOf is the configuration's cold start, for scale-to-zero on
// the ledger's endpoints; prices is the flavors', whose highest is the
// price of an endpoint's GPU-hour where its workload has none.
func EndpointOptionsOf(c *config.Capacity, prices map[string]int64) EndpointOptions {
	o := DefaultEndpointOptions
	if len(prices) > 0 {
		o.PriceMicros = slices.Max(slices.Collect(maps.Values(prices)))
	}
	if c == nil {
		return o
	}
	if c.ColdStartSeconds > 0 {
		o.Default = time.Duration(c.ColdStartSeconds) * time.Second
	}
	if c.ColdStartPenalty.Set {
		o.PenaltyMicros = c.ColdStartPenalty.Micros
	}
	o.Loads = map[string]time.Duration{}
	for m, s := range c.ColdStartModels {
		o.Loads[m] = time.Duration(s) * time.Second
	}
	for _, sc := range c.SLAClasses {
		class := SLAClass{Name: sc.Name, Namespaces: sc.Namespaces, PenaltyMicros: o.PenaltyMicros, MaxP95: time.Duration(sc.MaxP95ExtraSeconds) * time.Second}
		if sc.ColdStartPenalty.Set {
			class.PenaltyMicros = sc.ColdStartPenalty.Micros
		}
		if sc.MaxP95ExtraSeconds < 0 {
			class.MaxP95 = -1
		}
		o.Classes = append(o.Classes, class)
	}
	return o
}

// RuleOf is the configuration's expansion trigger.
func RuleOf(c *config.Capacity) Rule {
	r := DefaultRule
	if c == nil {
		return r
	}
	if c.PurchaseGPUs > 0 {
		r.PurchaseGPUs = c.PurchaseGPUs
	}
	if c.UtilizationPercent > 0 {
		r.Threshold = float64(c.UtilizationPercent) / 100
	}
	if c.WindowDays > 0 {
		r.Window = time.Duration(c.WindowDays) * 24 * time.Hour
	}
	if c.Measure != "" {
		r.Measure = Measure(c.Measure)
	}
	return r
}

// ruleSlices is a node's MIG layout for the rules, parsed by the ledger's
// own rules: each profile's compute slices of its GPU model's, and its
// resource as kube-state-metrics names it.
func ruleSlices(n config.Node) ([]RuleSlice, error) {
	var out []RuleSlice
	for _, p := range n.MIG {
		mp, err := attribution.ParseMIGProfile(p)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out = append(out, RuleSlice{Profile: p, Resource: attribution.SanitizeName(config.MIGResourcePrefix + p),
			Slices: mp.ComputeSlices, Of: attribution.MIGComputeSlices(n.GPUModel)})
	}
	return out, nil
}

// RuleInputsOf is what the Prometheus rules need of the configuration for
// cluster c: its flavors with their nodes and MIG layout (one layout per
// flavor), and each ClusterQueue's flavor and its LocalQueues' namespaces.
func RuleInputsOf(cfg *config.Config, c *config.Cluster) ([]RuleFlavor, []RuleQueue, error) {
	byFlavor := map[string]*RuleFlavor{}
	for _, n := range c.Nodes {
		layout, err := ruleSlices(n)
		if err != nil {
			return nil, nil, err
		}
		f := byFlavor[n.Flavor]
		if f == nil {
			f = &RuleFlavor{Name: n.Flavor, MIG: layout}
			byFlavor[n.Flavor] = f
		}
		if !slices.Equal(f.MIG, layout) {
			return nil, nil, fmt.Errorf("flavor %s: node %s is partitioned %v (%s), another node otherwise; the rules count one layout per flavor: give the layouts flavors of their own",
				n.Flavor, n.Name, n.MIG, n.GPUModel)
		}
		f.Nodes = append(f.Nodes, n.Name)
	}
	var flavors []RuleFlavor
	for _, f := range byFlavor {
		flavors = append(flavors, *f)
	}
	slices.SortFunc(flavors, func(a, b RuleFlavor) int { return strings.Compare(a.Name, b.Name) })
	namespaces := map[string][]string{}
	for _, lq := range cfg.LocalQueues {
		if !slices.Contains(namespaces[lq.ClusterQueue], lq.Namespace) {
			namespaces[lq.ClusterQueue] = append(namespaces[lq.ClusterQueue], lq.Namespace)
		}
	}
	var queues []RuleQueue
	for _, q := range cfg.ClusterQueues {
		if len(q.Flavors) > 0 {
			queues = append(queues, RuleQueue{Name: q.Name, Flavor: q.Flavors[0].Name, Namespaces: namespaces[q.Name]})
		}
	}
	return flavors, queues, nil
}

// Settings are a cluster's capacity rules, prices, budgets and endpoint
// prices from the configuration: what the capacity routes, reports and
// commands read.
type Settings struct {
	Cluster      string
	Rule         Rule
	WaitRule     WaitRule
	PricesMicros map[string]int64
	Budgets      map[string]int64
	Endpoints    EndpointOptions
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// SettingsOf reads Settings from the configuration; cluster names the
// cluster ("" for every one).
func SettingsOf(cfg *config.Config, cluster string) Settings {
	prices := map[string]int64{}
	for _, f := range cfg.ResourceFlavors {
		prices[f.Name] = cfg.PriceMicros(f.Name)
	}
	return Settings{Cluster: cluster, Rule: RuleOf(cfg.Capacity), WaitRule: WaitRuleOf(cfg.Capacity), PricesMicros: prices, Budgets: cfg.TeamBudgets(),
		Endpoints: EndpointOptionsOf(cfg.Capacity, prices)}
}

// RulesDocument is the vmalert/Prometheus rules file of the cluster's
// expansion and queue-wait alerts (RuleInputsOf, PrometheusRules,
// PrometheusWaitRules); match selects the cluster's series in a TSDB
// shared by clusters. It returns the cluster's name and flavor count too.
func RulesDocument(cfg *config.Config, cluster, match string) (doc, name string, flavors int, err error) {
	c, err := cfg.Cluster(cluster)
	if err != nil {
		return "", "", 0, err
	}
	fl, queues, err := RuleInputsOf(cfg, c)
	if err != nil {
		return "", "", 0, err
	}
	doc = PrometheusRules(c.Name, fl, RuleOf(cfg.Capacity)) + PrometheusWaitRules(c.Name, queues, WaitRuleOf(cfg.Capacity), match)
	return doc, c.Name, len(fl), nil
}
