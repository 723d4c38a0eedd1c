package kube

// ClusterQueue weights (Options.ClusterQueueWeights): Kueue's cohort fair
// sharing orders the ClusterQueues of a cohort that borrow by their
// dominant resource share of what they borrow, divided by the
// ClusterQueue's spec.fairSharing.weight. Kueue weighs a borrowed T4 as
// much as a borrowed H100; the controller writes each ClusterQueue's
// weight from the ledger (admission.MoneyWeights: the cohort's spend per
// entitlement over the queue's), so that a queue that spent more than its
// quota's worth goes behind one that spent less. This is the simulator's
// costfair-drs.

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// ClusterQueue is what the cohort weights need of one ClusterQueue.
type ClusterQueue struct {
	Name, Cohort string
	// Weight is its spec.fairSharing.weight (1 when unset).
	Weight float64
	// Entitlement is what its nominal GPU quota is worth an hour
	// (micro-units): each flavor's GPUs (a MIG slice its share of a GPU)
	// at the flavor's price. 0 when no flavor of it has a price.
	Entitlement float64
}

// ReadClusterQueue reads a ClusterQueue's cohort, weight and entitlement
// at the given prices of a whole GPU per flavor.
func ReadClusterQueue(u *unstructured.Unstructured, priceMicrosPerGPUHour map[string]int64) ClusterQueue {
	q := ClusterQueue{Name: u.GetName(), Weight: 1}
	q.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohortName")
	if w, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight"); ok {
		q.Weight = quantity(w)
	}
	nominalGPUs(u, func(flavor string, gpus float64) {
		q.Entitlement += gpus * float64(priceMicrosPerGPUHour[flavor])
	})
	return q
}

// ClusterQueueWeights returns the fairSharing.weight each ClusterQueue of
// a cohort should have: admission.MoneyWeights of the queues' decayed
// spend (by ClusterQueue name) against their entitlements, cohort by
// cohort. A ClusterQueue outside a cohort, alone in its cohort, or without
// an entitlement gets no weight: Kueue's cohort fair sharing does not
// order it, or there is no money to order it by.
func ClusterQueueWeights(queues []ClusterQueue, spend map[string]float64) map[string]float64 {
	byCohort := map[string]map[string]float64{}
	for _, q := range queues {
		if q.Cohort == "" || q.Entitlement <= 0 {
			continue
		}
		if byCohort[q.Cohort] == nil {
			byCohort[q.Cohort] = map[string]float64{}
		}
		byCohort[q.Cohort][q.Name] = q.Entitlement
	}
	out := map[string]float64{}
	for _, ent := range byCohort {
		if len(ent) < 2 {
			continue
		}
		for name, w := range admission.MoneyWeights(spend, ent) {
			out[name] = w
		}
	}
	return out
}

// updateClusterQueueWeights sets the fairSharing.weight of every
// ClusterQueue ClusterQueueWeights weighs, with hysteresis; each change
// gets an Event on the ClusterQueue. In dry-run mode only the Events are
// written.
func (c *Controller) updateClusterQueueWeights(ctx context.Context, t *Teams, cqs []unstructured.Unstructured) error {
	queues := make([]ClusterQueue, 0, len(cqs))
	for i := range cqs {
		queues = append(queues, ReadClusterQueue(&cqs[i], t.PriceMicrosPerGPUHour))
	}
	now := c.o.Now()
	spend, err := admission.LedgerSpend{Store: c.o.Store, Cluster: t.Cluster, HalfLife: c.o.HalfLife, IdlePenalty: c.o.IdlePenalty,
		By: ledger.DimClusterQueue}.Spend(ctx, now, now)
	if err != nil {
		return err
	}
	target := ClusterQueueWeights(queues, spend)
	sort.Slice(queues, func(i, k int) bool { return queues[i].Name < queues[k].Name })
	c.mu.Lock()
	weights := make(map[string]*queueWeight, len(target))
	for _, q := range queues {
		w, ok := target[q.Name]
		if !ok {
			continue
		}
		qw := c.cqWeights[q.Name]
		if qw == nil {
			qw = &queueWeight{}
		}
		qw.team, qw.cohort, qw.weight = t.ByClusterQueue[q.Name], q.Cohort, w
		weights[q.Name] = qw
	}
	c.cqWeights = weights
	c.mu.Unlock()
	for _, q := range queues {
		w, ok := target[q.Name]
		if !ok || !Changed(q.Weight, w, c.o.Hysteresis) {
			continue
		}
		msg := fmt.Sprintf("fairSharing.weight %.3g → %.3g: ClusterQueue %s spent %.4g (decayed) against an entitlement of %.4g an hour, in cohort %s; so that Kueue's cohort fair sharing orders its borrowers by money",
			q.Weight, w, q.Name, spend[q.Name]/1e6, q.Entitlement/1e6, q.Cohort)
		ref := corev1.ObjectReference{Kind: "ClusterQueue", Name: q.Name}
		if err := c.setWeight(ctx, clusterQsGVR, ref, q.Weight, w, msg, c.cqWeights[q.Name], "cohort", q.Cohort); err != nil {
			return err
		}
	}
	return nil
}
