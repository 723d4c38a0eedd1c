package capacity

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPrometheusRules: the rule file parses, records per flavor before it
// alerts, guards the 30-day average with a sample count and data from
// before the window, and never waits with a `for`.
func TestPrometheusRules(t *testing.T) {
	doc := PrometheusRules("prod", []RuleFlavor{{Name: "h100", Nodes: []string{"gpu-b", "gpu.a"}}, {Name: "a100", Nodes: []string{"x"}}}, DefaultRule)
	var f struct {
		Groups []struct {
			Name     string
			Interval string
			Rules    []struct {
				Record, Alert, Expr, For string
				Labels                   map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(doc), &f); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if len(f.Groups) != 2 || f.Groups[0].Name != "gpuledger-capacity-records-prod" || f.Groups[0].Interval != "5m" || len(f.Groups[0].Rules) != 6 {
		t.Fatalf("groups %+v", f.Groups)
	}
	r := f.Groups[0].Rules[5]
	if r.Record != "gpuledger:gpus:allocated_ratio" || r.Labels["flavor"] != "h100" || !strings.Contains(r.Expr, `node=~"gpu-b|gpu\\.a"`) {
		t.Errorf("h100's ratio %+v", r)
	}
	a := f.Groups[1].Rules[0]
	for _, want := range []string{`avg_over_time(gpuledger:gpus:allocated_ratio{cluster="prod"}[30d]) >= 0.8`, `count_over_time(gpuledger:gpus:allocated_ratio{cluster="prod"}[30d]) >= 8208`, `[1h] offset 30d) > 0`} {
		if !strings.Contains(a.Expr, want) {
			t.Errorf("alert expression lacks %q:\n%s", want, a.Expr)
		}
	}
	if a.Alert != AlertExpansion || a.For != "" || a.Labels["action"] != "expand" {
		t.Errorf("alert %+v", a)
	}
}
