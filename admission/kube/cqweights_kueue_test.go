package kube

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cohortKueue is Kueue with cohort fair sharing on (a fairSharing block).
var cohortKueue = kubetest.Options{KueueConfig: "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"}

// cohortQueue is the YAML of ClusterQueue name in cohort with gpus H100s
// of nominal quota, and of namespace name with LocalQueue q of it.
func cohortQueue(name, cohort string, gpus int) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {}
  cohortName: %[2]s
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: %[3]d}]
---
`, name, cohort, gpus) + kubetest.Namespace(name, "q", name)
}

// TestClusterQueueWeightsSteerCohortFairSharing: ClusterQueues a and b (2
// H100s of nominal quota each) and l (4) share cohort c. a runs 3 GPUs
// (borrowing 1), b 4 (borrowing 2), l 1: the cohort is full. a and b then
// each want one more GPU; l's workload ends and frees one. Kueue's cohort
// fair sharing gives it to the queue that borrows less, a. The ledger
// says a's ClusterQueue spent nine times b's money on the same quota:
// with the controller's ClusterQueue weights Kueue gives it to b.
//
// In the tree layout a and b are each alone in a Cohort object (ca, cb)
// under the root cohort org, beside l: Kueue compares the Cohorts ca and
// cb by what each borrows over its own weight, and the controller writes
// the Cohorts' weights (a and b, alone in their cohorts, get none).
func TestClusterQueueWeightsSteerCohortFairSharing(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	for _, tc := range []struct {
		layout  string
		steered bool
	}{{"flat", false}, {"flat", true}, {"tree", false}, {"tree", true}} {
		steered, tree := tc.steered, tc.layout == "tree"
		name := tc.layout + "/" + map[bool]string{false: "plain Kueue", true: "gpuledger weights"}[steered]
		t.Run(name, func(t *testing.T) {
			s := kubetest.Start(t, cohortKueue)
			ctx := context.Background()
			// The cohorts of a, b and l: one cohort c, or Cohort objects
			// ca and cb under the root org, with l in org.
			ca, cb, cl := "c", "c", "c"
			doc := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\n---\n"
			if tree {
				ca, cb, cl = "ca", "cb", "org"
				doc += "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\n---\n"
				for _, co := range []string{"ca", "cb"} {
					doc += fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: %s}\nspec: {parentName: org}\n---\n", co)
				}
			}
			doc += cohortQueue("a", ca, 2) + "---\n" + cohortQueue("b", cb, 2) + "---\n" + cohortQueue("l", cl, 4)
			if err := s.Apply(ctx, doc); err != nil {
				t.Fatal(err)
			}
			running := [][3]string{
				{"a", "a0", kubetest.Workload("a", "a0", "q", 1, 3, 0)},
				{"b", "b0", kubetest.Workload("b", "b0", "q", 1, 4, 0)},
				{"l", "l0", kubetest.Workload("l", "l0", "q", 1, 1, 0)},
			}
			for _, w := range running {
				if err := s.Apply(ctx, w[2]); err != nil {
					t.Fatal(err)
				}
				kubetest.WaitFor(t, time.Minute, w[0]+"/"+w[1]+" admitted", func() bool { return kubetest.Admitted(workload(t, s, w[0], w[1])) })
			}
			var c *Controller
			if steered {
				hour := testNow.Add(-2 * time.Hour).Truncate(time.Hour)
				row := func(cq string, cost int64) ledger.Row {
					return ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "test", Team: cq, Namespace: cq, LocalQueue: "q", ClusterQueue: cq, Flavor: "h100"},
						GPUSeconds: float64(cost) / 6.88 * 3600 / 1e6, CostMicros: cost}
				}
				store := embeddedtest.Open(t, row("a", 900_000_000), row("b", 100_000_000))
				teams := Teams{Cluster: "test", ByNamespace: map[string]string{"a": "a", "b": "b", "l": "l"},
					ByClusterQueue: map[string]string{"a": "a", "b": "b", "l": "l"}, PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
				c, _ = startController(t, s, Options{Teams: teams, Store: store, Interval: time.Hour, ClusterQueueWeights: true})
				if err := c.UpdateWeights(ctx); err != nil {
					t.Fatal(err)
				}
				weights := map[string]float64{}
				for _, cq := range []string{"a", "b", "l"} {
					u, err := s.Dynamic.Resource(clusterQsGVR).Get(ctx, cq, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					weights[cq] = ReadClusterQueue(u, teams.PriceMicrosPerGPUHour).Weight
				}
				// In the tree, a's and b's money is weighed on their Cohorts.
				weighed := map[string]string{"a": "a", "b": "b"}
				if tree {
					weighed = map[string]string{"a": "ca", "b": "cb"}
					for _, co := range []string{"org", "ca", "cb"} {
						u, err := s.Dynamic.Resource(cohortsGVR).Get(ctx, co, metav1.GetOptions{})
						if err != nil {
							t.Fatal(err)
						}
						weights[co] = ReadCohort(u, teams.PriceMicrosPerGPUHour).Weight
					}
					if weights["a"] != 1 || weights["b"] != 1 || weights["org"] != 1 {
						t.Errorf("weights %v: want a and b (alone in their Cohorts) and org (the root) left at 1", weights)
					}
				}
				t.Logf("weights %v", weights)
				if !(weights[weighed["a"]] < 1 && weights[weighed["b"]] > 1 && weights["l"] == admission.MoneyWeightBound) {
					t.Fatalf("weights %v: want %s under 1, %s over 1, l (spent nothing) %g", weights, weighed["a"], weighed["b"], admission.MoneyWeightBound)
				}
				evs, err := s.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=FairSharingWeight"})
				if err != nil || len(evs.Items) != 3 {
					t.Fatalf("FairSharingWeight Events: %v, %d; want 3", err, len(evs.Items))
				}
				var m strings.Builder
				if err := c.WriteMetrics(&m); err != nil {
					t.Fatal(err)
				}
				want := `gpuledger_controller_clusterqueue_weight{clusterqueue="b",cohort="c",team="b"} 2.`
				if tree {
					want = `gpuledger_controller_cohort_weight{cohort="cb",parent="org"} 2.`
				}
				if !strings.Contains(m.String(), want) {
					t.Errorf("metrics lack %q:\n%s", want, m.String())
				}
			}
			for _, w := range [][3]string{{"b", "b1", kubetest.Workload("b", "b1", "q", 1, 1, 0)}, {"a", "a1", kubetest.Workload("a", "a1", "q", 1, 1, 0)}} {
				if err := s.Apply(ctx, w[2]); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(2 * time.Second)
			if kubetest.Admitted(workload(t, s, "a", "a1")) || kubetest.Admitted(workload(t, s, "b", "b1")) {
				t.Fatal("admitted while the cohort is full")
			}
			if err := s.Dynamic.Resource(workloadsGVR).Namespace("l").Delete(ctx, "l0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var first string
			kubetest.WaitFor(t, time.Minute, "one of a1 and b1 admitted", func() bool {
				for _, ns := range []string{"a", "b"} {
					if kubetest.Admitted(workload(t, s, ns, ns+"1")) {
						first = ns
						return true
					}
				}
				return false
			})
			time.Sleep(time.Second)
			if kubetest.Admitted(workload(t, s, "a", "a1")) && kubetest.Admitted(workload(t, s, "b", "b1")) {
				t.Fatal("both admitted on one free GPU")
			}
			want := map[bool]string{false: "a", true: "b"}[steered]
			t.Logf("%s: %s admitted first", name, first)
			if first != want {
				t.Fatalf("%s admitted %s's workload, want %s's", name, first, want)
			}
		})
	}
}

// TestReplayOnKueueCohort: the replay's cohort layout gives each team a
// ClusterQueue of its quota in one cohort: a's 4-GPU job borrows b's idle
// quota at once, b's job waits for it (nothing preempts), the ledger has
// each ClusterQueue's spend, and the controller weighs the ClusterQueues by
// it (a, which spent the cohort's money, 1/2; b, which spent none, the
// bound).
func TestReplayOnKueueCohort(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, cohortKueue)
	const speedup = 600 // a trace hour in 6 s
	jobs := []ReplayJob{
		{ID: "big", Team: "a", Submit: 0, Duration: time.Hour, Pods: 1, PerPod: 4},
		{ID: "small", Team: "b", Submit: 10 * time.Minute, Duration: 30 * time.Minute, Pods: 2, PerPod: 1},
	}
	store := embeddedtest.Open(t)
	outs, err := ReplayOnKueue(context.Background(), s.Config, jobs, ReplayOptions{Flavors: []ReplayFlavor{{Name: "h100", GPUs: 4, PriceMicrosPerGPUHour: 6_880_000}},
		Quotas: map[string]map[string]int{"a": {"h100": 2}, "b": {"h100": 2}}, NoFairSharing: true,
		Speedup: speedup, Steer: true, Store: store, HalfLife: time.Hour, WeightInterval: 10 * time.Minute, Epoch: testNow.Truncate(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 {
		t.Fatalf("%d outcomes, want 2: %+v", len(outs), outs)
	}
	for _, o := range outs {
		t.Logf("%s: admitted %s, finished %s", o.ID, o.Admitted.Round(time.Minute), o.Finished.Round(time.Minute))
	}
	if outs[0].ID != "big" {
		t.Errorf("first outcome %+v, want big", outs[0])
	}
	assertSerial(t, outs)
	rows, err := store.Query(context.Background(), ledger.Query{From: testNow.Truncate(time.Hour), To: testNow.Add(3 * time.Hour), Step: ledger.StepMonth,
		GroupBy: []ledger.Dimension{ledger.DimClusterQueue}, Cluster: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || rows[0].ClusterQueue != "a" || rows[0].GPUSeconds < 3.9*3600 {
		t.Errorf("the ledger by ClusterQueue: %+v; want a's 4 GPU-hours", rows)
	}
	for cq, want := range map[string]float64{"a": 0.5, "b": admission.MoneyWeightBound} {
		u, err := s.Dynamic.Resource(clusterQsGVR).Get(context.Background(), cq, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := ReadClusterQueue(u, map[string]int64{"h100": 6_880_000})
		if q.Cohort != "replay" || math.Abs(q.Weight-want) > 0.01 || math.Abs(q.Entitlement-2*6_880_000) > 1 {
			t.Errorf("ClusterQueue %s: %+v; want cohort replay, weight %g, 2 H100s of entitlement", cq, q, want)
		}
	}
}
