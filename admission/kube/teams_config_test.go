package kube

import (
	"math"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

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

// TestNewRefusesABadIdlePenalty: a negative or non-finite -idlePenalty is
// refused before anything is contacted, with the flag and its value.
func TestNewRefusesABadIdlePenalty(t *testing.T) {
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{Store: ledgerWith(t, nil), IdlePenalty: bad})
		if err == nil || !strings.Contains(err.Error(), "-idlePenalty") {
			t.Errorf("idle penalty %v: %v, want an error naming -idlePenalty", bad, err)
		}
	}
}
