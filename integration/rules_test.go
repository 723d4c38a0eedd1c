package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/testenv"
)

// kubeSeries writes days of kube-state-metrics and dcgm-exporter series
// up to now, one sample every 5 minutes, in VictoriaMetrics' JSON-lines
// import format: 8 nodes of 8 GPUs (prefix-0…7) and Running pods of the
// namespace ns requesting 58 of them, each GPU they hold busy for busy of
// its time (DCGM_FI_PROF_GR_ENGINE_ACTIVE), the others idle. extra labels
// every series.
func kubeSeries(prefix, ns string, days int, now time.Time, busy float64, extra map[string]string) []byte {
	series := newImportLines(days, now)
	line := func(metric map[string]string, v float64) {
		maps.Copy(metric, extra)
		series.add(metric, func(int) float64 { return v })
	}
	left := 58
	for i := range 8 {
		node := fmt.Sprintf("%s-%d", prefix, i)
		line(map[string]string{"__name__": "kube_node_status_capacity", "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}, 8)
		gpus := min(left, 8)
		left -= gpus
		pod := fmt.Sprintf("%s-train-%d", prefix, i)
		for g := range 8 {
			dcgm := map[string]string{"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Hostname": node, "gpu": strconv.Itoa(g), "modelName": "NVIDIA H100 80GB HBM3"}
			v := 0.0
			if g < gpus {
				dcgm["namespace"], dcgm["pod"], dcgm["container"] = ns, pod, "trainer"
				v = busy
			}
			line(dcgm, v)
		}
		if gpus == 0 {
			continue
		}
		line(map[string]string{"__name__": "kube_pod_container_resource_requests", "namespace": ns, "pod": pod, "container": "trainer", "node": node,
			"resource": "nvidia_com_gpu", "unit": "integer"}, float64(gpus))
		line(map[string]string{"__name__": "kube_pod_status_phase", "namespace": ns, "pod": pod, "phase": "Running"}, 1)
	}
	return series.bytes()
}

// migLayout is the MIG layout of migSeries' GPUs.
var migLayout = []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}

// migRuleSlices is migLayout as gpuledger rules gives it to the rules:
// slices of 7 on the H100.
func migRuleSlices() []capacity.RuleSlice {
	var out []capacity.RuleSlice
	for _, p := range migLayout {
		g, _ := attribution.ParseMIGProfile(p)
		out = append(out, capacity.RuleSlice{Profile: p, Resource: attribution.SanitizeName(config.MIGResourcePrefix + p), Slices: g.ComputeSlices, Of: 7})
	}
	return out
}

// migSeries writes days of kube-state-metrics and dcgm-exporter series of
// 2 MIG nodes (prefix-0, prefix-1) of 8 GPUs partitioned as migLayout, in
// VictoriaMetrics' import format: Running pods hold every GPU's 3g.40gb,
// 2g.20gb and first 1g.10gb slice (6/7 of each GPU), each slice they hold
// busy for busy of its time; the second 1g.10gb slices are free and idle.
func migSeries(prefix string, days int, now time.Time, busy float64) []byte {
	series := newImportLines(days, now)
	line := func(metric map[string]string, v float64) { series.add(metric, func(int) float64 { return v }) }
	resource := func(p string) string { return attribution.SanitizeName(config.MIGResourcePrefix + p) }
	for i := range 2 {
		node := fmt.Sprintf("%s-%d", prefix, i)
		for p, n := range map[string]float64{"3g.40gb": 8, "2g.20gb": 8, "1g.10gb": 16} {
			line(map[string]string{"__name__": "kube_node_status_capacity", "node": node, "resource": resource(p), "unit": "integer"}, n)
			pod := fmt.Sprintf("%s-nb-%s", node, strings.ReplaceAll(p, ".", "-"))
			line(map[string]string{"__name__": "kube_pod_container_resource_requests", "namespace": "notebooks", "pod": pod, "container": "nb", "node": node,
				"resource": resource(p), "unit": "integer"}, 8)
			line(map[string]string{"__name__": "kube_pod_status_phase", "namespace": "notebooks", "pod": pod, "phase": "Running"}, 1)
		}
		for g := range 8 {
			for k, p := range migLayout {
				m := map[string]string{"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Hostname": node, "gpu": strconv.Itoa(g), "GPU_I_ID": strconv.Itoa(k + 1),
					"GPU_I_PROFILE": p, "modelName": "NVIDIA H100 80GB HBM3"}
				v := 0.0
				if k < 3 {
					m["namespace"], m["pod"] = "notebooks", fmt.Sprintf("%s-nb-%s", node, strings.ReplaceAll(p, ".", "-"))
					v = busy
				}
				line(m, v)
			}
		}
	}
	return series.bytes()
}

// ruleFiles writes the rules doc gives for the clusters, their alert
// group run every 2 s instead of every hour, and returns vmalert's -rule
// flags for them.
func ruleFiles(t *testing.T, clusters []string, doc func(cluster string) string) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for _, c := range clusters {
		f := filepath.Join(dir, c+".yml")
		if err := os.WriteFile(f, []byte(strings.ReplaceAll(doc(c), "interval: 1h", "interval: 2s")), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, "-rule="+f)
	}
	return files
}

