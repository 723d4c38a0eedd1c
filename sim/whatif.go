package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// WhatIfOutcome is what a replay of the workloads gave: how many were
// admitted within it and how many still waited at its end, their waits
// for admission (p90 and mean, seconds; a workload still waiting counts
// with its wait so far), and the flavor's GPU time held by them over its
// GPU time (0-1).
type WhatIfOutcome struct {
	Admitted, Pending int
	WaitP90, WaitMean float64
	Allocated         float64
	// QueueWaitP90 is the p90 wait of each ClusterQueue's workloads
	// admitted since WhatIfQuery.Since or still waiting at the end: the
	// waits the wait trigger looks at (Kueue's histogram counts a wait
	// when the workload is admitted).
	QueueWaitP90 map[string]float64
}

// WhatIf is a block of GPUs that was not bought, and what it would have
// changed: the workloads replayed as the cluster is (Before) and with the
// block (After).
type WhatIf struct {
	Flavor string
	// GPUs is the block; Nodes the nodes added for it (like the flavor's
	// first), and Queues the ClusterQueues whose nominal quota of the
	// flavor grew by it (split evenly).
	GPUs  int
	Nodes int
	// From and To are the span replayed.
	From, To      time.Time
	Queues        []string
	Before, After WhatIfOutcome
	// Replayed is how many workloads were replayed, and Guessed how many
	// of them had no run time of their own (never admitted): they run for
	// the median of the others. CarriedIn is how many of them were
	// submitted before From and still waiting or running then: they are
	// replayed as submitted at From, for the run time they had left.
	Replayed, Guessed, CarriedIn int
	// Reclaimed is the same workloads replayed on the cluster as it is
	// (no block) under WhatIfQuery.Cull; nil without one.
	Reclaimed *Reclaimed
}

// Reclaimed is what a culling policy did in a what-if: the outcome, the
// workloads it ended early, and the GPU time (whole-GPU equivalents) they
// would have held idle past their cull, per 30 days of the span replayed.
type Reclaimed struct {
	WhatIfOutcome
	Culled             int
	FreedGPUHoursMonth float64
}

// WhatIfQuery is the block a what-if adds: GPUs of Flavor, as nominal
// quota of Queues (every ClusterQueue with quota of the flavor when
// empty), replaying the workloads submitted in [From, To); the queues'
// waits are of those admitted since Since (the verdict's window) or still
// waiting at To.
type WhatIfQuery struct {
	Flavor          string
	GPUs            int
	Queues          []string
	From, To, Since time.Time
	// Cull, when set, also replays the workloads without the block, each
	// ended after the run time Cull gives for its index in the times (an
	// operator's culling policy, as CullAfter finds it).
	Cull map[int]time.Duration
}

