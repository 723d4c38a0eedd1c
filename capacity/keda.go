package capacity

import (
	"fmt"
	"strings"
	"time"
)

// KEDATarget is what a ScaledObject scales and how it wakes: at zero
// replicas the model server's own metrics (vLLM's
// vllm:num_requests_running and _waiting) vanish with its pods, so the
// trigger must be a request rate measured in front of it (a router or
// gateway series in Prometheus), or KEDA's HTTP add-on, which holds the
// first request while the replica starts.
type KEDATarget struct {
	Namespace, Name string
	// Kind is the scaled workload's kind: Deployment (default) or, for a
	// LeaderWorkerSet, LeaderWorkerSet with APIVersion
	// leaderworkerset.x-k8s.io/v1.
	Kind, APIVersion string
	MaxReplicas      int
	// Prometheus and Query: the server and the request-rate query (per
	// second) of the endpoint's traffic measured outside its pods;
	// Threshold the requests per second one replica takes. Without a
	// query, an HTTPScaledObject of KEDA's HTTP add-on is written
	// (Host, Service, Port).
	Prometheus, Query string
	Threshold         float64
	Host, Service     string
	Port              int
}

// For is t aimed at the workload name in namespace: its Service and host
// are the workload's name, and a %s in t's Query stands for it.
func (t KEDATarget) For(namespace, name string) KEDATarget {
	t.Namespace, t.Name = namespace, name
	t.Host, t.Service = name+"."+namespace+".svc", name
	t.Query = strings.ReplaceAll(t.Query, "%s", name)
	return t
}

// ForWorkload is t for the workload that serves an endpoint: a
// Deployment (named by its ReplicaSet less the pod-template hash), a
// LeaderWorkerSet, or, where the ledger knows no owner, one named after
// the model.
func (t KEDATarget) ForWorkload(namespace, kind, name, model string) KEDATarget {
	target := KEDAName(model)
	switch kind {
	case "ReplicaSet":
		target = deploymentOf(name)
	case "Deployment", "LeaderWorkerSet":
		target = name
	}
	t = t.For(namespace, target)
	if kind == "LeaderWorkerSet" {
		t.Kind, t.APIVersion = "LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1"
	}
	return t
}

// deploymentOf names the Deployment of a ReplicaSet: its name less the
// pod-template hash Kubernetes appends. The hash is written in
// apimachinery's safe encoding (util/rand.SafeEncodeString: no vowels, no
// 0, 1 or 3), so that a suffix such as "server" is not taken for one.
func deploymentOf(rs string) string {
	i := strings.LastIndexByte(rs, '-')
	if i <= 0 {
		return rs
	}
	hash := rs[i+1:]
	if len(hash) < 5 || len(hash) > 10 || strings.Trim(hash, safeEncoding) != "" {
		return rs
	}
	return rs[:i]
}

// safeEncoding is the alphabet of Kubernetes' pod-template hashes.
const safeEncoding = "bcdfghjklmnpqrstvwxz2456789"

// KEDAObject is the YAML of the object that applies rec to the target: a
// ScaledObject with a Prometheus trigger (activationThreshold 0: any
// request wakes it) and cron triggers for the pre-warm schedule, or an
// HTTPScaledObject where no external metric exists.
func KEDAObject(rec ScaleToZero, t KEDATarget) string {
	if t.Kind == "" {
		t.Kind, t.APIVersion = "Deployment", "apps/v1"
	}
	maxR := max(t.MaxReplicas, 1)
	p := rec.Best.Policy
	var b strings.Builder
	fmt.Fprintf(&b, "# gpuledger scale-to-zero for %s: minReplicas %d, cooldown %s; %.1f GPU-hours a day saved, %.1f cold starts a day, p95 extra latency %s\n",
		rec.Endpoint, rec.MinReplicas, p.Cooldown, rec.Best.SavedGPUHours/rec.Best.Days, rec.Best.ColdStartsPerDay, rec.Best.P95ExtraLatency)
	if t.Query == "" {
		fmt.Fprintf(&b, `apiVersion: http.keda.sh/v1alpha1
kind: HTTPScaledObject
metadata:
  name: %s
  namespace: %s
spec:
  hosts: [%q]
  scaleTargetRef:
    name: %s
    kind: %s
    apiVersion: %s
    service: %s
    port: %d
  replicas: {min: %d, max: %d}
  scaledownPeriod: %d
  scalingMetric:
    requestRate: {targetValue: %g, window: 1m, granularity: 1s}
`, t.Name, t.Namespace, t.Host, t.Name, t.Kind, t.APIVersion, t.Service, t.Port, rec.MinReplicas, maxR, int(p.Cooldown.Seconds()), max(t.Threshold, 1))
		if len(p.PreWarm) > 0 {
			fmt.Fprintf(&b, "# The HTTP add-on has no schedule: pre-warm with a CronJob that scales the target to 1 for %s UTC, %s before each (the model's load), or use a ScaledObject.\n",
				windows(p.PreWarm), rec.ColdStart.Load)
		}
		return b.String()
	}
	fmt.Fprintf(&b, `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: %s
  namespace: %s
spec:
  scaleTargetRef:
    apiVersion: %s
    kind: %s
    name: %s
  minReplicaCount: %d
  maxReplicaCount: %d
  cooldownPeriod: %d
  pollingInterval: 15
  triggers:
  - type: prometheus
    metadata:
      serverAddress: %s
      query: %s
      threshold: %q
      activationThreshold: "0"
`, t.Name, t.Namespace, t.APIVersion, t.Kind, t.Name, rec.MinReplicas, maxR, int(p.Cooldown.Seconds()), t.Prometheus, yamlString(t.Query), fmt.Sprintf("%g", max(t.Threshold, 1)))
	// A pre-warm window starts a load early, so that the replica is ready
	// when it opens.
	for _, w := range p.PreWarm {
		from := (w.From - rec.ColdStart.Load + 24*time.Hour) % (24 * time.Hour)
		fmt.Fprintf(&b, `  - type: cron
    metadata:
      timezone: Etc/UTC
      start: %q
      end: %q
      desiredReplicas: "1"
`, cron(from), cron(w.To))
	}
	return b.String()
}

// cron is the daily cron expression at time of day d.
func cron(d time.Duration) string {
	if d >= 24*time.Hour {
		d = 24*time.Hour - time.Minute
	}
	return fmt.Sprintf("%d %d * * *", int(d.Minutes())%60, int(d.Hours()))
}

func windows(ws []DailyWindow) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%02d:%02d-%02d:%02d", int(w.From.Hours()), int(w.From.Minutes())%60, int(w.To.Hours()), int(w.To.Minutes())%60))
	}
	return strings.Join(parts, ", ")
}

// yamlString quotes s for YAML (a double-quoted scalar).
func yamlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