// runVMAlert runs vmalert with the rule files as a user would on a VM
// that holds the raw series: first its replay mode over [from, to), which
// backfills the recording rules, then as it runs in production, notifying
// Alertmanager. It returns the alerts of the generated rules Alertmanager
// has once it has want of them, or after a minute.
func runVMAlert(t *testing.T, vmalert, vm, amURL string, files []string, from, to time.Time, want int) []capacity.Alert {
	t.Helper()
	flush := func() {
		t.Helper()
		resp, err := http.Get(vm + "/internal/force_flush")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	flush()
	replay := exec.Command(vmalert, append(files, "-datasource.url="+vm, "-remoteWrite.url="+vm,
		"-replay.timeFrom="+from.Format(time.RFC3339), "-replay.timeTo="+to.Format(time.RFC3339),
		"-replay.disableProgressBar", "-loggerLevel=WARN")...)
	if out, err := replay.CombinedOutput(); err != nil {
		t.Fatalf("vmalert replay: %v\n%s", err, tail(string(out), 3000))
	}
	flush()
	addr := testenv.FreeAddr(t)
	start(t, "http://"+addr+"/health", vmalert, append(files, "-datasource.url="+vm, "-remoteWrite.url="+vm, "-notifier.url="+amURL,
		"-httpListenAddr="+addr, "-loggerLevel=WARN")...)
	am := &capacity.Alertmanager{URL: amURL}
	deadline := time.Now().Add(time.Minute)
	for {
		alerts, err := am.Active(context.Background(), map[string]string{"generator": "gpuledger-rules"})
		if err != nil {
			t.Fatal(err)
		}
		if len(alerts) >= want || time.Now().After(deadline) {
			return alerts
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestVMAlertRulesFireTheExpansionAlert: the rules gpuledger rules writes,
// run by a real vmalert on a real VictoriaMetrics holding 31 days of a
// saturated flavor's kube-state-metrics and dcgm-exporter series (58 of 64
// GPUs requested by Running pods and kept 95% busy), raise
// GPUCapacityExpansion for it in a real Alertmanager, as gpuledger
// capacity does from its ledger; the same GPUs held but 10% busy raise
// GPUCapacityReclaim with the GPUs held idle, not an expansion; 29 days of
// the busy one raise nothing; MIG slices held (6/7 of 16 GPUs) and 10%
// busy raise GPUCapacityReclaim in whole-GPU equivalents. The recording
// rules' 31 days are filled by
// vmalert's replay mode, as a user backfills a new recording rule.
func TestVMAlertRulesFireTheExpansionAlert(t *testing.T) {
	testenv.Slow(t, "VictoriaMetrics, vmalert and Alertmanager")
	vmalert := vmBinary(t, "vmalert")
	vm := startVictoriaMetrics(t)
	amURL, _ := testenv.StartAlertmanager(t, t.TempDir())
	now := time.Now().UTC()
	var series []byte
	series = append(series, kubeSeries("prod", "nlp", 31, now, 0.95, nil)...)
	series = append(series, kubeSeries("hoard", "nlp", 31, now, 0.1, nil)...)
	series = append(series, kubeSeries("young", "nlp", 29, now, 0.95, nil)...)
	series = append(series, migSeries("slices", 31, now, 0.1)...)
	post(t, vm+"/api/v1/import", "application/json", series)
	files := ruleFiles(t, []string{"prod", "hoard", "young", "slices"}, func(c string) string {
		if c == "slices" {
			return capacity.PrometheusRules(c, []capacity.RuleFlavor{{Name: "h100-mig", Nodes: []string{"slices-0", "slices-1"}, MIG: migRuleSlices()}},
				capacity.DefaultRule)
		}
		var nodes []string
		for i := range 8 {
			nodes = append(nodes, fmt.Sprintf("%s-%d", c, i))
		}
		return capacity.PrometheusRules(c, []capacity.RuleFlavor{{Name: "h100", Nodes: nodes}}, capacity.DefaultRule)
	})
	got := runVMAlert(t, vmalert, vm, amURL, files, now.Add(-31*24*time.Hour-time.Hour), now, 3)
	if len(got) != 3 {
		t.Fatalf("%d alerts from vmalert, want exactly prod's expansion and hoard's and slices' reclaim alerts: %+v", len(got), got)
	}
	byCluster := alertsBy(t, got, "cluster", map[string]map[string]string{
		"prod":   {"alertname": capacity.AlertExpansion, "flavor": "h100", "action": "expand", "severity": "warning"},
		"hoard":  {"alertname": capacity.AlertReclaim, "flavor": "h100", "action": "reclaim", "severity": "warning"},
		"slices": {"alertname": capacity.AlertReclaim, "flavor": "h100-mig", "action": "reclaim", "severity": "warning"},
	})
	// slices: 16 GPUs, 6/7 of each held (13.71 GPUs), a tenth of that busy:
	// 12.3 held idle, in whole-GPU equivalents as the ledger counts.
	if s := byCluster["slices"].Annotations["summary"]; !strings.Contains(s, "12.3 of them were held but idle") {
		t.Errorf("slices' summary %q: want 16 × 6/7 × 0.9 = 12.3 idle", s)
	}
	// prod: 58 GPUs 95% busy of 64 is 86.09% busy.
	if ev := byCluster["prod"].Annotations["evidence"]; !strings.Contains(ev, "86.09%") {
		t.Errorf("prod's evidence %q: want the 30-day busy share, 58 × 0.95 / 64 = 86.09%%", ev)
	}
	// hoard: 58 held, 5.8 busy: 52.2 held idle.
	if s := byCluster["hoard"].Annotations["summary"]; !strings.Contains(s, "52.2 of them were held but idle") {
		t.Errorf("hoard's summary %q: want 58 held - 5.8 busy = 52.2 idle", s)
	}
	// Nothing for the cluster with 29 days, however saturated: it has
	// enough samples (29 of 30 days is over 95%), but none from before the
	// window.
	resp, err := http.Get(vm + "/api/v1/query?query=" + url.QueryEscape(`count_over_time(gpuledger:gpus:active_ratio{cluster="young"}[30d])`))
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
	am := &capacity.Alertmanager{URL: amURL}
	if young, _ := am.Active(context.Background(), map[string]string{"cluster": "young"}); len(young) != 0 {
		t.Errorf("29 days raised %+v", young)
	}
}

// kueueSeries writes days of one cluster's Kueue and controller series up
// to now, every 5 minutes, in VictoriaMetrics' import format: ClusterQueue
// cq-nlp admits a workload every 5 minutes after a 50-minute wait, and one
// workload is always pending for 50 minutes; a follower replica's series
// count ten times as many short waits, which would bring the p90 under 30
// minutes if they counted.
func kueueSeries(cluster, queue string, days int, now time.Time) []byte {
	series := newImportLines(days, now)
	line := series.add
	for _, le := range []string{"1280", "2560", "5120", "+Inf"} {
		over := le != "1280" && le != "2560"
		line(map[string]string{"__name__": "kueue_admission_wait_time_seconds_bucket", "cluster": cluster, "cluster_queue": queue,
			"priority_class": "", "replica_role": "leader", "le": le}, func(i int) float64 {
			if !over {
				return 0
			}
			return float64(i)
		})
		line(map[string]string{"__name__": "kueue_admission_wait_time_seconds_bucket", "cluster": cluster, "cluster_queue": queue,
			"priority_class": "", "replica_role": "follower", "le": le}, func(i int) float64 { return 10 * float64(i) })
		line(map[string]string{"__name__": "gpuledger_pending_workload_age_seconds_bucket", "cluster": cluster, "cluster_queue": queue, "le": le},
			func(int) float64 {
				if over {
					return 1
				}
				return 0
			})
	}
	return series.bytes()
}

// TestVMAlertWaitRulesFire: the queue-wait rules gpuledger rules writes,
// run by a real vmalert on a real VictoriaMetrics holding 8 days of two
// ClusterQueues whose workloads wait 50 minutes, raise
// GPUCapacityExpansion{trigger="queue_wait"} for cq-nlp, whose namespace's
// 58 GPUs are 95% busy, and GPUCapacityReclaim{trigger="queue_wait"} for
// cq-notebooks, whose namespace holds 58 GPUs 10% busy, each with its
// flavor, in a real Alertmanager, as gpuledger capacity does from its
// ledger (capacity.TestWaitAlertInAlertmanager); 6 days of the same raise
// nothing. Another cluster's series in the same TSDB (its namespaces
// named alike) are told apart by the match.
func TestVMAlertWaitRulesFire(t *testing.T) {
	testenv.Slow(t, "VictoriaMetrics, vmalert and Alertmanager")
	vmalert := vmBinary(t, "vmalert")
	vm := startVictoriaMetrics(t)
	amURL, _ := testenv.StartAlertmanager(t, t.TempDir())
	now := time.Now().UTC()
	var series []byte
	series = append(series, kueueSeries("prod", "cq-nlp", 8, now)...)
	series = append(series, kueueSeries("prod", "cq-notebooks", 8, now)...)
	series = append(series, kueueSeries("young", "cq-nlp", 6, now)...)
	series = append(series, kubeSeries("prod-a", "nlp", 8, now, 0.95, map[string]string{"cluster": "prod"})...)
	series = append(series, kubeSeries("prod-b", "notebooks", 8, now, 0.1, map[string]string{"cluster": "prod"})...)
	// young's notebooks are busy, its nlp idle: were the match ignored,
	// prod's verdicts would flip.
	series = append(series, kubeSeries("young-a", "nlp", 8, now, 0.0, map[string]string{"cluster": "young"})...)
	series = append(series, kubeSeries("young-b", "notebooks", 8, now, 1, map[string]string{"cluster": "young"})...)
	post(t, vm+"/api/v1/import", "application/json", series)
	files := ruleFiles(t, []string{"prod", "young"}, func(c string) string {
		return "groups:\n" + capacity.PrometheusWaitRules(c, []capacity.RuleQueue{{Name: "cq-nlp", Flavor: "h100", Namespaces: []string{"nlp"}},
			{Name: "cq-notebooks", Flavor: "h100-mig", Namespaces: []string{"notebooks"}}}, capacity.DefaultWaitRule, fmt.Sprintf("cluster=%q", c))
	})
	got := runVMAlert(t, vmalert, vm, amURL, files, now.Add(-8*24*time.Hour-time.Hour), now, 2)
	if len(got) != 2 {
		t.Fatalf("%d alerts from vmalert, want exactly prod's two wait alerts: %+v", len(got), got)
	}
	byQueue := alertsBy(t, got, "cluster_queue", map[string]map[string]string{
		"cq-nlp":       {"alertname": capacity.AlertExpansion, "cluster": "prod", "flavor": "h100", "trigger": "queue_wait", "action": "expand", "severity": "warning"},
		"cq-notebooks": {"alertname": capacity.AlertReclaim, "cluster": "prod", "flavor": "h100-mig", "trigger": "queue_wait", "action": "reclaim", "severity": "warning"},
	})
	for _, q := range []string{"cq-nlp", "cq-notebooks"} {
		// Every wait is in (2560, 5120]: the p90 is 2560 + 0.9 × 2560 s, 1h 21m.
		if ev := byQueue[q].Annotations["evidence"]; !strings.Contains(ev, "1h 21m") {
			t.Errorf("%s: evidence %q: want the p90 of 4864 s", q, ev)
		}
	}
	time.Sleep(3 * time.Second)
	am := &capacity.Alertmanager{URL: amURL}
	if young, _ := am.Active(context.Background(), map[string]string{"cluster": "young"}); len(young) != 0 {
		t.Errorf("6 days raised %+v", young)
	}
}

// alertsBy keys the alerts by the value of a label, and checks each
// key's alert has the labels want gives it.
func alertsBy(t *testing.T, alerts []capacity.Alert, label string, want map[string]map[string]string) map[string]capacity.Alert {
	t.Helper()
	by := map[string]capacity.Alert{}
	for _, a := range alerts {
		by[a.Labels[label]] = a
		t.Logf("from vmalert: %v %v", a.Labels, a.Annotations)
	}
	for key, labels := range want {
		for k, v := range labels {
			if got := by[key].Labels[k]; got != v {
				t.Errorf("%s: label %s = %q, want %q", key, k, got, v)
			}
		}
	}
	return by
}

// importLines is a body for VictoriaMetrics' /api/v1/import: series
// sampled every capacity.RuleInterval over days up to now.
type importLines struct {
	ts []int64
	b  strings.Builder
}

func newImportLines(days int, now time.Time) *importLines {
	l := &importLines{}
	end := now.Truncate(capacity.RuleInterval)
	for t := end.Add(-time.Duration(days) * 24 * time.Hour); !t.After(end); t = t.Add(capacity.RuleInterval) {
		l.ts = append(l.ts, t.UnixMilli())
	}
	return l
}

// add writes one series, its i-th sample v(i).
func (l *importLines) add(metric map[string]string, v func(i int) float64) {
	vals := make([]float64, len(l.ts))
	for i := range vals {
		vals[i] = v(i)
	}
	j, _ := json.Marshal(map[string]any{"metric": metric, "values": vals, "timestamps": l.ts})
	l.b.Write(j)
	l.b.WriteByte('\n')
}

func (l *importLines) bytes() []byte { return []byte(l.b.String()) }
