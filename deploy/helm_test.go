// Package deploy_test checks the Helm chart for real: helm lint and helm
// template (helm built from the Go module proxy by tools/build-helm.sh,
// $GPULEDGER_HELM) with each values file under deploy/helm/gpuledger/ci,
// and the rendered manifests applied server-side to a real kube-apiserver
// with Kueue (internal/kubetest).
package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const chart = "helm/gpuledger"

func helmBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(os.Getenv("GPULEDGER_HELM"), "helm")
	if _, err := os.Stat(bin); os.Getenv("GPULEDGER_HELM") == "" || err != nil {
		testenv.Missing(t, "helm is not built (GPULEDGER_HELM %q); run tools/build-helm.sh and set GPULEDGER_HELM to the folder it prints", os.Getenv("GPULEDGER_HELM"))
	}
	return bin
}

// helm runs helm with its state in a temporary home.
func helm(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// monitoringCRDs stand in for the Prometheus and VictoriaMetrics operators'
// CRDs: the API server accepts a ServiceMonitor and a VMServiceScrape.
const monitoringCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: vmservicescrapes.operator.victoriametrics.com}
spec:
  group: operator.victoriametrics.com
  names: {kind: VMServiceScrape, plural: vmservicescrapes, singular: vmservicescrape, listKind: VMServiceScrapeList}
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestHelmChart lints and renders the chart with every values file under
// ci/, checks that the rendered configuration is a valid gpuledger
// configuration, applies the manifests server-side to a real API server
// (which must accept every object), and checks that bad values fail with a
// message a person can act on.
func TestHelmChart(t *testing.T) {
	testenv.Slow(t, "helm and a Kubernetes control plane")
	bin := helmBinary(t)
	values, err := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if err != nil || len(values) < 2 {
		t.Fatalf("values files: %v %v", values, err)
	}
	s := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	if err := s.ServerSideApply(ctx, monitoringCRDs, ""); err != nil {
		t.Fatal(err)
	}
	// A CRD is served some time after it is created: the chart's
	// ServiceMonitor and VMServiceScrape map only once discovery lists them.
	kubetest.WaitFor(t, time.Minute, "the monitoring CRDs served", func() bool {
		for gv, kind := range map[string]string{"monitoring.coreos.com/v1": "ServiceMonitor", "operator.victoriametrics.com/v1beta1": "VMServiceScrape"} {
			list, err := s.Client.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Kind == kind }) {
				return false
			}
		}
		return true
	})
	for _, v := range values {
		t.Run(filepath.Base(v), func(t *testing.T) {
			if out, err := helm(t, bin, "lint", chart, "--strict", "-f", v); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			ns := strings.TrimSuffix(filepath.Base(v), "-values.yaml")
			out, err := helm(t, bin, "template", "gpuledger", chart, "-f", v, "--namespace", ns)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			// The ConfigMap's cluster.yaml loads as gpuledger would load it.
			cfgFile := filepath.Join(t.TempDir(), "cluster.yaml")
			if err := os.WriteFile(cfgFile, []byte(configMapData(t, out)), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := config.Load(cfgFile); err != nil {
				t.Errorf("the chart's configuration does not load: %v", err)
			}
			if err := s.Apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"); err != nil {
				t.Fatal(err)
			}
			if err := s.ServerSideApply(ctx, out, ns); err != nil {
				t.Fatalf("the API server refused the chart: %v", err)
			}
			sts, err := s.Client.AppsV1().StatefulSets(ns).Get(ctx, "gpuledger", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int32{"clickhouse-controller": 2}[ns]; want > 0 && (sts.Spec.Replicas == nil || *sts.Spec.Replicas != want) {
				t.Errorf("serve's replicas: %v, want %d", sts.Spec.Replicas, want)
			}
			c := sts.Spec.Template.Spec.Containers[0]
			if sc := sts.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.ReadinessProbe == nil {
				t.Errorf("serve: non-root %v, readiness probe %v", sc, c.ReadinessProbe)
			}
			// Liveness does not restart serve on a failing ledger (/livez),
			// a start may replay the log (startupProbe), the StatefulSet's
			// Service is headless.
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez" || c.StartupProbe == nil || c.StartupProbe.HTTPGet.Path != "/livez" ||
				c.ReadinessProbe.HTTPGet.Path != "/healthz" {
				t.Errorf("serve's probes: liveness %v, startup %v, readiness %v", c.LivenessProbe, c.StartupProbe, c.ReadinessProbe)
			}
			headless, err := s.Client.CoreV1().Services(ns).Get(ctx, sts.Spec.ServiceName, metav1.GetOptions{})
			if err != nil || headless.Spec.ClusterIP != "None" {
				t.Errorf("the StatefulSet's Service %s: %v, clusterIP %v", sts.Spec.ServiceName, err, headless)
			}
			if ns == "clickhouse-controller" {
				pod := sts.Spec.Template.Spec
				if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred" {
					t.Errorf("imagePullSecrets: %v", pod.ImagePullSecrets)
				}
				if c.StartupProbe.HTTPGet.Scheme != "HTTPS" || !slices.Contains(c.Args, "-http.tlsCertFile=/etc/gpuledger/tls/tls.crt") {
					t.Errorf("serve.tls: probe scheme %s, args %v", c.StartupProbe.HTTPGet.Scheme, c.Args)
				}
				var mounts []string
				for _, m := range c.VolumeMounts {
					mounts = append(mounts, m.Name+":"+m.MountPath)
				}
				for _, want := range []string{"tls:/etc/gpuledger/tls", "corp-ca:/etc/ssl/corp"} {
					if !slices.Contains(mounts, want) {
						t.Errorf("serve's mounts %v lack %s", mounts, want)
					}
				}
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TZ" }) {
					t.Errorf("serve.extraEnv: %v", c.Env)
				}
				ing, err := s.Client.NetworkingV1().Ingresses(ns).Get(ctx, "gpuledger", metav1.GetOptions{})
				if err != nil || len(ing.Spec.TLS) != 1 || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "http" {
					t.Errorf("Ingress: %v %+v", err, ing)
				}
				np, err := s.Client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "gpuledger", metav1.GetOptions{})
				if err != nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 {
					t.Errorf("NetworkPolicy: %v %+v", err, np)
				}
				pdb, err := s.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "gpuledger-controller", metav1.GetOptions{})
				if err != nil || pdb.Spec.MinAvailable.IntValue() != 1 {
					t.Errorf("PodDisruptionBudget: %v %+v", err, pdb)
				}
			}
			t.Logf("%s: serve args %v", ns, c.Args)
		})
	}
	// The controller runs under the chart's own RBAC.
	t.Run("controller RBAC", func(t *testing.T) { checkControllerRBAC(t, s, "clickhouse-controller") })
	// A token taken out of the chart's Secret rolls serve's pods: the
	// pod template's checksum of the tokens changes (serve also reads the
	// file again, but the kubelet takes a while to update the mount).
	embedded := filepath.Join(chart, "ci", "embedded-values.yaml")
	tokensSum := func(args ...string) string {
		t.Helper()
		out, err := helm(t, bin, append([]string{"template", "gpuledger", chart, "-f", embedded}, args...)...)
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", args, err, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "checksum/tokens:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("helm template %v: no checksum/tokens annotation", args)
		return ""
	}
	if a, b := tokensSum(), tokensSum("--set-json", `auth.tokens=[{"name":"vmagent","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","scopes":["write"]}]`); a == b {
		t.Errorf("a token taken out of auth.tokens leaves the pod template's checksum/tokens at %s: the pods would not roll", a)
	}
	// controller.clusterQueueWeights passes the flag and grants patch on
	// ClusterQueues and Cohorts; without it neither is there.
	controller := filepath.Join(chart, "ci", "clickhouse-controller-values.yaml")
	for _, on := range []bool{false, true} {
		out, err := helm(t, bin, "template", "gpuledger", chart, "-f", controller, "--set", fmt.Sprintf("controller.clusterQueueWeights=%v", on))
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		flag := strings.Contains(out, "- -clusterQueueWeights")
		rule := strings.Contains(out, "resources: [clusterqueues, cohorts]\n  verbs: [patch]")
		if flag != on || rule != on {
			t.Errorf("controller.clusterQueueWeights=%v: flag %v, patch rule %v; want both %v", on, flag, rule, on)
		}
	}
	// Values that cannot work fail at render time, saying what to do.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "config is required"},
		{[]string{"-f", filepath.Join(chart, "ci", "embedded-values.yaml"), "--set", "controller.enabled=true"}, "controller.enabled needs ledger.store=clickhouse"},
		{[]string{"-f", filepath.Join(chart, "ci", "embedded-values.yaml"), "--set", "auth.tokens=null"}, "serve needs API tokens"},
		{[]string{"-f", filepath.Join(chart, "ci", "embedded-values.yaml"), "--set", "serve.replicas=2"}, "serve.replicas above 1 needs ledger.store=clickhouse"},
		{[]string{"-f", filepath.Join(chart, "ci", "embedded-values.yaml"), "--set", "ledger.store=sqlite"}, "/ledger/store': value must be one of 'embedded', 'clickhouse'"},
	} {
		out, err := helm(t, bin, append([]string{"template", "gpuledger", chart}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("helm template %v: %v, want an error with %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}

// configMapData is the cluster.yaml of the rendered ConfigMap.
func configMapData(t *testing.T, manifests string) string {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		if !strings.Contains(doc, "kind: ConfigMap") {
			continue
		}
		_, data, ok := strings.Cut(doc, "cluster.yaml: |\n")
		if !ok {
			break
		}
		var lines []string
		for _, l := range strings.Split(data, "\n") {
			lines = append(lines, strings.TrimPrefix(l, "    "))
		}
		return strings.Join(lines, "\n")
	}
	t.Fatalf("no ConfigMap with cluster.yaml in:\n%s", manifests)
	return ""
}
