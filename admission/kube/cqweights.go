package kube

// ClusterQueue weights (Options.ClusterQueueWeights): Kueue's cohort fair
// sharing orders the ClusterQueues of a cohort that borrow by their
// dominant resource share of what they borrow, divided by the
// ClusterQueue's spec.fairSharing.weight. Kueue weighs a borrowed T4 as
// much as a borrowed H100; the controller writes each ClusterQueue's
// weight from the ledger (admission.MoneyWeights: the cohort's spend per
// entitlement over the queue's), so that a queue that spent more than its
// quota's worth goes behind one that spent less. This is the simulator's
// costfair-drs. In a tree of Cohort objects (spec.parentName) Kueue
// compares the children of each cohort, ClusterQueues and Cohorts alike,
// each by its own fairSharing.weight; the controller writes the child
// Cohorts' weights too, from the spend and entitlement of their subtrees.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuledger/gpuledger/admission"
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
	q := ClusterQueue{Name: u.GetName()}
	q.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohortName")
	q.Weight, q.Entitlement = weightAndEntitlement(u, priceMicrosPerGPUHour)
	return q
}

// weightAndEntitlement reads a ClusterQueue's or a Cohort's
// spec.fairSharing.weight (1 when unset) and what its own nominal GPU
// quota is worth an hour at the given prices.
func weightAndEntitlement(u *unstructured.Unstructured, priceMicrosPerGPUHour map[string]int64) (weight, entitlement float64) {
	weight = 1
	if w, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight"); ok {
		weight = quantity(w)
	}
	nominalGPUs(u, func(flavor string, gpus float64) {
		entitlement += gpus * float64(priceMicrosPerGPUHour[flavor])
	})
	return weight, entitlement
}

// Cohort is what the weights need of one Kueue Cohort object
// (kueue.x-k8s.io/v1beta2): a node of a cohort tree, whose fair-sharing
// weight Kueue uses when it compares the Cohort with its siblings under
// its parent.
type Cohort struct {
	Name, Parent string
	// Weight is its spec.fairSharing.weight (1 when unset).
	Weight float64
	// Entitlement is what its own nominal GPU quota (a pool its subtree
	// shares, on top of its ClusterQueues') is worth an hour.
	Entitlement float64
}

// ReadCohort reads a Cohort's parent, weight and own entitlement at the
// given prices of a whole GPU per flavor.
func ReadCohort(u *unstructured.Unstructured, priceMicrosPerGPUHour map[string]int64) Cohort {
	c := Cohort{Name: u.GetName()}
	c.Parent, _, _ = unstructured.NestedString(u.Object, "spec", "parentName")
	c.Weight, c.Entitlement = weightAndEntitlement(u, priceMicrosPerGPUHour)
	return c
}

// Weighed is a weight ClusterQueueWeights gives a ClusterQueue or a Cohort,
// with the decayed spend and the entitlement (micro-units an hour) of the
// queue or the Cohort's subtree it was weighed by.
type Weighed struct{ Weight, Spend, Entitlement float64 }

// ClusterQueueWeights returns the fairSharing.weight each ClusterQueue and
// each Cohort object should have. Kueue's fair sharing compares the
// children of a cohort (its ClusterQueues and child Cohorts) by what each
// borrows over its weight, level by level; here every child of a cohort
// gets admission.MoneyWeights of its subtree's decayed spend (the spend of
// the ClusterQueues under it, by ClusterQueue name) against its subtree's
// entitlement (its ClusterQueues' nominal quotas and the Cohorts' own
// pools). Without Cohort objects that is one level: the ClusterQueues of
// each cohort. A node without an entitlement, a cohort with fewer than two
// entitled children, a ClusterQueue outside a cohort and a root cohort
// give no weight: Kueue's fair sharing does not order them, or there is no
// money to order them by. Cohorts in a cycle of parents, and everything
// under them, get none either (Kueue stops admitting to them).
func ClusterQueueWeights(queues []ClusterQueue, cohorts []Cohort, spend map[string]float64) (cqWeights, cohortWeights map[string]Weighed) {
	parent := make(map[string]string, len(cohorts))
	for _, c := range cohorts {
		parent[c.Name] = c.Parent
	}
	// cyclic: walking up from the cohort meets a cohort twice (it is in
	// a cycle of parents, or under one).
	cyclic := map[string]bool{}
	for _, c := range cohorts {
		seen := map[string]bool{}
		for n := c.Name; n != ""; n = parent[n] {
			if seen[n] {
				cyclic[c.Name] = true
				break
			}
			seen[n] = true
		}
	}
	// children of each cohort, by key: "cq/" or "cohort/" and the name.
	children := map[string][]string{}
	ent := map[string]float64{}   // by node key: the subtree's entitlement
	spent := map[string]float64{} // by node key: the subtree's spend
	// up adds a child's entitlement and spend to its cohort and the
	// cohorts above it.
	up := func(cohort string, e, s float64) {
		for ; cohort != ""; cohort = parent[cohort] {
			ent["cohort/"+cohort] += e
			spent["cohort/"+cohort] += s
		}
	}
	for _, q := range queues {
		if q.Cohort == "" || cyclic[q.Cohort] || q.Entitlement <= 0 {
			continue
		}
		k := "cq/" + q.Name
		ent[k], spent[k] = q.Entitlement, max(spend[q.Name], 0)
		children[q.Cohort] = append(children[q.Cohort], k)
		up(q.Cohort, ent[k], spent[k])
	}
	for _, c := range cohorts {
		if cyclic[c.Name] {
			continue
		}
		up(c.Name, c.Entitlement, 0)
		if c.Parent != "" {
			children[c.Parent] = append(children[c.Parent], "cohort/"+c.Name)
		}
	}
	cqWeights, cohortWeights = map[string]Weighed{}, map[string]Weighed{}
	for _, kids := range children {
		e, s := map[string]float64{}, map[string]float64{}
		for _, k := range kids {
			if ent[k] > 0 {
				e[k], s[k] = ent[k], spent[k]
			}
		}
		if len(e) < 2 {
			continue
		}
		for k, w := range admission.MoneyWeights(s, e) {
			x := Weighed{Weight: w, Spend: s[k], Entitlement: e[k]}
			if name, ok := strings.CutPrefix(k, "cq/"); ok {
				cqWeights[name] = x
			} else {
				cohortWeights[strings.TrimPrefix(k, "cohort/")] = x
			}
		}
	}
	return cqWeights, cohortWeights
}

