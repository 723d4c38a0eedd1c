package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/internal/testenv"
)

// kubeSeries writes days of kube-state-metrics series up to now, one
// sample every 5 minutes, in VictoriaMetrics' JSON-lines import format: 8
// nodes of 8 GPUs (prefix-0…7) and Running pods requesting 58 of them.
func kubeSeries(prefix string, days int, now time.Time) []byte {
	var ts []int64
	end := now.Truncate(capacity.RuleInterval)
	for t := end.Add(-time.Duration(days) * 24 * time.Hour); !t.After(end); t = t.Add(capacity.RuleInterval) {
		ts = append(ts, t.UnixMilli())
	}
	var b strings.Builder
	line := func(metric map[string]string, v float64) {
		vals := make([]float64, len(ts))
		for i := range vals {
			vals[i] = v
		}
		j, _ := json.Marshal(map[string]any{"metric": metric, "values": vals, "timestamps": ts})
		b.Write(j)
		b.WriteByte('\n')
	}
	left := 58
	for i := range 8 {
		node := fmt.Sprintf("%s-%d", prefix, i)
		line(map[string]string{"__name__": "kube_node_status_capacity", "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}, 8)
		gpus := min(left, 8)
		left -= gpus
		if gpus == 0 {
			continue
		}
		pod := fmt.Sprintf("%s-train-%d", prefix, i)
		line(map[string]string{"__name__": "kube_pod_container_resource_requests", "namespace": "nlp", "pod": pod, "container": "trainer", "node": node,
			"resource": "nvidia_com_gpu", "unit": "integer"}, float64(gpus))
		line(map[string]string{"__name__": "kube_pod_status_phase", "namespace": "nlp", "pod": pod, "phase": "Running"}, 1)
	}
	return []byte(b.String())
}

// TestVMAlertRulesFireTheExpansionAlert: the rules gpuledger rules writes,
// run by a real vmalert on a real VictoriaMetrics holding 31 days of a
// saturated flavor's kube-state-metrics series (58 of 64 GPUs requested by
// Running pods), raise GPUCapacityExpansion for it in a real
// Alertmanager, as gpuledger capacity does from its ledger; 29 days of the
// same raise nothing. The recording rules' 31 days are filled by
// vmalert's replay mode, as a user backfills a new recording rule.
func TestVMAlertRulesFireTheExpansionAlert(t *testing.T) {
	testenv.Slow(t, "VictoriaMetrics, vmalert and Alertmanager")
	vmalert := vmBinary(t, "vmalert")
	vm := startVictoriaMetrics(t)
	amURL, _ := testenv.StartAlertmanager(t, t.TempDir())
	now := time.Now().UTC()
	post(t, vm+"/api/v1/import", "application/json", append(kubeSeries("prod", 31, now), kubeSeries("young", 29, now)...))
	flush := func() {
		t.Helper()
		resp, err := http.Get(vm + "/internal/force_flush")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	flush()
	dir := t.TempDir()
	var files []string
	for _, c := range []string{"prod", "young"} {
		var nodes []string
		for i := range 8 {
			nodes = append(nodes, fmt.Sprintf("%s-%d", c, i))
		}
		// The alert group runs every 2 s here instead of every hour.
		doc := strings.Replace(capacity.PrometheusRules(c, []capacity.RuleFlavor{{Name: "h100", Nodes: nodes}}, capacity.DefaultRule), "interval: 1h", "interval: 2s", 1)
		f := filepath.Join(dir, c+".yml")
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, "-rule="+f)
	}
	// Backfill the recording rules over the 31 days.
	replay := exec.Command(vmalert, append(files, "-datasource.url="+vm, "-remoteWrite.url="+vm,
		"-replay.timeFrom="+now.Add(-31*24*time.Hour-time.Hour).Format(time.RFC3339), "-replay.timeTo="+now.Format(time.RFC3339),
		"-replay.disableProgressBar", "-loggerLevel=WARN")...)
	if out, err := replay.CombinedOutput(); err != nil {
		t.Fatalf("vmalert replay: %v\n%s", err, tail(string(out), 3000))
	}
	flush()
	// vmalert as it runs in production, notifying Alertmanager.
	addr := testenv.FreeAddr(t)
	start(t, "http://"+addr+"/health", vmalert, append(files, "-datasource.url="+vm, "-remoteWrite.url="+vm, "-notifier.url="+amURL,
		"-httpListenAddr="+addr, "-loggerLevel=WARN")...)
	am := &capacity.Alertmanager{URL: amURL}
	var got []capacity.Alert
	deadline := time.Now().Add(time.Minute)
	for {
		alerts, err := am.Active(context.Background(), map[string]string{"generator": "gpuledger-rules"})
		if err != nil {
			t.Fatal(err)
		}
		if got = alerts; len(got) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Fatalf("%d alerts from vmalert, want exactly prod's expansion alert: %+v", len(got), got)
	}
	a := got[0]
	for k, v := range map[string]string{"alertname": capacity.AlertExpansion, "cluster": "prod", "flavor": "h100", "action": "expand", "severity": "warning"} {
		if a.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, a.Labels[k], v)
		}
	}
	if ev := a.Annotations["evidence"]; !strings.Contains(ev, "90.62%") {
		t.Errorf("evidence %q: want the 30-day average, 58/64 = 90.62%%", ev)
	}
	t.Logf("from vmalert: %v %v", a.Labels, a.Annotations)
	// Nothing for the cluster with 29 days, however saturated: it has
	// enough samples (29 of 30 days is over 95%), but none from before the
	// window.
	resp, err := http.Get(vm + "/api/v1/query?query=" + url.QueryEscape(`count_over_time(gpuledger:gpus:allocated_ratio{cluster="young"}[30d])`))
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Data struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&q)
	resp.Body.Close()
	if err != nil || len(q.Data.Result) != 1 {
		t.Fatalf("young's recorded samples: %v %+v", err, q)
	}
	if n, _ := strconv.Atoi(fmt.Sprint(q.Data.Result[0].Value[1])); n < 8208 {
		t.Fatalf("young has %d recorded samples; the test needs more than the 95%% guard (8208) so that only the history guard holds it", n)
	}
	time.Sleep(3 * time.Second)
	if young, _ := am.Active(context.Background(), map[string]string{"cluster": "young"}); len(young) != 0 {
		t.Errorf("29 days raised %+v", young)
	}
}
