package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// UpdateWeights sets every LocalQueue's fairSharing.weight from the
// ledger (Weights), and with Options.ClusterQueueWeights every cohort's
// ClusterQueues' (ClusterQueueWeights), with hysteresis; each change gets
// an Event on the queue. In dry-run mode only the Events are written. Calls run one
// at a time: two at once (Run's loop and a caller's) would both read the
// old weight and both write the new one.
func (c *Controller) UpdateWeights(ctx context.Context) error {
	c.updateMu.Lock()
	defer c.updateMu.Unlock()
	t := c.currentTeams()
	list, err := c.dyn.Resource(localQueuesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list LocalQueues: %w", err)
	}
	cqs, err := c.dyn.Resource(clusterQsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ClusterQueues: %w", err)
	}
	c.reportDifferences(t, list.Items, cqs.Items)
	if err := c.updatePending(ctx, list.Items); err != nil {
		return err
	}
	if c.o.ClusterQueueWeights {
		if err := c.updateClusterQueueWeights(ctx, t, cqs.Items); err != nil {
			return err
		}
	}
	var queues []LocalQueue
	for _, u := range list.Items {
		q := LocalQueue{Namespace: u.GetNamespace(), Name: u.GetName(), Weight: 1}
		q.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "spec", "clusterQueue")
		q.Team = t.Team(q.Namespace, q.ClusterQueue)
		if w, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "fairSharing", "weight"); ok {
			q.Weight = quantity(w)
		}
		q.Consumed = consumedUsage(&u)
		queues = append(queues, q)
	}
	now := c.o.Now()
	spend, err := c.spend(ctx, t, now, false)
	if err != nil {
		return err
	}
	share := map[string]float64{}
	for team, v := range spend {
		e := t.Entitlement[team]
		if e <= 0 {
			e = 1
		}
		share[team] = v / e
	}
	target := Weights(queues, share)
	// The metrics follow the LocalQueues that exist now.
	c.mu.Lock()
	weights := make(map[string]*queueWeight, len(queues))
	for _, q := range queues {
		keepWeight(c.weights, weights, q.Key(), q.Team, "", target[q.Key()])
	}
	c.weights = weights
	demoted := c.demoted
	c.mu.Unlock()
	for _, q := range queues {
		w := target[q.Key()]
		if demoted[q.Team] != "" {
			// updateDemotions gives the weight back.
			w = demotedWeight
		}
		if !admission.WeightChanged(q.Weight, w, c.o.Hysteresis) {
			continue
		}
		msg := fmt.Sprintf("fairSharing.weight %.3g → %.3g: Kueue's consumed usage %.4g over team %s's decayed spend per entitlement %.4g, so that Admission Fair Sharing orders by money",
			q.Weight, w, q.Consumed, q.Team, share[q.Team])
		ref := corev1.ObjectReference{Kind: "LocalQueue", Namespace: q.Namespace, Name: q.Name}
		if err := c.setWeight(ctx, localQueuesGVR, ref, q.Weight, w, msg, c.weights[q.Key()], "team", q.Team); err != nil {
			return err
		}
	}
	return nil
}

// spend is each team's (or with byCQ ClusterQueue's) decayed spend at
// now: the ledger's settled hours, and what the admitted Workloads have
// cost since the newest of them (openSpend) once Run watches the Workloads.
func (c *Controller) spend(ctx context.Context, t *Teams, now time.Time, byCQ bool) (map[string]float64, error) {
	ls := admission.LedgerSpend{Store: c.o.Store, Cluster: t.Cluster, HalfLife: c.o.HalfLife, IdlePenalty: c.o.IdlePenalty}
	if byCQ {
		ls.By = ledger.DimClusterQueue
	}
	spend, settled, err := ls.SpendThrough(ctx, now, now)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	list := c.workloads
	c.mu.Unlock()
	if list != nil {
		for k, v := range openSpend(t, list(), now, settled, c.o.HalfLife, c.o.ObjectTime, byCQ) {
			spend[k] += v
		}
	}
	return spend, nil
}

