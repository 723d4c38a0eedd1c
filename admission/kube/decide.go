// Package kube steers a real Kueue with the ledger's money, through Kueue's
// supported extension points only: it keeps LocalQueue
// spec.fairSharing.weight so that Admission Fair Sharing orders a
// ClusterQueue's LocalQueues by each team's decayed spend per entitlement,
// and it runs the gpuledger.io/budget AdmissionCheck, which holds a
// workload whose team would pass its monthly limit. It is the only package
// that talks to Kubernetes (client-go, Kueue's API as unstructured
// objects at kueue.x-k8s.io/v1beta2); what it decides is computed by the
// pure functions of this file.
package kube

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/ledger"
)

// Teams is the business data the controller takes from the configuration:
// who owns what, what GPUs cost, and how much each team may spend.
type Teams struct {
	// Cluster names the cluster in the ledger.
	Cluster  string
	Currency string
	// ByNamespace and ByClusterQueue give a namespace's or a
	// ClusterQueue's team; the namespace wins.
	ByNamespace    map[string]string
	ByClusterQueue map[string]string
	// LimitMicros is each team's hard monthly limit (its budget); a team
	// without one is never held.
	LimitMicros map[string]int64
	// Entitlement weighs a team's spend in the fair share (its budget, or
	// the value of its quota): spend / entitlement is what is compared.
	// A team without one has 1.
	Entitlement map[string]float64
	// PriceMicrosPerGPUHour is each ResourceFlavor's price of a whole GPU.
	PriceMicrosPerGPUHour map[string]int64
}

// Team returns the team of a namespace or, failing that, of a ClusterQueue.
func (t *Teams) Team(namespace, clusterQueue string) string {
	if team, ok := t.ByNamespace[namespace]; ok {
		return team
	}
	return t.ByClusterQueue[clusterQueue]
}

// LocalQueue is what the weight computation needs of one LocalQueue.
type LocalQueue struct {
	Namespace, Name, ClusterQueue string
	Team                          string
	// Consumed is Kueue's decayed usage of the queue (the sum of
	// status.fairSharing.admissionFairSharingStatus.consumedResources),
	// Weight its spec.fairSharing.weight (1 when unset).
	Consumed float64
	Weight   float64
}

// Key names the LocalQueue: namespace/name.
func (q LocalQueue) Key() string { return q.Namespace + "/" + q.Name }

// Weights returns the fairSharing.weight each LocalQueue should have so
// that Kueue's Admission Fair Sharing, which orders the LocalQueues of a
// ClusterQueue by consumed / weight (lowest first), orders them by their
// team's share instead (decayed spend / entitlement): the
// admission.UsageWeights of each ClusterQueue's LocalQueues. A queue Kueue
// has seen consume nothing, or whose team has no share, keeps weight 1.
func Weights(queues []LocalQueue, share map[string]float64) map[string]float64 {
	type group struct{ usage, share map[string]float64 }
	byCQ := map[string]group{}
	for _, q := range queues {
		g, ok := byCQ[q.ClusterQueue]
		if !ok {
			g = group{map[string]float64{}, map[string]float64{}}
			byCQ[q.ClusterQueue] = g
		}
		g.usage[q.Key()] = q.Consumed
		if q.Team != "" {
			g.share[q.Key()] = share[q.Team]
		}
	}
	out := make(map[string]float64, len(queues))
	for _, g := range byCQ {
		maps.Copy(out, admission.UsageWeights(g.usage, g.share))
	}
	return out
}

// FormatWeight writes a weight as a Kubernetes quantity (milli-units).
func FormatWeight(w float64) string {
	return strconv.FormatInt(int64(math.Round(w*1000)), 10) + "m"
}

// Demand is what a workload asks for, per ResourceFlavor: GPUs (a MIG
// slice counts its compute share of a 7-slice GPU).
type Demand struct {
	GPUsByFlavor map[string]float64
	// MaxDuration is spec.maximumExecutionTimeSeconds; 0 when unset.
	MaxDuration time.Duration
}

// MIGShare is the part of a whole GPU one nvidia.com/mig-<profile> slice
// is: its compute slices over the 7 of an A100 or H100.
func MIGShare(resource string) (float64, bool) {
	p, ok := strings.CutPrefix(resource, "nvidia.com/mig-")
	if !ok {
		return 0, false
	}
	g, _, ok := strings.Cut(p, "g.")
	n, err := strconv.Atoi(g)
	if !ok || err != nil || n < 1 || n > 7 {
		return 0, false
	}
	return float64(n) / 7, true
}

// Verdict is the budget check's answer for one workload.
type Verdict struct {
	// Ready: the workload may start; otherwise Retry after RetryAfter.
	Ready      bool
	RetryAfter time.Duration
	Message    string
}

// Budget decides the gpuledger.io/budget check: a workload whose team's
// month-to-date spend plus what the workload would cost at its requested
// GPUs for its duration limit (or defaultDuration) passes the team's
// monthly limit waits, and is retried after retryAfter. A team without a
// limit, or unknown, passes.
func Budget(t *Teams, team string, d Demand, monthToDate int64, defaultDuration, retryAfter time.Duration) Verdict {
	if team == "" {
		return Verdict{Ready: true, Message: "gpuledger: no team owns this workload's namespace or ClusterQueue; no budget applies"}
	}
	limit, ok := t.LimitMicros[team]
	if !ok {
		return Verdict{Ready: true, Message: fmt.Sprintf("gpuledger: team %s has no monthly limit", team)}
	}
	dur, how := d.MaxDuration, "its maximumExecutionTimeSeconds"
	if dur <= 0 {
		dur, how = defaultDuration, "the default duration (the workload sets no maximumExecutionTimeSeconds)"
	}
	flavors := make([]string, 0, len(d.GPUsByFlavor))
	for f := range d.GPUsByFlavor {
		flavors = append(flavors, f)
	}
	sort.Strings(flavors)
	var cost float64
	var parts []string
	for _, f := range flavors {
		g := d.GPUsByFlavor[f]
		price := t.PriceMicrosPerGPUHour[f]
		cost += g * float64(price) * dur.Hours()
		parts = append(parts, fmt.Sprintf("%g GPUs of %s at %s/GPU-hour", g, f, ledger.FormatCents(price)))
	}
	estimate := int64(math.Ceil(cost))
	what := strings.Join(parts, " + ")
	if what == "" {
		what = "no GPUs"
	}
	cur := t.Currency
	if monthToDate+estimate <= limit {
		return Verdict{Ready: true, Message: fmt.Sprintf("gpuledger: within team %s's monthly limit: %s %s spent this month + up to %s for this workload (%s for %s, %s) ≤ %s",
			team, ledger.FormatCents(monthToDate), cur, ledger.FormatCents(estimate), what, dur, how, ledger.FormatCents(limit))}
	}
	return Verdict{RetryAfter: retryAfter, Message: fmt.Sprintf("gpuledger: held: team %s has spent %s %s this month; this workload could cost up to %s more (%s for %s, %s), past its monthly limit of %s. Raise the team's monthlyBudget in the gpuledger configuration, shorten maximumExecutionTimeSeconds or ask for fewer GPUs; retried every %s",
		team, ledger.FormatCents(monthToDate), cur, ledger.FormatCents(estimate), what, dur, how, ledger.FormatCents(limit), retryAfter)}
}
