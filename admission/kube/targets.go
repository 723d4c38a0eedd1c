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
	// Nominal is each ClusterQueue's nominal quota of each flavor, in
	// GPUs.
	Nominal map[string]map[string]float64
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
		Nominal: map[string]map[string]float64{}, LocalQueues: map[string]string{}}
	for _, rf := range resourceFlavors {
		l, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
		f.Labels[rf.GetName()] = l
	}
	for i := range clusterQueues {
		cq := &clusterQueues[i]
		f.Nominal[cq.GetName()] = map[string]float64{}
		nominalGPUs(cq, func(flavor string, gpus float64) {
			f.GPUs[flavor] += gpus
			f.Nominal[cq.GetName()][flavor] += gpus
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
	s := readTargetState(t, f, workloads, func(w *unstructured.Unstructured) bool {
		return w.GetNamespace() == u.GetNamespace() && w.GetName() == u.GetName()
	}, undecided)
	for _, fl := range f.allowed(u, cq) {
		if !slices.Contains(s.waiting[team], fl) {
			s.waiting[team] = append(s.waiting[team], fl)
		}
	}
	targets := s.targets(t, f)
	assigned := demand(u).GPUsByFlavor
	flavors := make([]string, 0, len(assigned))
	for fl := range assigned {
		flavors = append(flavors, fl)
	}
	sort.Strings(flavors)
	for _, fl := range flavors {
		if targets.AllowsHeld(team, fl, assigned[fl]*float64(t.PriceMicrosPerGPUHour[fl]), s.heldOf) {
			continue
		}
		other, _ := targets.Under(team, fl, s.heldOf)
		return Verdict{RetryAfter: retryAfter, Message: fmt.Sprintf("gpuledger: held: team %s holds %s an hour of %s, its money-fair share is %s, and team %s, under its share of %s (%s of %s an hour), waits for it; retried in %s",
			team, ledger.FormatCents(int64(s.heldOf(team, fl))), fl, ledger.FormatCents(int64(targets.Target[team][fl])), other, fl,
			ledger.FormatCents(int64(s.heldOf(other, fl))), ledger.FormatCents(int64(targets.Target[other][fl])), retryAfter)}
	}
	return Verdict{Ready: true}
}

// Demotions are the teams whose next workload Kueue would reserve quota
// for only to have the check hold it: one of its pending workloads fits
// the free quota of a flavor, the first such of its ClusterQueue's
// flavors that its pods allow (the one Kueue would assign), on which the
// team holds its money-fair share while a team under its own waits. It
// returns each such team with that flavor.
//
// Why: Kueue tries one workload of a ClusterQueue a cycle, in Admission
// Fair Sharing's order of its LocalQueues. A team first in that order and
// over its share of the flavor that is free gets workload after workload
// reserved and held, each a cycle and a reservation, while the team the
// flavor is kept for waits behind them; the simulator, which tries every
// pending job in one cycle, passes the held ones over at no cost. The
// controller puts a demoted team's LocalQueues last in that order
// (demotedWeight) until the answer after which it is no longer demoted.
//
// Every reservation that will run counts as held, those still to be
// answered included: the answer comes within the second. released, when
// not nil, is a reservation just answered Retry that the informer's copy
// may still show reserved: it counts as pending. Free
// quota is the ClusterQueue's nominal quota less its reservations that
// will run; what may be borrowed from a cohort is not counted.
func Demotions(t *Teams, f Flavors, workloads []*unstructured.Unstructured, released func(*unstructured.Unstructured) bool) map[string]string {
	s := readTargetState(t, f, workloads, released, nil)
	if len(s.pending) == 0 {
		return nil
	}
	targets := s.targets(t, f)
	free := map[string]map[string]float64{}
	for cq, fls := range f.Nominal {
		free[cq] = map[string]float64{}
		for fl, g := range fls {
			free[cq][fl] = g - s.reserved[cq][fl]
		}
	}
	out := map[string]string{}
	for _, p := range s.pending {
		if _, done := out[p.team]; done {
			continue
		}
		for _, fl := range f.ByClusterQueue[p.cq] {
			if !slices.Contains(p.allowed, fl) || free[p.cq][fl] < p.gpus-1e-9 {
				continue
			}
			if !targets.AllowsHeld(p.team, fl, p.gpus*float64(t.PriceMicrosPerGPUHour[fl]), s.heldOf) {
				out[p.team] = fl
			}
			break
		}
	}
	return out
}

// targetState is what the flavor targets are computed from.
type targetState struct {
	// held is what each team's reservations that will run hold of each
	// flavor, money an hour.
	held map[string]map[string]float64
	// waiting are the flavors each team's pending work may use.
	waiting map[string][]string
	// pending are the pending workloads, in the order of the list.
	pending []pendingWorkload
	// reserved are the GPUs of each ClusterQueue's flavors reserved by
	// workloads that will run on their reservation.
	reserved map[string]map[string]float64
}

type pendingWorkload struct {
	team, cq string
	allowed  []string
	gpus     float64
}

func (s *targetState) heldOf(team, flavor string) float64 { return s.held[team][flavor] }

// readTargetState reads the state from the Workloads, passing over the
// finished. A reservation counts as held unless it will not run on it
// (heldBack), undecided says it is still to be answered, or skip says so
// (nil: none); one not held counts as pending (its team waits), and one
// neither held back nor skipped counts as reserved.
func readTargetState(t *Teams, f Flavors, workloads []*unstructured.Unstructured, skip, undecided func(*unstructured.Unstructured) bool) *targetState {
	s := &targetState{held: map[string]map[string]float64{}, waiting: map[string][]string{}, reserved: map[string]map[string]float64{}}
	for _, w := range workloads {
		if _, finished := condition(w, "Finished"); finished {
			continue
		}
		skipped := skip != nil && skip(w)
		if wcq, admitted, _ := unstructured.NestedString(w.Object, "status", "admission", "clusterQueue"); admitted && !skipped && !heldBack(w) {
			if s.reserved[wcq] == nil {
				s.reserved[wcq] = map[string]float64{}
			}
			gpus := demand(w).GPUsByFlavor
			for fl, g := range gpus {
				s.reserved[wcq][fl] += g
			}
			if undecided == nil || !undecided(w) {
				wt := t.Team(w.GetNamespace(), wcq)
				if s.held[wt] == nil {
					s.held[wt] = map[string]float64{}
				}
				for fl, g := range gpus {
					s.held[wt][fl] += g * float64(t.PriceMicrosPerGPUHour[fl])
				}
				continue
			}
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
		allowed := f.allowed(w, wcq)
		for _, fl := range allowed {
			if !slices.Contains(s.waiting[wt], fl) {
				s.waiting[wt] = append(s.waiting[wt], fl)
			}
		}
		var gpus float64
		for _, g := range demand(w).GPUsByFlavor {
			gpus += g
		}
		s.pending = append(s.pending, pendingWorkload{team: wt, cq: wcq, allowed: allowed, gpus: gpus})
	}
	return s
}

// targets are the money-fair targets of the teams with pending work.
func (s *targetState) targets(t *Teams, f Flavors) *admission.MoneyTargets {
	teams := make([]string, 0, len(s.waiting))
	for tm := range s.waiting {
		teams = append(teams, tm)
	}
	sort.Strings(teams)
	var ds []admission.MoneyDemand
	for _, tm := range teams {
		w := t.Entitlement[tm]
		if w <= 0 {
			w = 1
		}
		ds = append(ds, admission.MoneyDemand{Queue: tm, Weight: w, Flavors: s.waiting[tm]})
	}
	capacity := map[string]float64{}
	for fl, g := range f.GPUs {
		capacity[fl] = g * float64(t.PriceMicrosPerGPUHour[fl])
	}
	return &admission.MoneyTargets{Target: admission.MoneyFairTargets(ds, capacity), Flavors: s.waiting}
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
