package capacity

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
)

// The capacity section overrides the defaults field by field; without one
// the defaults stand.
func TestRulesFromConfig(t *testing.T) {
	if RuleOf(nil) != DefaultRule || WaitRuleOf(nil) != DefaultWaitRule {
		t.Errorf("no capacity section: %+v, %+v; want the defaults", RuleOf(nil), WaitRuleOf(nil))
	}
	c := &config.Capacity{PurchaseGPUs: 16, UtilizationPercent: 70, WindowDays: 14, Measure: "allocated", WaitMinutes: 45, WaitPercentile: 95, WaitWindowDays: 3}
	r := RuleOf(c)
	if r.PurchaseGPUs != 16 || r.Threshold != 0.7 || r.Window != 14*24*time.Hour || r.Measure != Measure("allocated") || r.MinCoverage != DefaultRule.MinCoverage {
		t.Errorf("rule: %+v", r)
	}
	w := WaitRuleOf(c)
	if w.PurchaseGPUs != 16 || w.Threshold != 45*time.Minute || w.Quantile != 0.95 || w.Window != 3*24*time.Hour || w.Busy != 0.7 {
		t.Errorf("wait rule: %+v", w)
	}
	o := EndpointOptionsOf(&config.Capacity{ColdStartSeconds: 90, ColdStartModels: map[string]int{"llama": 300}},
		map[string]int64{"h100": 6_880_000, "t4": 526_000})
	if o.PriceMicros != 6_880_000 || o.Default != 90*time.Second || o.Loads["llama"] != 5*time.Minute {
		t.Errorf("endpoint options: %+v", o)
	}
}

// examples/cluster.yaml: the MIG node is a flavor of its own with its
// layout in 7ths of an H100, flavors come sorted, each ClusterQueue with
// its first flavor and its LocalQueues' namespaces.
func TestRuleInputsOfExample(t *testing.T) {
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Cluster("")
	if err != nil {
		t.Fatal(err)
	}
	flavors, queues, err := RuleInputsOf(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(flavors, func(a, b RuleFlavor) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("flavors not sorted: %+v", flavors)
	}
	i := slices.IndexFunc(flavors, func(f RuleFlavor) bool { return f.Name == "h100-mig" })
	if i < 0 || len(flavors[i].Nodes) != 1 || len(flavors[i].MIG) != 4 || flavors[i].MIG[0].Slices != 3 || flavors[i].MIG[0].Of != 7 {
		t.Fatalf("h100-mig: %+v", flavors)
	}
	if len(queues) == 0 || queues[0].Flavor == "" || len(queues[0].Namespaces) == 0 {
		t.Errorf("queues: %+v", queues)
	}
	// Two layouts in one flavor cannot be counted by one rule.
	bad := *c
	bad.Nodes = append(slices.Clone(c.Nodes), config.Node{Name: "odd", GPUModel: "NVIDIA H100 80GB HBM3", GPUs: 8, Flavor: "h100-mig", MIG: []string{"7g.80gb"}})
	if _, _, err := RuleInputsOf(cfg, &bad); err == nil {
		t.Error("two MIG layouts in one flavor: no error")
	}
}
