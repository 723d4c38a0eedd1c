package capacity

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name     string
		Interval string
		Rules    []struct {
			Record, Alert, Expr, For string
			Labels                   map[string]string
		}
	}
}

func parseRules(t *testing.T, doc string) ruleFile {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal([]byte(doc), &f); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return f
}

// TestPrometheusRules: the rule file parses, records per flavor the GPUs,
// those held and those busy before it alerts, guards the 30-day averages
// with a sample count and data from before the window, and never waits
// with a `for`. Under the default measure it buys on the busy share and
// says reclaim when the held share is over and the busy share is not;
// under MeasureAllocated it buys on the held share and never says reclaim.
func TestPrometheusRules(t *testing.T) {
	flavors := []RuleFlavor{{Name: "h100", Nodes: []string{"gpu-b", "gpu.a"}}, {Name: "a100", Nodes: []string{"x"}}}
	f := parseRules(t, PrometheusRules("prod", flavors, DefaultRule))
	if len(f.Groups) != 2 || f.Groups[0].Name != "gpuledger-capacity-records-prod" || f.Groups[0].Interval != "5m" || len(f.Groups[0].Rules) != 10 {
		t.Fatalf("groups %+v", f.Groups)
	}
	h100 := f.Groups[0].Rules[5:]
	if r := h100[2]; r.Record != "gpuledger:gpus:allocated_ratio" || r.Labels["flavor"] != "h100" || !strings.Contains(r.Expr, `node=~"gpu-b|gpu\\.a"`) {
		t.Errorf("h100's held ratio %+v", r)
	}
	if r := h100[4]; r.Record != "gpuledger:gpus:active_ratio" || !strings.Contains(r.Expr, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"gpu-b|gpu\\.a"}`) ||
		!strings.Contains(r.Expr, `DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu-b|gpu\\.a"}) / 100`) {
		t.Errorf("h100's busy ratio %+v", r)
	}
	alerts := f.Groups[1].Rules
	if len(alerts) != 2 {
		t.Fatalf("alerts %+v", alerts)
	}
	buy, reclaim := alerts[0], alerts[1]
	for _, want := range []string{`avg_over_time(gpuledger:gpus:active_ratio{cluster="prod"}[30d]) >= 0.8`, `count_over_time(gpuledger:gpus:active_ratio{cluster="prod"}[30d]) >= 8208`, `[1h] offset 30d) > 0`} {
		if !strings.Contains(buy.Expr, want) {
			t.Errorf("expansion expression lacks %q:\n%s", want, buy.Expr)
		}
	}
	if strings.Contains(buy.Expr, "allocated") {
		t.Errorf("the expansion alert buys on the held share:\n%s", buy.Expr)
	}
	if buy.Alert != AlertExpansion || buy.For != "" || buy.Labels["action"] != "expand" {
		t.Errorf("alert %+v", buy)
	}
	for _, want := range []string{`avg_over_time(gpuledger:gpus:allocated_ratio{cluster="prod"}[30d]) >= 0.8`, `avg_over_time(gpuledger:gpus:active_ratio{cluster="prod"}[30d]) < 0.8`,
		`count_over_time(gpuledger:gpus:allocated_ratio{cluster="prod"}[30d]) >= 8208`} {
		if !strings.Contains(reclaim.Expr, want) {
			t.Errorf("reclaim expression lacks %q:\n%s", want, reclaim.Expr)
		}
	}
	if reclaim.Alert != AlertReclaim || reclaim.For != "" || reclaim.Labels["action"] != "reclaim" {
		t.Errorf("alert %+v", reclaim)
	}

	held := DefaultRule
	held.Measure = MeasureAllocated
	f = parseRules(t, PrometheusRules("prod", flavors, held))
	if alerts := f.Groups[1].Rules; len(alerts) != 1 || !strings.Contains(alerts[0].Expr, `avg_over_time(gpuledger:gpus:allocated_ratio{cluster="prod"}[30d]) >= 0.8`) {
		t.Errorf("under the allocated measure: %+v", alerts)
	}
}

// TestPrometheusWaitRules: a queue with namespaces records the GPUs they
// hold and keep busy; its waits say expand unless those GPUs were busy
// less than the rule's share, reclaim when they were; a queue without
// namespaces records neither and is never held back.
func TestPrometheusWaitRules(t *testing.T) {
	doc := "groups:\n" + PrometheusWaitRules("prod", []RuleQueue{{Name: "cq-nlp", Flavor: "h100", Namespaces: []string{"nlp", "nlp-dev"}}, {Name: "cq-x", Flavor: "a100"}},
		DefaultWaitRule, `cluster="prod"`)
	f := parseRules(t, doc)
	if len(f.Groups) != 2 {
		t.Fatalf("groups %+v", f.Groups)
	}
	var records []string
	for _, r := range f.Groups[0].Rules {
		records = append(records, r.Record+"/"+r.Labels["cluster_queue"])
		if r.Record == "gpuledger:cluster_queue:busy_gpus" && !strings.Contains(r.Expr, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="prod",namespace=~"nlp|nlp-dev"}`) {
			t.Errorf("busy GPUs %q", r.Expr)
		}
	}
	want := "gpuledger:queue_wait_seconds_bucket:increase/ gpuledger:queue_wait_seconds_bucket:pending/ gpuledger:cluster_queue:flavor/cq-nlp gpuledger:cluster_queue:held_gpus/cq-nlp gpuledger:cluster_queue:busy_gpus/cq-nlp gpuledger:cluster_queue:flavor/cq-x"
	if got := strings.Join(records, " "); got != want {
		t.Errorf("records\n%s\nwant\n%s", got, want)
	}
	alerts := f.Groups[1].Rules
	if len(alerts) != 2 || alerts[0].Alert != AlertExpansion || alerts[1].Alert != AlertReclaim || alerts[1].Labels["action"] != "reclaim" || alerts[1].Labels["trigger"] != "queue_wait" {
		t.Fatalf("alerts %+v", alerts)
	}
	idle := `/ avg_over_time(gpuledger:cluster_queue:held_gpus{cluster="prod"}[7d]) < 0.8`
	if !strings.Contains(alerts[0].Expr, "unless on(cluster, cluster_queue)") || !strings.Contains(alerts[0].Expr, idle) {
		t.Errorf("expansion %s", alerts[0].Expr)
	}
	if !strings.Contains(alerts[1].Expr, "\nand on(cluster, cluster_queue) (") || !strings.Contains(alerts[1].Expr, idle) {
		t.Errorf("reclaim %s", alerts[1].Expr)
	}
}