// ReplayWhatIf replays the workloads submitted in [q.From, q.To) (their
// LocalQueues, requests, submissions and run times as recorded), and
// those submitted before q.From and still waiting or running then (as
// submitted at q.From, for what they had left), through the admission
// core, from an empty cluster at q.From (or at the first submission, when
// later and none was carried in), on the cluster as configured, then with q.GPUs
// more of q.Flavor as nodes like the flavor's first and as nominal quota
// of q.Queues (on a MIG flavor, each GPU's slices as the nodes' layout
// has them, as quota of each slice's resource). A workload still
// running at q.To runs until then; one never admitted before it runs for
// the median run time of the others.
func ReplayWhatIf(cfg *config.Config, cluster string, times []ledger.WorkloadTime, q WhatIfQuery) (WhatIf, error) {
	from, to, flavor, gpus := q.From, q.To, q.Flavor, q.GPUs
	w := WhatIf{Flavor: flavor, GPUs: gpus}
	first := to
	for _, t := range times {
		switch {
		case !t.Submit.Before(from) && t.Submit.Before(first):
			first = t.Submit
		case t.Submit.Before(from) && carried(t, from):
			first = from
		}
	}
	if f := first.Truncate(time.Hour); f.After(from) {
		from = f
	}
	w.From, w.To = from, to
	var runs []time.Duration
	for _, t := range times {
		if d, ok := ranFor(t, to); ok {
			runs = append(runs, d)
		}
	}
	slices.Sort(runs)
	median := time.Hour
	if len(runs) > 0 {
		median = runs[len(runs)/2]
	}
	var jobs []Job
	// ranBefore is how long a workload carried in had run before from.
	ranBefore := map[int]time.Duration{}
	for i, t := range times {
		if !t.Submit.Before(to) || t.Submit.Before(from) && !carried(t, from) {
			continue
		}
		j := Job{ID: i, Name: t.Name, Kind: KindTraining, Namespace: t.Namespace, Queue: t.LocalQueue, Resource: t.Resource, Count: t.Count,
			Submit: t.Submit, Duration: median}
		if d, ok := ranFor(t, to); ok {
			j.Duration = d
		} else {
			w.Guessed++
		}
		if t.Submit.Before(from) {
			j.Submit = from
			w.CarriedIn++
			if !t.Admit.IsZero() && t.Admit.Before(from) {
				ranBefore[i] = from.Sub(t.Admit)
				j.Duration -= ranBefore[i]
			}
		}
		jobs = append(jobs, j)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return a.Submit.Compare(b.Submit) })
	w.Replayed = len(jobs)
	var err error
	if w.Before, err = replayOutcome(cfg, cluster, jobs, from, to, q.Since, flavor); err != nil {
		return w, err
	}
	bigger, nodes, grown, err := withBlock(cfg, cluster, flavor, gpus, q.Queues)
	if err != nil {
		return w, err
	}
	w.Nodes, w.Queues = nodes, grown
	if w.After, err = replayOutcome(bigger, cluster, jobs, from, to, q.Since, flavor); err != nil {
		return w, err
	}
	if q.Cull == nil {
		return w, nil
	}
	rc := &Reclaimed{}
	culled := slices.Clone(jobs)
	var freed float64
	for i := range culled {
		j := &culled[i]
		if d, ok := q.Cull[j.ID]; ok && d-ranBefore[j.ID] < j.Duration {
			d -= ranBefore[j.ID]
			freed += (j.Duration - d).Hours() * float64(j.Count) * migShare(j.Profile())
			j.Duration = max(d, time.Second)
			rc.Culled++
		}
	}
	if days := to.Sub(from).Hours() / 24; days > 0 {
		rc.FreedGPUHoursMonth = freed * 30 / days
	}
	if rc.WhatIfOutcome, err = replayOutcome(cfg, cluster, culled, from, to, q.Since, flavor); err != nil {
		return w, err
	}
	w.Reclaimed = rc
	return w, nil
}

// servingKinds own the pods of serving workloads.
var servingKinds = map[string]bool{"ReplicaSet": true, "Deployment": true}