// updateClusterQueueWeights sets the fairSharing.weight of every
// ClusterQueue and Cohort ClusterQueueWeights weighs, with hysteresis; each
// change gets an Event on the object. In dry-run mode only the Events are
// written.
func (c *Controller) updateClusterQueueWeights(ctx context.Context, t *Teams, cqs []unstructured.Unstructured) error {
	queues := make([]ClusterQueue, 0, len(cqs))
	for i := range cqs {
		queues = append(queues, ReadClusterQueue(&cqs[i], t.PriceMicrosPerGPUHour))
	}
	list, err := c.dyn.Resource(cohortsGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// A Kueue without the Cohort API: one level, the ClusterQueues.
		list = &unstructured.UnstructuredList{}
	case err != nil:
		return fmt.Errorf("list Cohorts: %w", err)
	}
	cohorts := make([]Cohort, 0, len(list.Items))
	for i := range list.Items {
		cohorts = append(cohorts, ReadCohort(&list.Items[i], t.PriceMicrosPerGPUHour))
	}
	now := c.o.Now()
	spend, err := c.spend(ctx, t, now, true)
	if err != nil {
		return err
	}
	cqTarget, cohortTarget := ClusterQueueWeights(queues, cohorts, spend)
	sort.Slice(queues, func(i, k int) bool { return queues[i].Name < queues[k].Name })
	sort.Slice(cohorts, func(i, k int) bool { return cohorts[i].Name < cohorts[k].Name })
	c.mu.Lock()
	cqWeights := make(map[string]*queueWeight, len(cqTarget))
	for _, q := range queues {
		if w, ok := cqTarget[q.Name]; ok {
			keepWeight(c.cqWeights, cqWeights, q.Name, t.ByClusterQueue[q.Name], q.Cohort, w.Weight)
		}
	}
	cohortWeights := make(map[string]*queueWeight, len(cohortTarget))
	for _, co := range cohorts {
		if w, ok := cohortTarget[co.Name]; ok {
			keepWeight(c.cohortWeights, cohortWeights, co.Name, "", co.Parent, w.Weight)
		}
	}
	c.cqWeights, c.cohortWeights = cqWeights, cohortWeights
	c.mu.Unlock()
	for _, q := range queues {
		w, ok := cqTarget[q.Name]
		if !ok || !admission.WeightChanged(q.Weight, w.Weight, c.o.Hysteresis) {
			continue
		}
		msg := fmt.Sprintf("fairSharing.weight %.3g → %.3g: ClusterQueue %s spent %.4g (decayed) against an entitlement of %.4g an hour, in cohort %s; so that Kueue's cohort fair sharing orders its borrowers by money",
			q.Weight, w.Weight, q.Name, w.Spend/1e6, w.Entitlement/1e6, q.Cohort)
		ref := corev1.ObjectReference{Kind: "ClusterQueue", Name: q.Name}
		if err := c.setWeight(ctx, clusterQsGVR, ref, q.Weight, w.Weight, msg, c.cqWeights[q.Name], "cohort", q.Cohort); err != nil {
			return err
		}
	}
	for _, co := range cohorts {
		w, ok := cohortTarget[co.Name]
		if !ok || !admission.WeightChanged(co.Weight, w.Weight, c.o.Hysteresis) {
			continue
		}
		msg := fmt.Sprintf("fairSharing.weight %.3g → %.3g: the ClusterQueues under Cohort %s spent %.4g (decayed) against an entitlement of %.4g an hour, in cohort %s; so that Kueue's fair sharing orders the cohorts by money",
			co.Weight, w.Weight, co.Name, w.Spend/1e6, w.Entitlement/1e6, co.Parent)
		ref := corev1.ObjectReference{Kind: "Cohort", Name: co.Name}
		if err := c.setWeight(ctx, cohortsGVR, ref, co.Weight, w.Weight, msg, c.cohortWeights[co.Name], "parent", co.Parent); err != nil {
			return err
		}
	}
	return nil
}

// keepWeight records in out the target weight w of the LocalQueue,
// ClusterQueue or Cohort key (with its team, and a ClusterQueue's cohort or
// a Cohort's parent), keeping its change count from old.
func keepWeight(old, out map[string]*queueWeight, key, team, cohort string, w float64) {
	qw := old[key]
	if qw == nil {
		qw = &queueWeight{}
	}
	qw.team, qw.cohort, qw.weight = team, cohort, w
	out[key] = qw
}