// setWeight writes weight to (from from) into the spec.fairSharing.weight
// of the LocalQueue or ClusterQueue ref names (not in dry-run mode),
// counts the change in qw, records an Event with msg on the queue (none
// when msg is empty) and logs it with the given key-value pairs.
func (c *Controller) setWeight(ctx context.Context, gvr schema.GroupVersionResource, ref corev1.ObjectReference, from, to float64, msg string,
	qw *queueWeight, logArgs ...any) error {
	reason := "FairSharingWeight"
	if c.o.DryRun {
		reason = "FairSharingWeightDryRun"
	} else {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"fairSharing": map[string]any{"weight": FormatWeight(to)}}})
		var err error
		if ref.Namespace == "" {
			_, err = c.dyn.Resource(gvr).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		} else {
			_, err = c.dyn.Resource(gvr).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		}
		if err != nil {
			return fmt.Errorf("set the weight of %s %s: %w", ref.Kind, objectKey(ref), err)
		}
		c.Stats.WeightChanges.Add(1)
	}
	c.mu.Lock()
	qw.changes++
	c.mu.Unlock()
	if msg != "" {
		c.event(ctx, ref, reason, msg)
	}
	c.o.Log.Info("fair-sharing weight", append([]any{strings.ToLower(ref.Kind[:1]) + ref.Kind[1:], objectKey(ref)},
		append(logArgs, "from", from, "to", to, "dryRun", c.o.DryRun)...)...)
	return nil
}

// objectKey names an object: namespace/name, or name when cluster-scoped.
func objectKey(ref corev1.ObjectReference) string {
	if ref.Namespace == "" {
		return ref.Name
	}
	return ref.Namespace + "/" + ref.Name
}

// consumedUsage is Kueue's decayed usage of a LocalQueue, all resources
// weighed 1 (status.fairSharing.admissionFairSharingStatus.consumedResources).
func consumedUsage(lq *unstructured.Unstructured) float64 {
	used, _, _ := unstructured.NestedMap(lq.Object, "status", "fairSharing", "admissionFairSharingStatus", "consumedResources")
	var sum float64
	for _, v := range used {
		sum += quantity(v)
	}
	return sum
}

func quantity(v any) float64 {
	switch x := v.(type) {
	case string:
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0
		}
		return q.AsApproximateFloat64()
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// reportDifferences logs where the cluster and the configuration disagree
// (a ClusterQueue or a LocalQueue no team owns, a configured ClusterQueue
// the cluster lacks), when that changes; it guesses nothing.
func (c *Controller) reportDifferences(t *Teams, lqs, cqs []unstructured.Unstructured) {
	var diffs []string
	seen := map[string]bool{}
	for _, cq := range cqs {
		seen[cq.GetName()] = true
		if _, ok := t.ByClusterQueue[cq.GetName()]; !ok {
			diffs = append(diffs, fmt.Sprintf("ClusterQueue %s belongs to no team in the configuration", cq.GetName()))
		}
	}
	for name := range t.ByClusterQueue {
		if !seen[name] {
			diffs = append(diffs, fmt.Sprintf("the configuration's ClusterQueue %s is not in the cluster", name))
		}
	}
	for _, lq := range lqs {
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		if t.Team(lq.GetNamespace(), cq) == "" {
			diffs = append(diffs, fmt.Sprintf("LocalQueue %s/%s (ClusterQueue %s) belongs to no team: its weight is left alone", lq.GetNamespace(), lq.GetName(), cq))
		}
	}
	sort.Strings(diffs)
	s := strings.Join(diffs, "; ")
	c.mu.Lock()
	changed := s != c.diffs
	c.diffs = s
	c.mu.Unlock()
	if changed && s != "" {
		c.o.Log.Warn("the cluster and the configuration differ", "differences", s)
	}
}

// Differences is the last report of where the cluster and the
// configuration disagree ("" when they agree).
func (c *Controller) Differences() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.diffs
}

func (c *Controller) event(ctx context.Context, ref corev1.ObjectReference, reason, msg string) {
	ref.APIVersion = kueueGroup + "/v1beta2"
	// A cluster-scoped object's Events live in the default namespace.
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.NewTime(c.o.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ns},
		InvolvedObject: ref,
		Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "gpuledger"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := c.core.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		c.o.Log.Warn("write an Event", "kind", ref.Kind, "object", objectKey(ref), "err", err)
	}
}