// CullAfter is an operator's culling policy on the ledger's facts: for
// each workload of times (by index) whose GPUs were idle for idleFor
// after its admission, the run time after which the policy ends it. A
// workload's hours are its owner's hourly rows (hours: the ledger's
// workload rows, Kind and Name of its pods' owner), joined by Kueue's
// naming of a Workload after its owner (<kind>-<owner name>-<5-character
// hash>, kind in lower case) or by the same name; an hour it ran from
// start to end is idle when its measured GPU time was busy less than
// busyBelow of it (an unmeasured or busy hour ends a run of idle ones; the
// part hours it started and finished in count as neither). The idle run is counted in whole
// hours (the ledger's resolution): idleFor rounds up to hours, and a
// workload is ended at the end of its last idle hour, so that the policy
// frees no more than it would. Serving workloads (owned by a ReplicaSet
// or a Deployment) are left alone: an inference endpoint idle at night
// is scale-to-zero's to decide, not a culling policy's. Joined is how
// many of times had rows.
func CullAfter(times []ledger.WorkloadTime, hours []ledger.WorkloadRow, idleFor time.Duration, busyBelow float64) (cull map[int]time.Duration, joined int) {
	type owner struct{ cluster, namespace, name string }
	byOwner := map[owner][]*ledger.WorkloadRow{}
	for i := range hours {
		h := &hours[i]
		if servingKinds[h.Kind] {
			continue
		}
		for _, name := range []string{h.Name, strings.ToLower(h.Kind) + "-" + h.Name} {
			k := owner{h.Cluster, h.Namespace, name}
			byOwner[k] = append(byOwner[k], h)
		}
	}
	need := int((idleFor + time.Hour - 1) / time.Hour)
	need = max(need, 1)
	cull = map[int]time.Duration{}
	for i, t := range times {
		if t.Admit.IsZero() {
			continue
		}
		rows := byOwner[owner{t.Cluster, t.Namespace, t.Name}]
		if n := len(t.Name); rows == nil && n > 6 && t.Name[n-6] == '-' {
			rows = byOwner[owner{t.Cluster, t.Namespace, t.Name[:n-6]}]
		}
		if rows == nil {
			continue
		}
		joined++
		var idle []time.Time
		for _, r := range rows {
			measured := r.GPUSeconds - r.UnmeasuredGPUSeconds
			// Only hours the workload ran from start to end: a part hour
			// (starting up, finishing) is not an hour idle.
			if !r.Hour.Before(t.Admit) && (t.Finish.IsZero() || !r.Hour.Add(time.Hour).After(t.Finish)) &&
				measured > 0 && r.ActiveGPUSeconds < busyBelow*measured {
				idle = append(idle, r.Hour)
			}
		}
		slices.SortFunc(idle, time.Time.Compare)
		idle = slices.CompactFunc(idle, time.Time.Equal)
		// The first run of need consecutive idle hours ends the workload
		// at the end of its last hour.
		run := 0
		for k, h := range idle {
			if k > 0 && h.Equal(idle[k-1].Add(time.Hour)) {
				run++
			} else {
				run = 1
			}
			if run == need {
				cull[i] = h.Add(time.Hour).Sub(t.Admit)
				break
			}
		}
	}
	return cull, joined
}

// carried says whether a workload submitted before from was still
// waiting or running then: the replay carries it in, submitted at from,
// for what it had left.
func carried(t ledger.WorkloadTime, from time.Time) bool {
	return t.Admit.IsZero() || !t.Admit.Before(from) || t.Finish.IsZero() || t.Finish.After(from)
}

// ranFor is how long a workload ran before to: from its admission to its
// finish, or to to while it ran then; false when it was not admitted
// before to.
func ranFor(t ledger.WorkloadTime, to time.Time) (time.Duration, bool) {
	switch {
	case t.Admit.IsZero() || !t.Admit.Before(to):
		return 0, false
	case !t.Finish.IsZero() && t.Finish.Before(to):
		return t.Finish.Sub(t.Admit), true
	}
	return to.Sub(t.Admit), true
}

// replayOutcome runs the jobs on the configured cluster and measures them.
func replayOutcome(cfg *config.Config, cluster string, jobs []Job, from, to, since time.Time, flavor string) (WhatIfOutcome, error) {
	m, err := NewModel(cfg, cluster)
	if err != nil {
		return WhatIfOutcome{}, err
	}
	// Run fills in the jobs' devices; each replay gets its own copy.
	st, err := m.Run(slices.Clone(jobs), from, to)
	if err != nil {
		return WhatIfOutcome{}, err
	}
	o := WhatIfOutcome{Admitted: st.Admitted, Pending: st.Pending, QueueWaitP90: map[string]float64{}}
	var waits []float64
	byQueue := map[string][]float64{}
	for _, wt := range m.Cluster.Workloads {
		end := wt.Admit
		if end.IsZero() {
			end = to
		}
		waits = append(waits, end.Sub(wt.Submit).Seconds())
		if !end.Before(since) {
			byQueue[wt.ClusterQueue] = append(byQueue[wt.ClusterQueue], end.Sub(wt.Submit).Seconds())
		}
	}
	if len(waits) > 0 {
		var sum float64
		for _, v := range waits {
			sum += v
		}
		o.WaitMean = sum / float64(len(waits))
		o.WaitP90 = p90(waits)
	}
	for cq, ws := range byQueue {
		o.QueueWaitP90[cq] = p90(ws)
	}
	var held, capacity float64
	for _, d := range m.Cluster.Devices {
		if d.Node.Flavor != flavor {
			continue
		}
		share := 1.0
		if d.Profile != "" {
			share = migShare(d.Profile)
		}
		capacity += share * to.Sub(from).Seconds()
		for _, h := range d.Holds {
			s, e := h.Start, h.End
			if s.Before(from) {
				s = from
			}
			if e.After(to) {
				e = to
			}
			if e.After(s) {
				held += share * e.Sub(s).Seconds()
			}
		}
	}
	if capacity > 0 {
		o.Allocated = held / capacity
	}
	return o, nil
}

