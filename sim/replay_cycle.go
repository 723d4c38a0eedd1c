package sim

// An admission cycle of the replay: the queued workloads offered in the
// policy's order, the decisions carried out, preemptions and charges.

import (
	"math"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/admission"
)

// moneyTargets are the backlogged queues' money-fair targets
// (ReplayOptions.FlavorTargets), computed again when the set of
// backlogged queues changes.
func (r *replay) moneyTargets() *admission.MoneyTargets {
	if r.queueFlavors == nil {
		r.queueFlavors = map[string][]string{}
		for _, j := range r.jobs {
			fl := j.Flavors
			if len(fl) == 0 {
				if q := r.snap.Queues[j.Queue]; q != nil {
					fl = q.Flavors
				}
			}
			for _, f := range fl {
				if !slices.Contains(r.queueFlavors[j.Queue], f) {
					r.queueFlavors[j.Queue] = append(r.queueFlavors[j.Queue], f)
				}
			}
		}
	}
	key := make([]bool, len(r.names))
	for i, q := range r.names {
		key[i] = r.queues.In(q) > 0
	}
	if r.targets != nil && slices.Equal(key, r.targetsFor) {
		return r.targets
	}
	var ds []admission.MoneyDemand
	for i, q := range r.names {
		if key[i] {
			ds = append(ds, admission.MoneyDemand{Queue: q, Weight: r.model.value[q], Flavors: r.queueFlavors[q]})
		}
	}
	units := map[admission.FlavorResource]int64{}
	for _, n := range r.model.Nodes {
		units[admission.FlavorResource{Flavor: n.Flavor, Resource: n.Resource}] += n.Free
	}
	r.targets, r.targetsFor = admission.NewMoneyTargets(ds, units, r.model.Rates), key
	return r.targets
}

// cycle runs one admission cycle.
func (r *replay) cycle() {
	// Nothing can start when the free GPUs are fewer than the smallest
	// pending job needs, unless a queue may preempt.
	var free int64
	for i := range r.snap.Nodes {
		free += r.snap.Nodes[i].Free
	}
	smallest := r.queues.Smallest()
	if r.opts.Gating && free < smallest && !r.mayReclaim() {
		return
	}
	switch {
	case r.viaWeights():
		r.controllerWeights()
		r.snap.Share = r.consumed.Shares(r.snap.Queues)
	case r.opts.Policy == "costfair" && r.loop == nil && r.opts.SettledSpend > 0:
		r.snap.Share = r.settledShares()
	case r.opts.Policy == "kueue-afs" || (r.opts.Policy == "costfair" && r.loop == nil):
		r.snap.Share = r.decayed.Shares(r.snap.Queues)
	}
	if r.opts.Policy == "costfair-drs" {
		// What gpuledger's controller would write into each
		// ClusterQueue's fairSharing.weight before Kueue's next cycle.
		for q, w := range admission.MoneyWeights(r.decayed.Values(), r.model.value) {
			r.snap.Queues[q].Weight = w
		}
	}
	r.snap.NowMs = r.now.Milliseconds()
	if r.opts.Gating {
		aopts := admission.Options{SameDomain: r.opts.SameDomain, Policy: r.policy, Terse: true}
		if r.opts.FlavorTargets {
			aopts.Targets = r.moneyTargets()
		}
		if r.opts.PreemptionRules == "kueue" {
			aopts.FairSharing = []admission.FairSharingStrategy{admission.LessThanOrEqualToFinalShare, admission.LessThanInitialShare}
		}
		if r.queues.Age(r.now.Milliseconds()) > 0 {
			// The aged go first. The oldest aged job that does not fit
			// keeps the GPUs it needs as they free up; the others may use
			// the rest (backfill without run-time estimates).
			ds := admission.AdmitInOrder(r.snap, r.queues.AgedStream(r.policy.QueueShares(r.snap)), aopts)
			r.apply(ds)
			var oldest *admission.Workload
			for _, d := range ds {
				if !d.Admitted && (oldest == nil || d.Workload.SubmittedMs < oldest.SubmittedMs) {
					oldest = d.Workload
				}
			}
			if oldest != nil {
				held := r.reserve(oldest.Units())
				defer r.unreserve(held)
			}
		}
		r.apply(admission.AdmitInOrder(r.snap, r.stream(), aopts))
		return
	}
	stream := r.queues.Stream(r.policy.QueueShares(r.snap))
	// Without gating there is no admission: every job's pods are created
	// at once and the scheduler places them as GPUs free up, in the
	// order the policy gives (Kubernetes without Kueue, or a Kueue whose
	// quotas exceed the GPUs that exist). Quota cannot hold back a gang
	// that does not fit: that is what gating is for.
	fr := r.ungated
	for {
		w := stream.Next()
		if w == nil {
			break
		}
		r.snap.Usage[w.Queue][fr] += w.Units()
		if pen, ok := r.policy.(admission.AdmissionPenalizer); ok {
			v := pen.Penalty(r.snap, w, fr.Flavor)
			r.snap.Share[w.Queue] += v / r.snap.Queues[w.Queue].Weight
			r.charge(w.Queue, v)
		}
		j := r.byID[w.ID]
		r.queues.Remove(w)
		j.admittedAt = r.now
		j.fr, j.rate = fr, r.model.Rates[fr]
		if !r.placeMore(j) {
			r.partial = append(r.partial, j)
		}
	}
}

