package kube

// Flavor targets on a real Kueue (Options.FlavorTargets): Kueue assigns a
// workload the first flavor of its ClusterQueue that fits, so a team that
// may run anywhere takes the flavor a team pinned to it needs, and no
// order of the LocalQueues makes up for that in money. The budget check
// holds such a workload (Retry) while its team holds its money-fair share
// of the assigned flavor and a backlogged team under its own could use it:
// the shares are admission.MoneyFairTargets' split of the flavors' money
// among the teams with pending work, given the flavors each may use.

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// Flavors is what the targets need of the cluster's Kueue objects.
type Flavors struct {
	// GPUs is each flavor's nominal quota over all ClusterQueues, in GPUs
	// (a MIG slice its share of a GPU).
	GPUs map[string]float64
	// Labels are each ResourceFlavor's spec.nodeLabels.
	Labels map[string]map[string]string
	// ByClusterQueue are the flavors of each ClusterQueue's GPU resources,
	// in its order.
	ByClusterQueue map[string][]string
	// LocalQueues maps namespace/name to its ClusterQueue.
	LocalQueues map[string]string
}

// ReadFlavors reads Flavors from the ClusterQueues, ResourceFlavors and
// LocalQueues.
func ReadFlavors(clusterQueues, resourceFlavors, localQueues []unstructured.Unstructured) Flavors {
	f := Flavors{GPUs: map[string]float64{}, Labels: map[string]map[string]string{}, ByClusterQueue: map[string][]string{},
		LocalQueues: map[string]string{}}
	for _, rf := range resourceFlavors {
		l, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
		f.Labels[rf.GetName()] = l
	}
	for i := range clusterQueues {
		cq := &clusterQueues[i]
		nominalGPUs(cq, func(flavor string, gpus float64) {
			f.GPUs[flavor] += gpus
			if !slices.Contains(f.ByClusterQueue[cq.GetName()], flavor) {
				f.ByClusterQueue[cq.GetName()] = append(f.ByClusterQueue[cq.GetName()], flavor)
			}
		})
	}
	for _, lq := range localQueues {
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		f.LocalQueues[lq.GetNamespace()+"/"+lq.GetName()] = cq
	}
	return f
}

// nominalGPUs calls fn with each flavor of a ClusterQueue's GPU resources,
// in its order, and its nominal quota in GPUs (a MIG slice its share of a
// GPU; 0 when the quota does not parse).
func nominalGPUs(cq *unstructured.Unstructured, fn func(flavor string, gpus float64)) {
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		fls, _, _ := unstructured.NestedSlice(gm, "flavors")
		for _, fl := range fls {
			m, _ := fl.(map[string]any)
			name, _ := m["name"].(string)
			res, _, _ := unstructured.NestedSlice(m, "resources")
			for _, r := range res {
				rm, _ := r.(map[string]any)
				rn, _ := rm["name"].(string)
				share := 1.0
				if rn != gpuResource {
					var ok bool
					if share, ok = MIGShare(rn); !ok {
						continue
					}
				}
				var gpus float64
				if q, err := resource.ParseQuantity(fmt.Sprint(rm["nominalQuota"])); err == nil {
					gpus = q.AsApproximateFloat64() * share
				}
				fn(name, gpus)
			}
		}
	}
}

