package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
)

// TestScrapeDiscoversDCGMExporters: the shipped dcgm-exporter job, run by
// a real vmagent with kubernetes_sd against a real kube-apiserver, keeps
// the exporter pods of both common installs (the dcgm-exporter Helm
// chart's, labelled app.kubernetes.io/name=dcgm-exporter, and the NVIDIA
// GPU Operator's, labelled app=nvidia-dcgm-exporter) and no other pod,
// and scrapes them: the pods' IP is 127.0.0.1 and their ports are test
// exporters' here.
func TestScrapeDiscoversDCGMExporters(t *testing.T) {
	testenv.Slow(t, "a Kubernetes API server and vmagent")
	vmagent := vmagentBinary(t)
	if err := kubetest.Built(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	s := kubetest.Start(t, kubetest.Options{WithoutKueue: true})
	ctx := context.Background()

	exporter := func() (*httptest.Server, int32) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, `DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",Hostname="node-1",namespace="ml",pod="train-0"} 87`)
		}))
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		return srv, int32(p)
	}
	_, chartPort := exporter()
	_, operatorPort := exporter()
	_, otherPort := exporter()
	pods := []struct {
		ns, name string
		labels   map[string]string
		port     corev1.ContainerPort
		kept     bool
	}{
		{"monitoring", "dcgm-exporter-7x2kq", map[string]string{"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": "dcgm-exporter"},
			corev1.ContainerPort{Name: "metrics", ContainerPort: chartPort}, true},
		{"gpu-operator", "nvidia-dcgm-exporter-5kd9s", map[string]string{"app": "nvidia-dcgm-exporter"},
			corev1.ContainerPort{Name: "metrics", ContainerPort: operatorPort}, true},
		// Another pod with a port named metrics, and an exporter pod's
		// other port: neither is scraped.
		{"monitoring", "node-exporter-abcde", map[string]string{"app.kubernetes.io/name": "node-exporter"},
			corev1.ContainerPort{Name: "metrics", ContainerPort: otherPort}, false},
		{"gpu-operator", "nvidia-dcgm-exporter-health", map[string]string{"app": "nvidia-dcgm-exporter"},
			corev1.ContainerPort{Name: "health", ContainerPort: otherPort}, false},
	}
	for _, ns := range []string{"monitoring", "gpu-operator"} {
		if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No controller manager makes a namespace's default service
		// account; pod admission wants it.
		if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	no := false
	for _, p := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: p.labels},
			Spec: corev1.PodSpec{NodeName: "node-1", AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "exporter", Image: "nvcr.io/nvidia/k8s/dcgm-exporter", Ports: []corev1.ContainerPort{p.port}}}}}
		created, err := s.Client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := s.Client.CoreV1().Pods(p.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The shipped dcgm-exporter job, pointed at the test API server.
	raw, err := os.ReadFile(scrapeConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cfg.ScrapeConfigs, func(j map[string]any) bool { return j["job_name"] == "dcgm-exporter" })
	if i < 0 {
		t.Fatalf("%s has no dcgm-exporter job", scrapeConfig)
	}
	job := cfg.ScrapeConfigs[i]
	job["scrape_interval"] = "1s"
	for _, sd := range job["kubernetes_sd_configs"].([]any) {
		sd.(map[string]any)["kubeconfig_file"] = s.Kubeconfig
	}
	out, err := yaml.Marshal(map[string]any{"scrape_configs": []any{job}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "vmagent.yml")
	if err := os.WriteFile(cfgFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(vmagent, "-promscrape.config="+cfgFile, "-httpListenAddr="+addr, "-remoteWrite.url="+sink.URL,
		"-remoteWrite.tmpDataPath="+filepath.Join(dir, "data"), "-loggerLevel=WARN")
	logFile, err := os.Create(filepath.Join(dir, "vmagent.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("vmagent's log:\n%s", b)
		}
	}()

	type target struct {
		Discovered map[string]string `json:"discoveredLabels"`
		Labels     map[string]string `json:"labels"`
		Health     string            `json:"health"`
		ScrapePool string            `json:"scrapePool"`
	}
	var active []target
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		active, last = nil, ""
		resp, err := http.Get("http://" + addr + "/api/v1/targets")
		if err == nil {
			var body struct {
				Data struct {
					ActiveTargets []target `json:"activeTargets"`
				} `json:"data"`
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if json.Unmarshal(b, &body) == nil {
				active = body.Data.ActiveTargets
			}
		}
		up := 0
		for _, a := range active {
			if a.Health == "up" {
				up++
			}
		}
		if up >= 2 && len(active) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vmagent did not scrape the two exporters in 2 minutes; its targets: %.3000s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var got []string
	for _, a := range active {
		got = append(got, a.Discovered["__meta_kubernetes_namespace"]+"/"+a.Discovered["__meta_kubernetes_pod_name"]+" "+a.Health+" node="+a.Labels["node"])
	}
	slices.Sort(got)
	want := []string{"gpu-operator/nvidia-dcgm-exporter-5kd9s up node=node-1", "monitoring/dcgm-exporter-7x2kq up node=node-1"}
	if !slices.Equal(got, want) {
		t.Errorf("vmagent scrapes %q, want %q", got, want)
	}
	for _, p := range pods {
		if p.kept != slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, "/"+p.name+" ") }) {
			t.Errorf("pod %s/%s: kept %v, want %v", p.ns, p.name, !p.kept, p.kept)
		}
	}
}

// vmagentBinary is vmagent from $GPULEDGER_VICTORIAMETRICS.
func vmagentBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GPULEDGER_VICTORIAMETRICS")
	vmagent := filepath.Join(dir, "vmagent")
	if _, err := os.Stat(vmagent); dir == "" || err != nil {
		testenv.Missing(t, "vmagent is not built (GPULEDGER_VICTORIAMETRICS %q); run tools/build-victoriametrics.sh and set GPULEDGER_VICTORIAMETRICS to the folder it prints", dir)
	}
	return vmagent
}
