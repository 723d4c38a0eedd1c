package kube

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// These tests run gpuledger's controller against a real kube-apiserver and
// an unmodified Kueue (internal/kubetest); they need the stack built by
// tools/build-k8s-stack.sh ($GPULEDGER_K8S_STACK).

var testNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// ledgerWith is an embedded ledger holding, for each team, one H100 hour
// this month (at testNow's month) that cost micros.
func ledgerWith(t *testing.T, spend map[string]int64) ledger.Store {
	t.Helper()
	var rows []ledger.Row
	for team, m := range spend {
		rows = append(rows, ledger.Row{Key: ledger.Key{Hour: testNow.Add(-2 * time.Hour).Truncate(time.Hour), Cluster: "test", Team: team,
			Namespace: team, LocalQueue: "q", ClusterQueue: "shared", Flavor: "h100"}, GPUSeconds: float64(m) / 6.88 * 3600 / 1e6, CostMicros: m})
	}
	return embeddedtest.Open(t, rows...)
}

func startController(t *testing.T, s *kubetest.Stack, o Options) (*Controller, context.CancelFunc) {
	t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return testNow }
	}
	o.Log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	c, err := New(s.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			stop()
		}
	})
	return c, stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func workload(t *testing.T, s *kubetest.Stack, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := s.Dynamic.Resource(workloadsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func checkState(u *unstructured.Unstructured, check string) (state, message string) {
	states, _, _ := unstructured.NestedSlice(u.Object, "status", "admissionChecks")
	for _, s := range states {
		m, _ := s.(map[string]any)
		if m["name"] == check {
			state, _ = m["state"].(string)
			message, _ = m["message"].(string)
		}
	}
	return state, message
}

// budgetCluster: a ClusterQueue of 16 H100s with the budget check, used by
// namespace nlp's LocalQueue q.
var budgetCluster = `apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec: {controllerName: gpuledger.io/budget}
---
` + kubetest.ClusterQueue("shared", "h100", 16, "  admissionChecksStrategy: {admissionChecks: [{name: budget}]}\n") + "---\n" + kubetest.Namespace("nlp", "q", "shared")

func withDuration(doc string, seconds int) string {
	return strings.Replace(doc, "  queueName:", fmt.Sprintf("  maximumExecutionTimeSeconds: %d\n  queueName:", seconds), 1)
}

// jobWorkload is the Workload of a Job, once Kueue has made it.
func jobWorkload(t *testing.T, s *kubetest.Stack, ns, job string) *unstructured.Unstructured {
	t.Helper()
	u, err := s.JobWorkload(context.Background(), ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if u == nil {
		return &unstructured.Unstructured{Object: map[string]any{}}
	}
	return u
}

// TestBudgetCheckHoldsOverLimit (scenario c): a Job that would take its
// team past the monthly limit is held by the gpuledger.io/budget
// AdmissionCheck with a message a person understands, one within it is
// admitted, and the held one is admitted once the limit is raised. Then
// the controller is stopped and a new one started (scenario d): it takes
// over the checks and answers the next Job.
func TestBudgetCheckHoldsOverLimit(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	if err := s.Apply(ctx, budgetCluster); err != nil {
		t.Fatal(err)
	}
	store := ledgerWith(t, map[string]int64{"nlp": 950_000_000})
	teams := Teams{Cluster: "test", Currency: "USD", ByNamespace: map[string]string{"nlp": "nlp"}, ByClusterQueue: map[string]string{"shared": "nlp"},
		LimitMicros: map[string]int64{"nlp": 1_000_000_000}, PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	c, stop := startController(t, s, Options{Teams: teams, Store: store, RetryAfter: 2 * time.Second, Interval: time.Hour})
	// 4 H100 for an hour: 27.52, within 1000 after 950.
	if err := s.Apply(ctx, kubetest.Job("nlp", "small", "q", 4, 3600)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "the small job admitted", func() bool { return kubetest.Admitted(jobWorkload(t, s, "nlp", "small")) })
	if st, msg := checkState(jobWorkload(t, s, "nlp", "small"), "budget"); st != "Ready" || !strings.Contains(msg, "within team nlp's monthly limit") {
		t.Errorf("small: %s %q", st, msg)
	}
	// 4 H100 for 2 h: 55.04: past the limit.
	if err := s.Apply(ctx, kubetest.Job("nlp", "large", "q", 4, 7200)); err != nil {
		t.Fatal(err)
	}
	var msg string
	kubetest.WaitFor(t, time.Minute, "the large job held", func() bool {
		st, m := checkState(jobWorkload(t, s, "nlp", "large"), "budget")
		if st == "Retry" || strings.Contains(m, "held") {
			msg = m
			return true
		}
		return false
	})
	for _, want := range []string{"team nlp has spent 950.00 USD", "55.04", "1000.00", "Raise the team's monthlyBudget"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the held job's message %q lacks %q", msg, want)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("the large job's workload status: %v", jobWorkload(t, s, "nlp", "large").Object["status"])
		}
	}()
	time.Sleep(5 * time.Second) // retries: still held
	if kubetest.Admitted(jobWorkload(t, s, "nlp", "large")) {
		t.Fatal("the job over the limit was admitted")
	}
	if c.Stats.ChecksHeld.Load() < 2 {
		t.Errorf("held %d times in 5 s with retries every 2 s", c.Stats.ChecksHeld.Load())
	}
	// The limit is raised: admitted at its next retry.
	teams.LimitMicros = map[string]int64{"nlp": 2_000_000_000}
	c.SetTeams(ctx, teams)
	kubetest.WaitFor(t, time.Minute, "the large job admitted after the raise", func() bool { return kubetest.Admitted(jobWorkload(t, s, "nlp", "large")) })

	// Scenario d: the controller goes away and a new one takes over.
	stop()
	if err := s.Apply(ctx, kubetest.Job("nlp", "later", "q", 4, 3600)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if kubetest.Admitted(jobWorkload(t, s, "nlp", "later")) {
		t.Fatal("admitted with nobody answering its budget check")
	}
	startController(t, s, Options{Teams: teams, Store: store, RetryAfter: 2 * time.Second, Interval: time.Hour})
	kubetest.WaitFor(t, time.Minute, "the job submitted while the controller was down admitted", func() bool {
		return kubetest.Admitted(jobWorkload(t, s, "nlp", "later"))
	})
}

// TestBudgetCheckFailsOpen: when the ledger cannot be read, the check lets
// the workload through and says why.
func TestBudgetCheckFailsOpen(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	if err := s.Apply(ctx, budgetCluster); err != nil {
		t.Fatal(err)
	}
	store := ledgerWith(t, nil)
	store.Close() // every read fails
	teams := Teams{Cluster: "test", ByNamespace: map[string]string{"nlp": "nlp"}, LimitMicros: map[string]int64{"nlp": 1},
		PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	c, _ := startController(t, s, Options{Teams: teams, Store: store, Interval: time.Hour})
	if err := s.Apply(ctx, kubetest.Workload("nlp", "w", "q", 1, 4, 0)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "admitted with the ledger down", func() bool { return kubetest.Admitted(workload(t, s, "nlp", "w")) })
	if _, msg := checkState(workload(t, s, "nlp", "w"), "budget"); !strings.Contains(msg, "budget not checked, let through") {
		t.Errorf("message %q", msg)
	}
	if c.Stats.ChecksFailedOpen.Load() != 1 {
		t.Errorf("failed open %d times, want 1", c.Stats.ChecksFailedOpen.Load())
	}
}

// TestGangNeverPartlyAdmitted (scenario e): a 4-pod gang with room for 3
// is never admitted in part: Kueue admits the whole Workload or none of it.
func TestGangNeverPartlyAdmitted(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	if err := s.Apply(ctx, kubetest.ClusterQueue("shared", "h100", 3, "")+"---\n"+kubetest.Namespace("nlp", "q", "shared")); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, kubetest.Workload("nlp", "gang", "q", 4, 1, 0)+"---\n"+kubetest.Workload("nlp", "three", "q", 3, 1, 0)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "the 3-pod workload admitted", func() bool { return kubetest.Admitted(workload(t, s, "nlp", "three")) })
	time.Sleep(2 * time.Second)
	g := workload(t, s, "nlp", "gang")
	if kubetest.Admitted(g) || kubetest.Condition(g, "QuotaReserved") {
		t.Fatalf("the 4-pod gang holds quota with room for 3: %v", g.Object["status"])
	}
	if _, ok, _ := unstructured.NestedMap(g.Object, "status", "admission"); ok {
		t.Fatalf("the gang has an admission: %v", g.Object["status"])
	}
}

// consumed reads Kueue's decayed usage of a LocalQueue from its status.
func consumed(t *testing.T, s *kubetest.Stack, ns string) float64 {
	u, err := s.Dynamic.Resource(localQueuesGVR).Namespace(ns).Get(context.Background(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return consumedUsage(u)
}

// afsKueue is Kueue with Admission Fair Sharing on a compressed clock.
var afsKueue = kubetest.Options{KueueConfig: "admissionFairSharing:\n  usageHalfLifeTime: 1h\n  usageSamplingInterval: 1s\n"}

// afsQueue is the admissionScope of a ClusterQueue ordered by Admission
// Fair Sharing.
const afsQueue = "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n"

// warmUp runs the workloads docs (namespace, name, YAML) together for 2 s
// and deletes them (Kueue releases their quota), so that Kueue has seen
// each LocalQueue use what they held.
func warmUp(t *testing.T, s *kubetest.Stack, docs ...[3]string) {
	t.Helper()
	ctx := context.Background()
	var all []string
	for _, d := range docs {
		all = append(all, d[2])
	}
	if err := s.Apply(ctx, strings.Join(all, "---\n")); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "the warm-up admitted", func() bool {
		for _, d := range docs {
			if !kubetest.Admitted(workload(t, s, d[0], d[1])) {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	for _, d := range docs {
		if err := s.Dynamic.Resource(workloadsGVR).Namespace(d[0]).Delete(ctx, d[1], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubetest.WaitFor(t, time.Minute, "the warm-up gone", func() bool {
		for _, d := range docs {
			if _, err := s.Dynamic.Resource(workloadsGVR).Namespace(d[0]).Get(ctx, d[1], metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})
}

// race creates two workloads (namespace, name, YAML) that wait together,
// the ClusterQueue shared on hold, first one then the other a second later
// (creation order alone would pick the first), and lifts the hold when
// there is room for one: it returns the namespace Kueue admitted first.
func race(t *testing.T, s *kubetest.Stack, first, second [3]string) string {
	t.Helper()
	ctx := context.Background()
	hold := func(policy string) {
		patch := []byte(`{"spec":{"stopPolicy":"` + policy + `"}}`)
		if _, err := s.Dynamic.Resource(clusterQsGVR).Patch(ctx, "shared", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hold("Hold")
	if err := s.Apply(ctx, first[2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds
	if err := s.Apply(ctx, second[2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if kubetest.Admitted(workload(t, s, first[0], first[1])) || kubetest.Admitted(workload(t, s, second[0], second[1])) {
		t.Fatal("admitted while the ClusterQueue is on hold")
	}
	hold("None")
	var winner string
	kubetest.WaitFor(t, time.Minute, "one of the two admitted", func() bool {
		for _, w := range [][3]string{first, second} {
			if kubetest.Admitted(workload(t, s, w[0], w[1])) {
				winner = w[0]
			}
		}
		return winner != ""
	})
	for _, w := range [][3]string{first, second} {
		t.Logf("%s/%s: %v", w[0], w[1], workload(t, s, w[0], w[1]).Object["status"])
	}
	return winner
}

// logQueues logs the LocalQueues q of namespaces when the test has failed.
func logQueues(t *testing.T, s *kubetest.Stack, namespaces ...string) {
	if !t.Failed() {
		return
	}
	for _, ns := range namespaces {
		if u, err := s.Dynamic.Resource(localQueuesGVR).Namespace(ns).Get(context.Background(), "q", metav1.GetOptions{}); err == nil {
			t.Logf("LocalQueue %s: spec %v status %v", ns, u.Object["spec"], u.Object["status"])
		}
	}
}

// steer starts a controller on the ledger store and has it write the
// weights once; it fails the test when it writes none.
func steer(t *testing.T, s *kubetest.Stack, store ledger.Store, teams Teams) *Controller {
	t.Helper()
	c, _ := startController(t, s, Options{Teams: teams, Store: store, Interval: time.Hour})
	if err := c.UpdateWeights(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.Stats.WeightChanges.Load() == 0 {
		t.Fatal("no weight written")
	}
	return c
}

// TestWeightsSteerAdmissionFairSharing (scenario a): teams a and b share a
// ClusterQueue with Admission Fair Sharing. Kueue has seen b use more GPU
// time, but the ledger says a spent far more money (say, on idle
// expensive GPUs). b's next workload is created before a's; when there is
// room for one, plain Kueue admits a's (its usage is lower: Admission Fair
// Sharing overrides creation order), and with gpuledger's weights Kueue
// admits b's (its team's spend per entitlement is lower).
func TestWeightsSteerAdmissionFairSharing(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	for _, steered := range []bool{false, true} {
		name := map[bool]string{false: "plain Kueue", true: "gpuledger weights"}[steered]
		t.Run(name, func(t *testing.T) {
			s := kubetest.Start(t, afsKueue)
			ctx := context.Background()
			doc := kubetest.ClusterQueue("shared", "h100", 4, afsQueue)
			for _, ns := range []string{"a", "b"} {
				doc += "---\n" + kubetest.Namespace(ns, "q", "shared")
			}
			if err := s.Apply(ctx, doc); err != nil {
				t.Fatal(err)
			}
			defer logQueues(t, s, "a", "b")
			// a runs 1 GPU, b 3 GPUs for as long.
			warmUp(t, s, [3]string{"a", "a0", kubetest.Workload("a", "a0", "q", 1, 1, 0)}, [3]string{"b", "b0", kubetest.Workload("b", "b0", "q", 1, 3, 0)})
			kubetest.WaitFor(t, time.Minute, "Kueue's usage: b above a", func() bool {
				ca, cb := consumed(t, s, "a"), consumed(t, s, "b")
				return ca > 0 && cb > 1.5*ca
			})
			var c *Controller
			var store ledger.Store
			if steered {
				store = ledgerWith(t, map[string]int64{"a": 900_000_000, "b": 100_000_000})
				c = steer(t, s, store, Teams{Cluster: "test", ByNamespace: map[string]string{"a": "a", "b": "b"}, ByClusterQueue: map[string]string{"shared": ""}})
				evs, err := s.Client.CoreV1().Events("b").List(ctx, metav1.ListOptions{FieldSelector: "reason=FairSharingWeight"})
				if err != nil || len(evs.Items) == 0 {
					t.Fatalf("no FairSharingWeight Event on b's LocalQueue: %v %v", err, evs)
				}
				t.Logf("weights set; event: %s", evs.Items[0].Message)
				var m strings.Builder
				if err := c.WriteMetrics(&m); err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{`gpuledger_controller_weight_changes_total{namespace="b",localqueue="q",team="b"} 1`,
					`gpuledger_controller_localqueue_weight{namespace="a",localqueue="q",team="a"} `} {
					if !strings.Contains(m.String(), want) {
						t.Errorf("metrics lack %q:\n%s", want, m.String())
					}
				}
			}
			first := race(t, s, [3]string{"b", "b1", kubetest.Workload("b", "b1", "q", 1, 4, 0)}, [3]string{"a", "a1", kubetest.Workload("a", "a1", "q", 1, 4, 0)})
			want := map[bool]string{false: "a", true: "b"}[steered]
			t.Logf("%s: consumed a %.4g, b %.4g; %s admitted first", name, consumed(t, s, "a"), consumed(t, s, "b"), first)
			if first != want {
				t.Fatalf("%s admitted %s's workload first, want %s's", name, first, want)
			}
			if !steered {
				return
			}
			// The controller records the Workloads' times at its next
			// interval: the race's two, 4 GPUs each from queue q, the
			// first admitted.
			if err := c.UpdateWeights(ctx); err != nil {
				t.Fatal(err)
			}
			times, err := store.WorkloadTimes(ctx, "test", time.Time{}, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]ledger.WorkloadTime{}
			for _, w := range times {
				got[w.Namespace+"/"+w.Name] = w
			}
			for _, key := range []string{"a/a1", "b/b1"} {
				if w, ok := got[key]; !ok || w.Count != 4 || w.LocalQueue != "q" || w.Resource != "nvidia.com/gpu" {
					t.Errorf("workload time of %s: %+v (found %v); want 4 nvidia.com/gpu from queue q", key, w, ok)
				}
			}
			if w := got[first+"/"+first+"1"]; w.Admit.IsZero() || w.Admit.Before(w.Submit) {
				t.Errorf("the first admitted, %s, has no admission time: %+v", first, w)
			}
		})
	}
}

// twoFlavors is the YAML of ResourceFlavors a and b (nodes labelled
// gpu=<flavor>) and of ClusterQueue shared with gpus of each, a first;
// spec adds lines to its spec (indented by two spaces).
func twoFlavors(a, b string, gpus int, spec string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
spec: {nodeLabels: {gpu: %[1]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[2]s}
spec: {nodeLabels: {gpu: %[2]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
%[4]s  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: %[1]s
      resources: [{name: nvidia.com/gpu, nominalQuota: %[3]d}]
    - name: %[2]s
      resources: [{name: nvidia.com/gpu, nominalQuota: %[3]d}]
`, a, b, gpus, spec)
}

// pinned is a workload of gpus GPUs on the nodes of one GPU type (label
// gpu=<flavor>), which Kueue assigns to the ResourceFlavor of those nodes.
func pinned(ns, name string, gpus int, flavor string) [3]string {
	doc := strings.Replace(kubetest.Workload(ns, name, "q", 1, gpus, 0), "restartPolicy: Never", "restartPolicy: Never\n        nodeSelector: {gpu: "+flavor+"}", 1)
	return [3]string{ns, name, doc}
}

// TestWeightsPriceFlavors (scenario b): flavors at different prices. Teams
// h and t share a ClusterQueue of 4 H100s and 4 T4s; each ran 4 GPUs for
// the same time, h on H100s and t on T4s, so Kueue, which weighs a GPU the
// same on every flavor, sees the same usage. The ledger prices h's hours
// at 6.88 and t's at 0.526. Both then want the same 4 H100s, h's created
// first: with gpuledger's weights the team burning H100s yields to the team
// on T4s.
func TestWeightsPriceFlavors(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, afsKueue)
	ctx := context.Background()
	doc := twoFlavors("h100", "t4", 4, afsQueue)
	for _, ns := range []string{"h", "t"} {
		doc += "---\n" + kubetest.Namespace(ns, "q", "shared")
	}
	if err := s.Apply(ctx, doc); err != nil {
		t.Fatal(err)
	}
	defer logQueues(t, s, "h", "t")
	warmUp(t, s, pinned("h", "h0", 4, "h100"), pinned("t", "t0", 4, "t4"))
	var ch, ct float64
	kubetest.WaitFor(t, time.Minute, "Kueue's usage of both", func() bool {
		ch, ct = consumed(t, s, "h"), consumed(t, s, "t")
		return ch > 0 && ct > 0
	})
	if r := ch / ct; r < 0.7 || r > 1.4 {
		t.Fatalf("Kueue's usage h %.4g, t %.4g: the warm-up should give them the same", ch, ct)
	}
	// The ledger: 4 GPU-hours each, at the flavors' prices.
	hour := testNow.Add(-2 * time.Hour).Truncate(time.Hour)
	row := func(team, flavor string, price int64) ledger.Row {
		return ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "test", Team: team, Namespace: team, LocalQueue: "q", ClusterQueue: "shared", Flavor: flavor},
			GPUSeconds: 4 * 3600, CostMicros: 4 * price}
	}
	store := embeddedtest.Open(t, row("h", "h100", 6_880_000), row("t", "t4", 526_000))
	c := steer(t, s, store, Teams{Cluster: "test", ByNamespace: map[string]string{"h": "h", "t": "t"}, ByClusterQueue: map[string]string{"shared": ""}})
	var m strings.Builder
	c.WriteMetrics(&m)
	t.Logf("metrics:\n%s", m.String())
	first := race(t, s, pinned("h", "h1", 4, "h100"), pinned("t", "t1", 4, "h100"))
	t.Logf("consumed h %.4g, t %.4g; %s admitted first", consumed(t, s, "h"), consumed(t, s, "t"), first)
	if first != "t" {
		t.Fatalf("the H100 team's workload was admitted before the T4 team's with the same GPU-seconds")
	}
}

// TestReplayOnKueue: a replay on the real Kueue admits each workload when
// quota frees, marks it Finished after its duration (which releases the
// quota), and reports what happened on the trace's clock: three jobs of
// the whole ClusterQueue run one after another.
func TestReplayOnKueue(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{KueueConfig: "admissionFairSharing:\n  usageHalfLifeTime: 10s\n  usageSamplingInterval: 1s\n"})
	const speedup = 600 // a trace hour in 6 s
	jobs := []ReplayJob{
		{ID: "first", Team: "a", Submit: 0, Duration: time.Hour, Pods: 1, PerPod: 4},
		{ID: "second", Team: "b", Submit: 10 * time.Minute, Duration: time.Hour, Pods: 2, PerPod: 2},
		{ID: "third", Team: "a", Submit: 20 * time.Minute, Duration: 30 * time.Minute, Pods: 4, PerPod: 1},
	}
	store := embeddedtest.Open(t)
	var mu sync.Mutex
	var hours []int
	outs, err := ReplayOnKueue(context.Background(), s.Config, jobs, ReplayOptions{Flavors: []ReplayFlavor{{Name: "h100", GPUs: 4, PriceMicrosPerGPUHour: 6_880_000}},
		Speedup: speedup, Steer: true, Store: store, HalfLife: time.Hour, WeightInterval: 10 * time.Minute, Epoch: testNow.Truncate(time.Hour),
		Hourly: func(_ context.Context, h int) { mu.Lock(); hours = append(hours, h); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	// The replay ends with the third job, at 2.5 trace hours: Hourly was
	// told of the first two.
	mu.Lock()
	if !slices.Equal(hours, []int{1, 2}) {
		t.Errorf("Hourly was called with hours %v, want [1 2]", hours)
	}
	mu.Unlock()
	if len(outs) != 3 {
		t.Fatalf("%d outcomes, want 3: %+v", len(outs), outs)
	}
	// Each job takes the whole ClusterQueue, so they run one after another
	// in submission order, each no earlier than the last one finished and
	// for at least its duration. How long Kueue takes to admit after the
	// quota frees depends on the machine's load and is only logged.
	want := []time.Duration{0, time.Hour, 2 * time.Hour}
	for i, o := range outs {
		t.Logf("%s: admitted %s, finished %s on %s", o.ID, o.Admitted.Round(time.Minute), o.Finished.Round(time.Minute), o.Flavor)
		if o.ID != jobs[i].ID || o.Flavor != "h100" || o.GPUs != 4 {
			t.Errorf("outcome %d: %+v", i, o)
		}
		if o.Admitted < want[i] {
			t.Errorf("%s admitted at %s, want no earlier than %s", o.ID, o.Admitted, want[i])
		}
		if d := o.Finished - o.Admitted; d < jobs[i].Duration {
			t.Errorf("%s ran %s, want %s", o.ID, d, jobs[i].Duration)
		}
	}
	assertSerial(t, outs)
	// The ledger has the trace hours the jobs held the GPUs.
	rows, err := store.Query(context.Background(), ledger.Query{From: testNow.Truncate(time.Hour), To: testNow.Add(3 * time.Hour), Step: ledger.StepMonth,
		GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	var gpuHours float64
	for _, r := range rows {
		gpuHours += r.GPUSeconds / 3600
	}
	// 4 GPUs for 2 h of the first two hours is written; the third's hour
	// ends after the replay.
	if gpuHours < 7 || gpuHours > 8.01 {
		t.Errorf("the ledger holds %.2f GPU-hours of the first two trace hours, want about 8: %+v", gpuHours, rows)
	}
}

// TestReplayMaxPending: with MaxPending 1 a team's next Workload is
// created only when its last one is admitted, so Kueue orders it by that
// time: team a submits three jobs that each take the cluster for an hour
// at 0, team b one at 10 minutes. Without the bound Kueue's FIFO runs a's
// three first and b's at 3 h; with it a's third is created at 1 h, after
// b's, and b's runs at 2 h.
func TestReplayMaxPending(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	jobs := []ReplayJob{
		{ID: "a1", Team: "a", Submit: 0, Duration: time.Hour, Pods: 1, PerPod: 2},
		{ID: "a2", Team: "a", Submit: 0, Duration: time.Hour, Pods: 1, PerPod: 2},
		{ID: "a3", Team: "a", Submit: 0, Duration: time.Hour, Pods: 1, PerPod: 2},
		{ID: "b1", Team: "b", Submit: 10 * time.Minute, Duration: time.Hour, Pods: 1, PerPod: 2},
	}
	outs, err := ReplayOnKueue(context.Background(), s.Config, jobs, ReplayOptions{Flavors: []ReplayFlavor{{Name: "h100", GPUs: 2, PriceMicrosPerGPUHour: 6_880_000}},
		Speedup: 600, NoFairSharing: true, MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[string]time.Duration{}
	for _, o := range outs {
		admitted[o.ID] = o.Admitted
		t.Logf("%s: submitted %s, admitted %s", o.ID, o.Submit, o.Admitted.Round(time.Minute))
		if o.Submit != jobs[slices.IndexFunc(jobs, func(j ReplayJob) bool { return j.ID == o.ID })].Submit {
			t.Errorf("%s: submission %s, want the trace's", o.ID, o.Submit)
		}
	}
	if len(admitted) != 4 {
		t.Fatalf("%d admitted, want 4: %+v", len(admitted), outs)
	}
	if admitted["b1"] >= admitted["a3"] {
		t.Errorf("b1 admitted at %s, a3 at %s: want b1 first (a3's Workload is created after b1's)", admitted["b1"], admitted["a3"])
	}
	// Each job takes the cluster, so they run one at a time, a1 first. Whether
	// a2 or b1 comes second depends on whether Kueue admitted a1, and so let
	// a2 be created, within b1's first real second; how long Kueue takes to
	// admit after the quota frees is only logged.
	slices.SortFunc(outs, func(x, y ReplayOutcome) int { return cmp.Compare(x.Admitted, y.Admitted) })
	if outs[0].ID != "a1" {
		t.Errorf("%s admitted first, want a1", outs[0].ID)
	}
	assertSerial(t, outs)
}

// assertSerial fails the test unless the outcomes, jobs that each took the
// whole ClusterQueue, were admitted in the order given, each no earlier than
// the one before it finished; it logs how long Kueue took after that.
func assertSerial(t *testing.T, outs []ReplayOutcome) {
	t.Helper()
	for i := 1; i < len(outs); i++ {
		prev, o := outs[i-1], outs[i]
		if prev.Finished == 0 || o.Admitted < prev.Finished {
			t.Errorf("%s admitted at %s, before %s finished (%s): want one job at a time, in the order %s then %s",
				o.ID, o.Admitted.Round(time.Minute), prev.ID, prev.Finished.Round(time.Minute), prev.ID, o.ID)
			continue
		}
		t.Logf("%s admitted %s of trace time after %s finished", o.ID, (o.Admitted - prev.Finished).Round(time.Second), prev.ID)
	}
}

// TestLeaderElection: of two replicas one acts; when it stops, the other
// takes the Lease and answers the budget checks.
func TestLeaderElection(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	if err := s.Apply(ctx, budgetCluster); err != nil {
		t.Fatal(err)
	}
	store := ledgerWith(t, map[string]int64{"nlp": 1_000_000})
	teams := Teams{Cluster: "test", ByNamespace: map[string]string{"nlp": "nlp"}, LimitMicros: map[string]int64{"nlp": 1_000_000_000},
		PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	type replica struct {
		c      *Controller
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(id string) *replica {
		c, err := New(s.Config, Options{Teams: teams, Store: store, Interval: time.Hour, Now: func() time.Time { return testNow },
			Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		r := &replica{c: c, cancel: cancel, done: make(chan struct{})}
		go func() {
			if err := RunElected(rctx, c, "kube-system", "gpuledger-controller", id); err != nil {
				t.Errorf("replica %s: %v", id, err)
			}
			close(r.done)
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	replicas := map[string]*replica{"one": start("one"), "two": start("two")}
	holder := func() string {
		l, err := s.Client.CoordinationV1().Leases("kube-system").Get(ctx, "gpuledger-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader string
	kubetest.WaitFor(t, time.Minute, "a leader", func() bool { leader = holder(); return leader != "" })
	if err := s.Apply(ctx, kubetest.Workload("nlp", "w1", "q", 1, 4, 0)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "w1 admitted", func() bool { return kubetest.Admitted(workload(t, s, "nlp", "w1")) })
	other := map[string]string{"one": "two", "two": "one"}[leader]
	if n := replicas[other].c.Stats.ChecksReady.Load(); n != 0 {
		t.Errorf("the replica that does not lead answered %d checks", n)
	}
	replicas[leader].cancel()
	<-replicas[leader].done
	kubetest.WaitFor(t, time.Minute, "the other replica leading", func() bool { return holder() == other })
	if err := s.Apply(ctx, kubetest.Workload("nlp", "w2", "q", 1, 4, 0)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "w2 admitted by the new leader", func() bool { return kubetest.Admitted(workload(t, s, "nlp", "w2")) })
	if n := replicas[other].c.Stats.ChecksReady.Load(); n == 0 {
		t.Errorf("the new leader answered no check")
	}
}

// TestFlavorTargetsOnKueue: the flavor targets on the real Kueue. Teams
// research (any GPU) and vision (A100 only, by node selector) share a
// ClusterQueue of 2 H100s (6/GPU-hour) and 2 A100s (2/GPU-hour) with the
// check: the money-fair split gives research the H100s and vision the
// A100s. research's first workload takes both H100s; vision runs one A100
// and waits with a second of 2 GPUs. research's next workload, which
// Kueue puts on the free A100, is held, with a message naming vision, and
// research's LocalQueue is demoted (weight 0.001); once vision no longer
// waits (its second workload is deleted) the retry admits it and the
// weight is given back.
func TestFlavorTargetsOnKueue(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	doc := `apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec: {controllerName: gpuledger.io/budget}
---
` + twoFlavors("h100", "a100", 2, "  admissionChecksStrategy: {admissionChecks: [{name: budget}]}\n")
	for _, ns := range []string{"research", "vision"} {
		doc += "---\n" + kubetest.Namespace(ns, "q", "shared")
	}
	if err := s.Apply(ctx, doc); err != nil {
		t.Fatal(err)
	}
	c, _ := startController(t, s, Options{Store: ledgerWith(t, nil), FlavorTargets: true, TargetRetryAfter: time.Second, Interval: time.Hour,
		Teams: Teams{Cluster: "test", ByNamespace: map[string]string{"research": "research", "vision": "vision"},
			PriceMicrosPerGPUHour: map[string]int64{"h100": 6_000_000, "a100": 2_000_000}}})
	admitted := func(ns, name string) func() bool {
		return func() bool { return kubetest.Admitted(workload(t, s, ns, name)) }
	}
	apply := func(doc string) {
		t.Helper()
		if err := s.Apply(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	apply(kubetest.Workload("research", "r1", "q", 1, 2, 0))
	kubetest.WaitFor(t, time.Minute, "research's first workload admitted", admitted("research", "r1"))
	if f := admittedFlavor(workload(t, s, "research", "r1"), gpuResource); f != "h100" {
		t.Fatalf("research's first workload on %q, want the first flavor, h100", f)
	}
	apply(pinned("vision", "v0", 1, "a100")[2])
	kubetest.WaitFor(t, time.Minute, "vision's first workload admitted", admitted("vision", "v0"))
	apply(pinned("vision", "v1", 2, "a100")[2]) // 1 A100 free: waits
	// A Job, so that Kueue's job integration releases the held
	// workload's quota and requeues it, as in a cluster.
	apply(kubetest.Job("research", "r2", "q", 1, 3600))
	kubetest.WaitFor(t, time.Minute, "research's second workload held", func() bool { return c.Stats.ChecksHeld.Load() > 0 })
	r2 := jobWorkload(t, s, "research", "r2")
	_, msg := checkState(r2, "budget")
	t.Logf("r2's check: %s", msg)
	if !strings.Contains(msg, "team vision") && !strings.Contains(msg, "Previously: Retry") {
		t.Errorf("r2's check message %q: want the hold naming team vision, or Kueue's reset after it", msg)
	}
	if kubetest.Admitted(workload(t, s, "vision", "v1")) {
		t.Fatal("vision's 2-GPU workload admitted with 1 A100 free")
	}
	// research's next workload would land on the free A100 and be held
	// again: its LocalQueue goes last in Admission Fair Sharing's order.
	lqWeight := func(ns string) func() bool {
		return func() bool {
			u, err := s.Dynamic.Resource(localQueuesGVR).Namespace(ns).Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight")
			return w != nil && quantity(w) == demotedWeight
		}
	}
	kubetest.WaitFor(t, time.Minute, "research's LocalQueue demoted", lqWeight("research"))
	if lqWeight("vision")() {
		t.Error("vision, under its share, demoted")
	}
	if err := s.Dynamic.Resource(workloadsGVR).Namespace("vision").Delete(ctx, "v1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, time.Minute, "research's second workload admitted once vision waits for nothing", admitted("research", r2.GetName()))
	if f := admittedFlavor(workload(t, s, "research", r2.GetName()), gpuResource); f != "a100" {
		t.Errorf("research's second workload on %q, want a100", f)
	}
	kubetest.WaitFor(t, time.Minute, "research's LocalQueue weight given back", func() bool { return !lqWeight("research")() })
}
