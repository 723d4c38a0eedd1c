package kubetest

// The YAML of the objects tests create, and waiting on their conditions.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Workload is the YAML of a Kueue Workload in namespace ns queued in
// LocalQueue queue: pods pods of gpus nvidia.com/gpu each, at priority.
func Workload(ns, name, queue string, pods, gpus int, priority int32) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: %s, namespace: %s}
spec:
  queueName: %s
  priority: %d
  podSets:
  - name: main
    count: %d
%s`, name, ns, queue, priority, pods, podTemplate("    ", gpus))
}

// podTemplate is a pod template of one pause container asking for gpus
// nvidia.com/gpu, indented by indent.
func podTemplate(indent string, gpus int) string {
	t := fmt.Sprintf(`template:
  spec:
    restartPolicy: Never
    containers:
    - name: trainer
      image: registry.k8s.io/pause:3.10
      resources: {requests: {nvidia.com/gpu: "%d"}, limits: {nvidia.com/gpu: "%d"}}
`, gpus, gpus)
	return indent + strings.ReplaceAll(strings.TrimSuffix(t, "\n"), "\n", "\n"+indent) + "\n"
}

// Condition says whether an object's status has condition typ True.
func Condition(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// Admitted says whether a Workload is admitted.
func Admitted(u *unstructured.Unstructured) bool { return Condition(u, "Admitted") }

var flavorsGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}

// WorkloadsGVR is Kueue's Workload resource.
var WorkloadsGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// Job is the YAML of a suspended batch/v1 Job queued in LocalQueue queue
// (Kueue makes its Workload and unsuspends it when admitted): one pod of
// gpus nvidia.com/gpu, with a run-time limit of maxSeconds when > 0.
func Job(ns, name, queue string, gpus, maxSeconds int) string {
	limit := ""
	if maxSeconds > 0 {
		limit = fmt.Sprintf(", kueue.x-k8s.io/max-exec-time-seconds: %q", strconv.Itoa(maxSeconds))
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: %s, labels: {kueue.x-k8s.io/queue-name: %s%s}}
spec:
  suspend: true
  parallelism: 1
  completions: 1
%s`, name, ns, queue, limit, podTemplate("  ", gpus))
}

// JobWorkload returns the Workload Kueue made for Job ns/job, or nil
// while there is none.
func (s *Stack) JobWorkload(ctx context.Context, ns, job string) (*unstructured.Unstructured, error) {
	list, err := s.Dynamic.Resource(WorkloadsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].GetOwnerReferences() {
			if o.Kind == "Job" && o.Name == job {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}

// ClusterQueue is the YAML of ResourceFlavor flavor and of ClusterQueue
// name with gpus nvidia.com/gpu of it as nominal quota, open to every
// namespace; spec adds lines to its spec (indented by two spaces).
func ClusterQueue(name, flavor string, gpus int, spec string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[2]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {}
%[4]s  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: %[2]s
      resources: [{name: nvidia.com/gpu, nominalQuota: %[3]d}]
`, name, flavor, gpus, spec)
}

// Namespace is the YAML of namespace ns with LocalQueue lq of ClusterQueue cq.
func Namespace(ns, lq, cq string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[2]s, namespace: %[1]s}
spec: {clusterQueue: %[3]s}
`, ns, lq, cq)
}

// WaitFor polls cond every 100 ms until it holds, or ends the test after
// within.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
