package kube

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// PendingQueue is what waits in one ClusterQueue: the GPUs its pending
// workloads ask for and how long each has waited so far.
type PendingQueue struct {
	GPUs float64
	// Ages are the pending workloads' waits in seconds, from creation or
	// their last eviction (a requeue), as Kueue measures admission waits.
	Ages []float64
}

// Pending reads the ClusterQueues' pending workloads: those without an
// admission (no status.admission) that have not finished and are active,
// in the ClusterQueue their LocalQueue points to.
func Pending(workloads, localQueues []unstructured.Unstructured, now time.Time) map[string]*PendingQueue {
	cqOf := map[string]string{}
	for _, lq := range localQueues {
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		cqOf[lq.GetNamespace()+"/"+lq.GetName()] = cq
	}
	out := map[string]*PendingQueue{}
	for i := range workloads {
		u := &workloads[i]
		if _, admitted, _ := unstructured.NestedMap(u.Object, "status", "admission"); admitted {
			continue
		}
		if _, finished := condition(u, "Finished"); finished {
			continue
		}
		if active, ok, _ := unstructured.NestedBool(u.Object, "spec", "active"); ok && !active {
			continue
		}
		queue, _, _ := unstructured.NestedString(u.Object, "spec", "queueName")
		cq := cqOf[u.GetNamespace()+"/"+queue]
		if cq == "" {
			continue
		}
		since := u.GetCreationTimestamp().Time
		if at, evicted := condition(u, "Evicted"); evicted && at.After(since) {
			since = at
		}
		p := out[cq]
		if p == nil {
			p = &PendingQueue{}
			out[cq] = p
		}
		for _, g := range demand(u).GPUsByFlavor {
			p.GPUs += g
		}
		p.Ages = append(p.Ages, max(0, now.Sub(since).Seconds()))
	}
	return out
}

// WorkloadTimes reads each Workload's times in Kueue for the ledger: its
// creation, when it was admitted (the Admitted condition) and finished
// (Finished), its LocalQueue and its GPU request (whole GPUs, or MIG
// slices of one profile, over all its pods). Workloads without a GPU
// request are left out.
func WorkloadTimes(cluster string, workloads []unstructured.Unstructured) []ledger.WorkloadTime {
	var out []ledger.WorkloadTime
	for i := range workloads {
		u := &workloads[i]
		w := ledger.WorkloadTime{Cluster: cluster, Namespace: u.GetNamespace(), Name: u.GetName(), Submit: u.GetCreationTimestamp().Time.UTC()}
		w.LocalQueue, _, _ = unstructured.NestedString(u.Object, "spec", "queueName")
		w.Resource, w.Count = gpuRequest(u)
		if w.Count == 0 {
			continue
		}
		if at, ok := condition(u, "Admitted"); ok {
			w.Admit = at.UTC()
		}
		if at, ok := condition(u, "Finished"); ok && !w.Admit.IsZero() {
			w.Finish = at.UTC()
		}
		if w.Check() != nil {
			continue // clocks that disagree: better no record than a wrong one
		}
		out = append(out, w)
	}
	return out
}

// gpuRequest is the GPU resource a Workload's pods ask for, and how many
// of it in all.
func gpuRequest(u *unstructured.Unstructured) (string, int) {
	var name string
	var total int64
	eachGPURequest(u, func(_ string, count int64, res string, q resource.Quantity) {
		name, total = res, total+count*q.Value()
	})
	return name, int(total)
}

// updatePending lists the Workloads and LocalQueues, keeps what waits for
// the metrics, and records the Workloads' times in the ledger.
func (c *Controller) updatePending(ctx context.Context, localQueues []unstructured.Unstructured) error {
	wls, err := c.dyn.Resource(workloadsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Workloads: %w", err)
	}
	p := Pending(wls.Items, localQueues, c.o.Now())
	c.mu.Lock()
	c.pending = p
	c.mu.Unlock()
	if err := c.o.Store.WriteWorkloadTimes(ctx, WorkloadTimes(c.currentTeams().Cluster, wls.Items)); err != nil {
		return fmt.Errorf("record the Workloads' times: %w", err)
	}
	return nil
}

// writePending writes gpuledger_pending_workload_gpus and the gauge
// histogram gpuledger_pending_workload_age_seconds per ClusterQueue:
// what gpuledger ingests (with Kueue's metrics) for the queue-wait
// trigger, so that a workload waiting for hours is seen before Kueue
// admits it. Called with c.mu held.
func (c *Controller) writePending(b *strings.Builder) {
	cqs := make([]string, 0, len(c.pending))
	for cq := range c.pending {
		cqs = append(cqs, cq)
	}
	slices.Sort(cqs)
	fmt.Fprintf(b, "# HELP gpuledger_pending_workload_gpus GPUs the ClusterQueue's pending (not admitted) Workloads ask for.\n# TYPE gpuledger_pending_workload_gpus gauge\n")
	for _, cq := range cqs {
		fmt.Fprintf(b, "gpuledger_pending_workload_gpus{cluster_queue=\"%s\"} %g\n", labelValue.Replace(cq), c.pending[cq].GPUs)
	}
	fmt.Fprintf(b, "# HELP gpuledger_pending_workload_age_seconds How long the ClusterQueue's pending Workloads have waited so far, from creation or their last eviction.\n# TYPE gpuledger_pending_workload_age_seconds gauge\n")
	for _, cq := range cqs {
		counts := admission.CumulativeCounts(c.pending[cq].Ages)
		for i, le := range admission.WaitBuckets {
			n := counts[i]
			bound := "+Inf"
			if !math.IsInf(le, 1) {
				bound = fmt.Sprintf("%g", le)
			}
			fmt.Fprintf(b, "gpuledger_pending_workload_age_seconds_bucket{cluster_queue=\"%s\",le=\"%s\"} %d\n", labelValue.Replace(cq), bound, n)
		}
	}
}