// p90 is the 90th percentile of v (nearest rank); v is sorted.
func p90(v []float64) float64 {
	slices.Sort(v)
	return v[int(math.Ceil(0.9*float64(len(v))))-1]
}

// withBlock is cfg with gpus more of flavor in cluster: whole nodes like
// the flavor's first (rounded up; MIG-partitioned as it is), and the GPUs
// (or their MIG slices) as nominal quota of the queues (every ClusterQueue
// with quota of the flavor when none is given), split evenly. cfg is not
// changed.
func withBlock(cfg *config.Config, cluster, flavor string, gpus int, queues []string) (*config.Config, int, []string, error) {
	out := *cfg
	out.Clusters = slices.Clone(cfg.Clusters)
	ci := -1
	for i, c := range out.Clusters {
		if c.Name == cluster || cluster == "" && len(out.Clusters) == 1 {
			ci = i
		}
	}
	if ci < 0 {
		return nil, 0, nil, fmt.Errorf("what-if: no cluster %q in the configuration", cluster)
	}
	c := &out.Clusters[ci]
	c.Nodes = slices.Clone(c.Nodes)
	var like *config.Node
	for i := range c.Nodes {
		if c.Nodes[i].Flavor == flavor {
			like = &c.Nodes[i]
			break
		}
	}
	if like == nil || like.GPUs <= 0 {
		return nil, 0, nil, fmt.Errorf("what-if: cluster %s has no node of flavor %q to add more of", c.Name, flavor)
	}
	// The block's quota per resource: whole GPUs, or, on a MIG flavor,
	// each GPU's slices as its layout has them (3g.40gb, 2g.20gb, 1g.10gb
	// and 1g.10gb: one, one and two more of each resource per GPU).
	add := map[string]int{config.ResourceGPU: gpus}
	if len(like.MIG) > 0 {
		add = map[string]int{}
		for _, p := range like.MIG {
			add[config.MIGResourcePrefix+p] += gpus
		}
	}
	n := (gpus + like.GPUs - 1) / like.GPUs
	model := *like
	for i := range n {
		node := model
		node.Name = fmt.Sprintf("%s-whatif-%d", model.Name, i+1)
		c.Nodes = append(c.Nodes, node)
	}
	out.ClusterQueues = slices.Clone(cfg.ClusterQueues)
	var grown []string
	quotas := map[string][]*config.ResourceQuota{}
	for qi := range out.ClusterQueues {
		q := &out.ClusterQueues[qi]
		if len(queues) > 0 && !slices.Contains(queues, q.Name) {
			continue
		}
		q.Flavors = slices.Clone(q.Flavors)
		for fi := range q.Flavors {
			f := &q.Flavors[fi]
			if f.Name != flavor {
				continue
			}
			f.Resources = slices.Clone(f.Resources)
			for ri := range f.Resources {
				if name := f.Resources[ri].Name; add[name] > 0 {
					quotas[name] = append(quotas[name], &f.Resources[ri])
					if !slices.Contains(grown, q.Name) {
						grown = append(grown, q.Name)
					}
				}
			}
		}
	}
	if len(quotas) == 0 {
		return nil, 0, nil, fmt.Errorf("what-if: no ClusterQueue %v has quota of flavor %q to grow", queues, flavor)
	}
	// The block as nominal quota of each resource, split evenly among the
	// queues with quota of it, the remainder to the first.
	for name, qs := range quotas {
		for i, r := range qs {
			r.NominalQuota += add[name] / len(qs)
			if i < add[name]%len(qs) {
				r.NominalQuota++
			}
		}
	}
	return &out, n, grown, nil
}
