package kube

import (
	"testing"

	"github.com/gpuledger/gpuledger/config"
)

// TestTeamsOf: the controller gets the example's owners, limits and
// prices from the configuration.
func TestTeamsOf(t *testing.T) {
	t.Chdir("../..")
	cfg, err := config.Load("examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	teams, err := TeamsOf(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if teams.Cluster != "gpu-prod-1" || teams.Currency != "USD" {
		t.Errorf("cluster %q, currency %q", teams.Cluster, teams.Currency)
	}
	if got := teams.Team("research-exp", ""); got != "ml-research" {
		t.Errorf("namespace research-exp: team %q, want ml-research", got)
	}
	if got := teams.Team("elsewhere", "notebooks"); got != "data-science" {
		t.Errorf("ClusterQueue notebooks: team %q, want data-science", got)
	}
	if teams.LimitMicros["nlp"] != 60_000_000_000 || teams.Entitlement["nlp"] != 60e9 {
		t.Errorf("nlp's limit %d, entitlement %g: want 60000.00", teams.LimitMicros["nlp"], teams.Entitlement["nlp"])
	}
	if teams.PriceMicrosPerGPUHour["h100"] != 6_880_000 || teams.PriceMicrosPerGPUHour["a100"] != 3_430_881 {
		t.Errorf("prices %v", teams.PriceMicrosPerGPUHour)
	}
}