// stream is the cycle's queued workloads in the policy's order; a
// LiveSharer's (Kueue's dominant resource share) follows the cycle's
// admissions, as Kueue's does.
func (r *replay) stream() admission.Pending {
	if ls, ok := r.policy.(admission.LiveSharer); ok {
		return r.queues.LiveStream(ls.QueueShares(r.snap), func(q string) float64 { return ls.QueueShare(r.snap, q) })
	}
	return r.queues.Stream(r.policy.QueueShares(r.snap))
}

// apply carries out a cycle's decisions: admitted jobs start, preempted
// ones stop and queue again.
func (r *replay) apply(ds []admission.Decision) {
	var victims []*replayJob
	pen, _ := r.policy.(admission.AdmissionPenalizer)
	for _, d := range ds {
		if !d.Admitted {
			continue
		}
		if pen != nil {
			// The snapshot's share has it for this cycle; the decayed
			// usage keeps it for the next.
			r.charge(d.Workload.Queue, pen.Penalty(r.snap, d.Workload, d.Flavor))
		}
		for _, p := range d.Preempted {
			victims = append(victims, r.preempt(p.Running))
		}
		j := r.byID[d.Workload.ID]
		nodes := make([]int, len(d.Nodes))
		for k, n := range d.Nodes {
			nodes[k] = r.nodeIdx[n]
		}
		j.running = d.Running
		j.fr = admission.FlavorResource{Flavor: d.Flavor, Resource: j.Resource}
		j.rate = r.model.Rates[j.fr]
		r.queues.Remove(d.Workload)
		r.start(j, nodes)
	}
	for _, v := range victims {
		r.enqueue(v)
	}
}

// mayReclaim says whether, with preemption, some queue with pending work
// holds less than its nominal quota while another borrows.
func (r *replay) mayReclaim() bool {
	if !r.opts.Preemption {
		return false
	}
	under, over := false, false
	for q, n := range r.model.nominal {
		u := r.held(q)
		under = under || (r.queues.In(q) > 0 && u < int64(n))
		over = over || u > int64(n)
	}
	return under && over || r.opts.PreemptionRules == "kueue" && over
}

// charge keeps an admission penalty for the next cycles' shares.
func (r *replay) charge(queue string, v float64) {
	if r.viaWeights() {
		r.consumed.Add(queue, v)
		return
	}
	if (r.loop != nil || r.opts.SettledSpend > 0) && r.opts.Policy == "costfair" {
		r.penalties.Add(queue, v)
		return
	}
	r.decayed.Add(queue, v)
}

