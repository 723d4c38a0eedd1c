package kube

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReadClusterQueue: the entitlement is each flavor's nominal GPUs (a
// MIG slice its share of a GPU) at the flavor's price; CPU and memory
// quotas are no GPUs; the weight and cohort are read.
func TestReadClusterQueue(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "llm"},
		"spec": map[string]any{"cohortName": "research", "fairSharing": map[string]any{"weight": "500m"},
			"resourceGroups": []any{
				map[string]any{"coveredResources": []any{"cpu", "nvidia.com/gpu"}, "flavors": []any{
					map[string]any{"name": "h100", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "64"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8"}}},
					map[string]any{"name": "t4", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "32"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": int64(4)}}}}},
				map[string]any{"coveredResources": []any{"nvidia.com/mig-1g.10gb"}, "flavors": []any{
					map[string]any{"name": "h100-mig", "resources": []any{
						map[string]any{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "14"}}}}},
			}}}}
	prices := map[string]int64{"h100": 6_880_000, "t4": 526_000, "h100-mig": 6_880_000}
	q := ReadClusterQueue(u, prices)
	want := 8*6_880_000.0 + 4*526_000.0 + 2*6_880_000.0
	if q.Name != "llm" || q.Cohort != "research" || q.Weight != 0.5 || math.Abs(q.Entitlement-want) > 1e-6 {
		t.Errorf("got %+v, want llm in research, weight 0.5, entitlement %g", q, want)
	}
	q = ReadClusterQueue(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, prices)
	if q.Weight != 1 || q.Cohort != "" || q.Entitlement != 0 {
		t.Errorf("an empty ClusterQueue: got %+v, want weight 1, no cohort, no entitlement", q)
	}
}

// TestClusterQueueWeights: within a cohort, a queue that spent more than
// its entitlement's share of the cohort's spend gets a smaller weight, so
// that Kueue's share (borrowed / weight) puts it behind; queues outside a
// cohort, alone in one, or without an entitlement get none; cohorts are
// weighed apart.
func TestClusterQueueWeights(t *testing.T) {
	qs := []ClusterQueue{
		{Name: "h", Cohort: "c", Entitlement: 100},
		{Name: "t", Cohort: "c", Entitlement: 100},
		{Name: "m", Cohort: "c", Entitlement: 200},
		{Name: "alone", Cohort: "solo", Entitlement: 50},
		{Name: "nocohort", Entitlement: 50},
		{Name: "noprice", Cohort: "c"},
		{Name: "x", Cohort: "d", Entitlement: 10},
		{Name: "y", Cohort: "d", Entitlement: 10},
	}
	// Cohort c spent 800 on 400 of entitlement: 2 per unit. h spent 4 per
	// unit, t 1, m 1.5.
	spend := map[string]float64{"h": 400, "t": 100, "m": 300, "alone": 1e9, "noprice": 1e9, "x": 0, "y": 0}
	w := ClusterQueueWeights(qs, spend)
	for q, want := range map[string]float64{"h": 0.5, "t": 2, "m": 4.0 / 3, "x": 1, "y": 1} {
		if math.Abs(w[q]-want) > 1e-12 {
			t.Errorf("%s: weight %g, want %g", q, w[q], want)
		}
	}
	for _, q := range []string{"alone", "nocohort", "noprice"} {
		if _, ok := w[q]; ok {
			t.Errorf("%s: weight %g, want none", q, w[q])
		}
	}
	// Kueue's key for equal borrowing: borrowed / weight. h, which spent
	// the most per entitlement, goes last.
	if !(1/w["t"] < 1/w["m"] && 1/w["m"] < 1/w["h"]) {
		t.Errorf("weights %v do not order the borrowers t, m, h", w)
	}
}
