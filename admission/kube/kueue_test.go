package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// These tests run gpuledger's controller against a real kube-apiserver and
// an unmodified Kueue (internal/kubetest); they need the stack built by
// tools/build-k8s-stack.sh ($GPULEDGER_K8S_STACK).

var testNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// ledgerWith is an embedded ledger holding, for each team, one hour this
// month (at testNow's month) that cost micros.
func ledgerWith(t *testing.T, spend map[string]int64) ledger.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var rows []ledger.Row
	for team, m := range spend {
		rows = append(rows, ledger.Row{Key: ledger.Key{Hour: testNow.Add(-2 * time.Hour).Truncate(time.Hour), Cluster: "test", Team: team,
			Namespace: team, LocalQueue: "q", ClusterQueue: "shared", Flavor: "h100"}, GPUSeconds: float64(m) / 6.88 * 3600 / 1e6, CostMicros: m,
			IdleCostMicros: 0})
	}
	if err := s.WriteHours(context.Background(), rows, nil); err != nil {
		t.Fatal(err)
	}
	return s
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

// TestWeightsSteerAdmissionFairSharing (scenario a): teams a and b share a
// ClusterQueue with Admission Fair Sharing. Kueue has seen b use more GPU
// time, but the ledger says a spent far more money (say, on idle
// expensive GPUs). b's next workload is created before a's; when there is
// room for one, plain Kueue admits a's (its usage is lower: Admission Fair
// Sharing overrides creation order), and with gpuledger's weights Kueue
// admits b's (its team's spend per entitlement is lower).
func TestWeightsSteerAdmissionFairSharing(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	for _, steer := range []bool{false, true} {
		name := map[bool]string{false: "plain Kueue", true: "gpuledger weights"}[steer]
		t.Run(name, func(t *testing.T) {
			s := kubetest.Start(t, kubetest.Options{KueueConfig: "admissionFairSharing:\n  usageHalfLifeTime: 1h\n  usageSamplingInterval: 1s\n"})
			ctx := context.Background()
			doc := kubetest.ClusterQueue("shared", "h100", 4, "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n")
			for _, ns := range []string{"a", "b"} {
				doc += "---\n" + kubetest.Namespace(ns, "q", "shared")
			}
			if err := s.Apply(ctx, doc); err != nil {
				t.Fatal(err)
			}
			// Warm-up: a runs 1 GPU briefly, b runs 3 GPUs three times as long.
			if err := s.Apply(ctx, kubetest.Workload("a", "a0", "q", 1, 1, 0)+"---\n"+kubetest.Workload("b", "b0", "q", 1, 3, 0)); err != nil {
				t.Fatal(err)
			}
			kubetest.WaitFor(t, time.Minute, "the warm-up admitted", func() bool {
				return kubetest.Admitted(workload(t, s, "a", "a0")) && kubetest.Admitted(workload(t, s, "b", "b0"))
			})
			// They end (deleted: Kueue releases their quota).
			time.Sleep(2 * time.Second)
			for _, w := range [][2]string{{"a", "a0"}, {"b", "b0"}} {
				if err := s.Dynamic.Resource(workloadsGVR).Namespace(w[0]).Delete(ctx, w[1], metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			kubetest.WaitFor(t, time.Minute, "the warm-up gone", func() bool {
				for _, w := range [][2]string{{"a", "a0"}, {"b", "b0"}} {
					if _, err := s.Dynamic.Resource(workloadsGVR).Namespace(w[0]).Get(ctx, w[1], metav1.GetOptions{}); err == nil {
						return false
					}
				}
				return true
			})
			defer func() {
				if t.Failed() {
					for _, ns := range []string{"a", "b"} {
						u, _ := s.Dynamic.Resource(localQueuesGVR).Namespace(ns).Get(ctx, "q", metav1.GetOptions{})
						t.Logf("LocalQueue %s: %v", ns, u.Object["status"])
					}
				}
			}()
			kubetest.WaitFor(t, time.Minute, "Kueue's usage: b above a", func() bool {
				ca, cb := consumed(t, s, "a"), consumed(t, s, "b")
				return ca > 0 && cb > 1.5*ca
			})
			if steer {
				store := ledgerWith(t, map[string]int64{"a": 900_000_000, "b": 100_000_000})
				teams := Teams{Cluster: "test", ByNamespace: map[string]string{"a": "a", "b": "b"}, ByClusterQueue: map[string]string{"shared": ""}}
				c, _ := startController(t, s, Options{Teams: teams, Store: store, Interval: time.Hour})
				if err := c.UpdateWeights(ctx); err != nil {
					t.Fatal(err)
				}
				if c.Stats.WeightChanges.Load() == 0 {
					t.Fatal("no weight written")
				}
				evs, err := s.Client.CoreV1().Events("b").List(ctx, metav1.ListOptions{FieldSelector: "reason=FairSharingWeight"})
				if err != nil || len(evs.Items) == 0 {
					t.Fatalf("no FairSharingWeight Event on b's LocalQueue: %v %v", err, evs)
				}
				t.Logf("weights set; event: %s", evs.Items[0].Message)
				for _, ns := range []string{"a", "b"} {
					u, _ := s.Dynamic.Resource(localQueuesGVR).Namespace(ns).Get(ctx, "q", metav1.GetOptions{})
					t.Logf("LocalQueue %s spec: %v", ns, u.Object["spec"])
				}
			}
			// Their next workloads wait together (the ClusterQueue on
			// hold), then there is room for one: Kueue picks by its order.
			hold := func(policy string) {
				patch := []byte(`{"spec":{"stopPolicy":"` + policy + `"}}`)
				if _, err := s.Dynamic.Resource(clusterQsGVR).Patch(ctx, "shared", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			hold("Hold")
			// b's first: creation order (FIFO) alone would pick b's.
			if err := s.Apply(ctx, kubetest.Workload("b", "b1", "q", 1, 4, 0)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond) // creation times are in seconds
			if err := s.Apply(ctx, kubetest.Workload("a", "a1", "q", 1, 4, 0)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			if kubetest.Admitted(workload(t, s, "a", "a1")) || kubetest.Admitted(workload(t, s, "b", "b1")) {
				t.Fatal("admitted while the ClusterQueue is on hold")
			}
			hold("None")
			var first string
			kubetest.WaitFor(t, time.Minute, "a's or b's workload admitted", func() bool {
				switch {
				case kubetest.Admitted(workload(t, s, "a", "a1")):
					first = "a"
				case kubetest.Admitted(workload(t, s, "b", "b1")):
					first = "b"
				}
				return first != ""
			})
			for _, w := range [][2]string{{"a", "a1"}, {"b", "b1"}} {
				t.Logf("%s: %v", w[1], workload(t, s, w[0], w[1]).Object["status"])
			}
			want := map[bool]string{false: "a", true: "b"}[steer]
			t.Logf("%s: consumed a %.4g, b %.4g; %s admitted first", name, consumed(t, s, "a"), consumed(t, s, "b"), first)
			if first != want {
				t.Fatalf("%s admitted %s's workload first, want %s's", name, first, want)
			}
		})
	}
}