// held is what a queue holds, all flavors.
func (r *replay) held(q string) int64 {
	var n int64
	for _, u := range r.snap.Usage[q] {
		n += u
	}
	return n
}

// preempt stops a preempted job (the snapshot has let it go already); it
// loses its progress. It returns the job to requeue.
func (r *replay) preempt(run *admission.Running) *replayJob {
	j := r.byID[run.Workload.ID]
	j.run.cancelled = true
	j.running = nil
	r.busyGPUs -= j.GPUs
	r.lostSec += float64(j.GPUs) * (r.now - j.start).Seconds()
	r.preempted++
	r.release(j)
	return j
}

// settle adds what queue spent from now to to, v spread evenly over the
// interval, to the trace hours it falls in (SettledSpend).
func (r *replay) settle(queue string, to time.Duration, v float64) {
	if r.opts.SettledSpend <= 0 || to <= r.now {
		return
	}
	if r.settled == nil {
		r.settled = map[string]map[int]float64{}
	}
	hours := r.settled[queue]
	if hours == nil {
		hours = map[int]float64{}
		r.settled[queue] = hours
	}
	perSec := v / (to - r.now).Seconds()
	for from := r.now; from < to; {
		h := from.Truncate(time.Hour)
		end := min(h+time.Hour, to)
		hours[int(h/time.Hour)] += perSec * (end - from).Seconds()
		from = end
	}
}

// settledSpend is each queue's spend at now over the trace hours that
// have ended, each decayed from its middle (admission.LedgerSpend).
func (r *replay) settledSpend() map[string]float64 {
	through := int(r.now / time.Hour)
	out := map[string]float64{}
	for q, hours := range r.settled {
		for h, c := range hours {
			if h < through {
				age := r.now - (time.Duration(h)*time.Hour + 30*time.Minute)
				out[q] += c * math.Exp2(-age.Seconds()/r.opts.HalfLife.Seconds())
			}
		}
	}
	return out
}

// settledShares is each queue's spend over its weight as the controller
// reads it at now: the hours that have ended, each decayed from its
// middle, as admission.LedgerSpend does, read again every SettledSpend.
func (r *replay) settledShares() map[string]float64 {
	if r.settledShare == nil || r.now >= r.nextSettled {
		spend := r.settledSpend()
		r.settledShare = make(map[string]float64, len(r.snap.Queues))
		for q, cq := range r.snap.Queues {
			r.settledShare[q] = spend[q] / cq.Weight
		}
		r.nextSettled = r.now.Truncate(r.opts.SettledSpend) + r.opts.SettledSpend
	}
	out := r.penalties.Shares(r.snap.Queues)
	for q, v := range r.settledShare {
		out[q] += v
	}
	return out
}

// viaWeights says whether costfair runs through Kueue's order and the
// controller's weights (ReplayOptions.ControllerWeights).
func (r *replay) viaWeights() bool {
	return r.opts.Policy == "costfair" && r.opts.ControllerWeights > 0 && r.opts.Ledger == nil
}

// controllerWeights sets the queues' weights as gpuledger's controller
// sets the LocalQueues' (admission/kube Weights), when they are due: the
// admission.UsageWeights of the queues' usage and money share (decayed
// spend, as SettledSpend reads it, over the quota's value), each written
// only past Hysteresis (admission.WeightChanged).
func (r *replay) controllerWeights() {
	if r.now < r.nextWeights {
		return
	}
	r.nextWeights = r.now.Truncate(r.opts.ControllerWeights) + r.opts.ControllerWeights
	spend := r.decayed.Values()
	if r.opts.SettledSpend > 0 {
		spend = r.settledSpend()
	}
	share := map[string]float64{}
	for _, q := range r.names {
		share[q] = spend[q] / r.model.value[q]
	}
	for q, w := range admission.UsageWeights(r.consumed.Values(), share) {
		if cq := r.snap.Queues[q]; admission.WeightChanged(cq.Weight, w, r.opts.Hysteresis) {
			cq.Weight = w
		}
	}
}