// allowed are the flavors of a ClusterQueue a workload's pods may run on:
// those whose node labels its pods' nodeSelector and required node
// affinity (In and NotIn on the flavors' label keys) do not exclude, as
// Kueue's flavor assignment reads them.
func (f Flavors) allowed(u *unstructured.Unstructured, cq string) []string {
	sets, _, _ := unstructured.NestedSlice(u.Object, "spec", "podSets")
	var out []string
	for _, name := range f.ByClusterQueue[cq] {
		labels := f.Labels[name]
		ok := true
		for _, s := range sets {
			spec, _, _ := unstructured.NestedMap(s.(map[string]any), "template", "spec")
			sel, _, _ := unstructured.NestedStringMap(spec, "nodeSelector")
			for k, v := range sel {
				if lv, has := labels[k]; has && lv != v {
					ok = false
				}
			}
			terms, _, _ := unstructured.NestedSlice(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(terms) > 0 && !anyTermAllows(terms, labels) {
				ok = false
			}
		}
		if ok {
			out = append(out, name)
		}
	}
	return out
}

// anyTermAllows says whether one of the node selector terms allows a
// flavor with these labels (a term's expressions on keys the flavor does
// not label are left to the scheduler).
func anyTermAllows(terms []any, labels map[string]string) bool {
	for _, t := range terms {
		exprs, _, _ := unstructured.NestedSlice(t.(map[string]any), "matchExpressions")
		ok := true
		for _, e := range exprs {
			m, _ := e.(map[string]any)
			key, _ := m["key"].(string)
			lv, has := labels[key]
			if !has {
				continue
			}
			vals, _, _ := unstructured.NestedStringSlice(m, "values")
			switch m["operator"] {
			case "In":
				ok = ok && slices.Contains(vals, lv)
			case "NotIn":
				ok = ok && !slices.Contains(vals, lv)
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// FlavorTargets decides the flavor-target part of the check for workload
// u, whose quota Kueue has reserved: Ready unless its team holds its
// money-fair share of a flavor u was assigned while another team with
// pending work, under its share of that flavor, could use it; then Retry
// after retryAfter. workloads are all the cluster's Workloads (u among
// them or not).
//
// A team holds what its reserved workloads hold, except those that will
// not run on their reservation: evicted, or with a check answered Retry or
// Rejected (they go back to the queue, so their team waits, as a held
// workload waits in the simulator), and those undecided says are still
// to be answered (nil: none). The checks are answered one at a time, and
// each then counts the reservations answered before it, as the
// simulator's cycle counts the admissions made before the one it decides.
func FlavorTargets(t *Teams, f Flavors, u *unstructured.Unstructured, workloads []*unstructured.Unstructured, undecided func(*unstructured.Unstructured) bool, retryAfter time.Duration) Verdict {
	cq, _, _ := unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	team := t.Team(u.GetNamespace(), cq)
	if team == "" {
		return Verdict{Ready: true}
	}
	held := map[string]map[string]float64{} // team → flavor → money an hour
	waiting := map[string][]string{team: f.allowed(u, cq)}
	for _, w := range workloads {
		if w.GetNamespace() == u.GetNamespace() && w.GetName() == u.GetName() {
			continue
		}
		if _, finished := condition(w, "Finished"); finished {
			continue
		}
		if wcq, admitted, _ := unstructured.NestedString(w.Object, "status", "admission", "clusterQueue"); admitted &&
			!heldBack(w) && (undecided == nil || !undecided(w)) {
			wt := t.Team(w.GetNamespace(), wcq)
			if held[wt] == nil {
				held[wt] = map[string]float64{}
			}
			for fl, g := range demand(w).GPUsByFlavor {
				held[wt][fl] += g * float64(t.PriceMicrosPerGPUHour[fl])
			}
			continue
		}
		if active, ok, _ := unstructured.NestedBool(w.Object, "spec", "active"); ok && !active {
			continue
		}
		queue, _, _ := unstructured.NestedString(w.Object, "spec", "queueName")
		wcq := f.LocalQueues[w.GetNamespace()+"/"+queue]
		wt := t.Team(w.GetNamespace(), wcq)
		if wt == "" {
			continue
		}
		for _, fl := range f.allowed(w, wcq) {
			if !slices.Contains(waiting[wt], fl) {
				waiting[wt] = append(waiting[wt], fl)
			}
		}
	}
	teams := make([]string, 0, len(waiting))
	for tm := range waiting {
		teams = append(teams, tm)
	}
	sort.Strings(teams)
	var ds []admission.MoneyDemand
	for _, tm := range teams {
		w := t.Entitlement[tm]
		if w <= 0 {
			w = 1
		}
		ds = append(ds, admission.MoneyDemand{Queue: tm, Weight: w, Flavors: waiting[tm]})
	}
	capacity := map[string]float64{}
	for fl, g := range f.GPUs {
		capacity[fl] = g * float64(t.PriceMicrosPerGPUHour[fl])
	}
	targets := &admission.MoneyTargets{Target: admission.MoneyFairTargets(ds, capacity), Flavors: waiting}
	heldOf := func(tm, fl string) float64 { return held[tm][fl] }
	assigned := demand(u).GPUsByFlavor
	flavors := make([]string, 0, len(assigned))
	for fl := range assigned {
		flavors = append(flavors, fl)
	}
	sort.Strings(flavors)
	for _, fl := range flavors {
		if targets.AllowsHeld(team, fl, assigned[fl]*float64(t.PriceMicrosPerGPUHour[fl]), heldOf) {
			continue
		}
		other, _ := targets.Under(team, fl, heldOf)
		return Verdict{RetryAfter: retryAfter, Message: fmt.Sprintf("gpuledger: held: team %s holds %s an hour of %s, its money-fair share is %s, and team %s, under its share of %s (%s of %s an hour), waits for it; retried in %s",
			team, ledger.FormatCents(int64(heldOf(team, fl))), fl, ledger.FormatCents(int64(targets.Target[team][fl])), other, fl,
			ledger.FormatCents(int64(heldOf(other, fl))), ledger.FormatCents(int64(targets.Target[other][fl])), retryAfter)}
	}
	return Verdict{Ready: true}
}

// heldBack says whether a workload with a quota reservation will not run
// on it: Kueue evicted it, or one of its checks is Retry or Rejected
// (Kueue evicts it next).
func heldBack(w *unstructured.Unstructured) bool {
	if evictedSinceReserved(w) {
		return true
	}
	states, _, _ := unstructured.NestedSlice(w.Object, "status", "admissionChecks")
	for _, s := range states {
		if m, _ := s.(map[string]any); m["state"] == "Retry" || m["state"] == "Rejected" {
			return true
		}
	}
	return false
}
