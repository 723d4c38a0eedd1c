package deploy_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gpuledger/gpuledger/admission/kube"
	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// logLines keeps what a logger wrote, for a test to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *logLines) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(strings.ToLower(s), sub) {
			out = append(out, s)
		}
	}
	return out
}

// checkControllerRBAC runs gpuledger's Kueue controller as the chart's
// ServiceAccount in namespace ns (the API server impersonating it, under
// the chart's ClusterRole and Role, already applied): enough, it answers
// the budget AdmissionCheck of a Job (watching Workloads, patching their
// status and the check's) and updates the LocalQueues' weights, with no
// request refused; least, the account can do nothing else that matters
// (delete or create workloads, read Secrets, create pods, edit quotas,
// take Leases outside its namespace).
func checkControllerRBAC(t *testing.T, s *kubetest.Stack, ns string) {
	t.Helper()
	ctx := context.Background()
	account := "system:serviceaccount:" + ns + ":gpuledger-controller"
	doc := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: budget}\nspec: {controllerName: gpuledger.io/budget}\n---\n" +
		kubetest.ClusterQueue("shared", "h100", 16, "  admissionChecksStrategy: {admissionChecks: [{name: budget}]}\n") + "---\n" +
		kubetest.Namespace("nlp", "q", "shared")
	if err := s.Apply(ctx, doc); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	store := embeddedtest.Open(t, ledger.Row{Key: ledger.Key{Hour: now.Add(-2 * time.Hour).Truncate(time.Hour), Cluster: "test", Team: "nlp",
		Namespace: "nlp", LocalQueue: "q", ClusterQueue: "shared", Flavor: "h100"}, GPUSeconds: 3600, CostMicros: 6_880_000})
	teams := kube.Teams{Cluster: "test", Currency: "USD", ByNamespace: map[string]string{"nlp": "nlp"}, ByClusterQueue: map[string]string{"shared": "nlp"},
		LimitMicros: map[string]int64{"nlp": 1_000_000_000}, PriceMicrosPerGPUHour: map[string]int64{"h100": 6_880_000}}
	imp := rest.CopyConfig(s.Config)
	imp.Impersonate = rest.ImpersonationConfig{UserName: account,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	logs := &logLines{}
	c, err := kube.New(imp, kube.Options{Teams: teams, Store: store, Interval: 2 * time.Second, RetryAfter: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the controller as %s: %v", account, err)
		}
	}()
	if err := s.Apply(ctx, kubetest.Job("nlp", "small", "q", 4, 3600)); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, 2*time.Minute, "the Job admitted through the budget check answered as the chart's ServiceAccount", func() bool {
		u, err := s.JobWorkload(ctx, "nlp", "small")
		return err == nil && u != nil && kubetest.Admitted(u)
	})
	// Two weight updates (Interval 2 s) after the admission.
	time.Sleep(5 * time.Second)
	if refused := logs.matching("forbidden"); len(refused) > 0 || c.Stats.Errors.Load() > 0 {
		t.Errorf("as %s the controller was refused %d time(s), %d error(s):\n%s", account, len(refused), c.Stats.Errors.Load(), strings.Join(refused, "\n"))
	}
	if c.Stats.ChecksReady.Load() == 0 {
		t.Errorf("as %s the controller answered no budget check", account)
	}

	for _, a := range []struct {
		verb, group, resource, sub, namespace string
		allowed                               bool
	}{
		{"patch", "kueue.x-k8s.io", "localqueues", "", "nlp", true},
		{"patch", "kueue.x-k8s.io", "workloads", "status", "nlp", true},
		{"create", "coordination.k8s.io", "leases", "", ns, true},
		{"update", "coordination.k8s.io", "leases", "", ns, true},
		{"delete", "kueue.x-k8s.io", "workloads", "", "nlp", false},
		{"create", "kueue.x-k8s.io", "workloads", "", "nlp", false},
		{"update", "kueue.x-k8s.io", "workloads", "", "nlp", false},
		{"patch", "kueue.x-k8s.io", "clusterqueues", "", "", false},
		{"patch", "kueue.x-k8s.io", "cohorts", "", "", false},
		{"delete", "kueue.x-k8s.io", "localqueues", "", "nlp", false},
		{"get", "", "secrets", "", ns, false},
		{"list", "", "secrets", "", "nlp", false},
		{"create", "", "pods", "", "nlp", false},
		{"create", "coordination.k8s.io", "leases", "", "kube-system", false},
		{"get", "", "configmaps", "", "kube-system", false},
	} {
		sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{User: account,
			Groups:             imp.Impersonate.Groups,
			ResourceAttributes: &authv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Namespace: a.namespace}}}
		got, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != a.allowed {
			t.Errorf("%s %s %s/%s in %q: allowed %v, want %v (%s)", account, a.verb, a.resource, a.sub, a.namespace, got.Status.Allowed, a.allowed, got.Status.Reason)
		}
	}
}
