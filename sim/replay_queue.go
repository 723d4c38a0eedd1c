// What the replay adds to admission's queues: the placement of ungated
// gangs, pod by pod, and their eviction when not ready in time.

package sim

import (
	"github.com/gpuledger/gpuledger/admission"
)

// enqueue queues a job in its queue, with the priority that orders it
// while it waits.
// submit offers a job at its submission time: into its queue, or with
// MaxPending into the queue's offered jobs, which releaseOffered lets in.
func (r *replay) submit(j *replayJob) {
	if r.offered == nil {
		r.enqueue(j)
		return
	}
	r.offered[j.Queue] = append(r.offered[j.Queue], j)
}

// canRelease says whether a queue with MaxPending has offered jobs and
// room for one.
func (r *replay) canRelease() bool {
	for q, js := range r.offered {
		if len(js) > 0 && r.unstarted[q] < r.opts.MaxPending {
			return true
		}
	}
	return false
}

// releaseOffered lets each queue's offered jobs into it, in submission
// order, while it has fewer than MaxPending that never started; they are
// ordered in it by when they entered.
func (r *replay) releaseOffered() {
	if r.offered == nil {
		return // no bound: submit enqueued every job
	}
	for _, q := range r.names {
		for len(r.offered[q]) > 0 && r.unstarted[q] < r.opts.MaxPending {
			j := r.offered[q][0]
			r.offered[q] = r.offered[q][1:]
			r.unstarted[q]++
			j.w.SubmittedMs = r.now.Milliseconds()
			r.enqueue(j)
		}
	}
}

func (r *replay) enqueue(j *replayJob) {
	j.w.Priority = j.queuePriority
	r.queues.Push(&j.w)
}

// progressPartial (without gating) places more pods of the admitted gangs,
// in admission order, starts the complete ones and evicts those not ready
// in time.
func (r *replay) progressPartial() {
	kept := r.partial[:0]
	for _, p := range r.partial {
		if r.opts.ReadyTimeout > 0 && r.now-p.admittedAt >= r.opts.ReadyTimeout {
			// Not ready in time: free its pods and quota, requeue later.
			for _, i := range p.placed {
				r.snap.Nodes[i].Free += p.w.PerPod
			}
			r.release(p)
			r.heldGPUs -= p.held
			r.snap.Usage[p.Queue][r.ungated] -= int64(p.GPUs)
			p.placed, p.held = p.placed[:0], 0
			p.requeues++
			r.evictions++
			p.w.Priority = p.queuePriority
			r.queues.Defer(&p.w, r.now.Milliseconds()+admission.Backoff(r.opts.BackoffBase.Milliseconds(), 0, p.requeues))
			continue
		}
		if !r.placeMore(p) {
			kept = append(kept, p)
		}
	}
	r.partial = kept
}

// placeMore places what fits of a partial gang's pods; when all are placed
// it starts the job and reports true.
func (r *replay) placeMore(j *replayJob) bool {
	from := len(j.placed)
	for j.held < j.GPUs {
		i := freestNode(r.snap.Nodes, j.w.PerPod)
		if i < 0 {
			break
		}
		r.snap.Nodes[i].Free -= j.w.PerPod
		j.placed = append(j.placed, i)
		j.held += int(j.w.PerPod)
		r.heldGPUs += int(j.w.PerPod)
	}
	if j.held < j.GPUs {
		r.hold(j, j.placed[from:], true)
		return false
	}
	// Complete: the waiting pods start with the rest.
	r.heldGPUs -= j.held
	r.release(j)
	r.start(j, j.placed)
	return true
}

// reserve takes up to n free GPUs out of the snapshot's nodes, fullest
// first, and returns what it took per node.
func (r *replay) reserve(n int64) map[int]int64 {
	held := map[int]int64{}
	for n > 0 {
		i := freestNode(r.snap.Nodes, 1)
		if i < 0 {
			break
		}
		k := min(r.snap.Nodes[i].Free, n)
		r.snap.Nodes[i].Free -= k
		held[i] += k
		n -= k
	}
	return held
}

func (r *replay) unreserve(held map[int]int64) {
	for i, k := range held {
		r.snap.Nodes[i].Free += k
	}
}

// freestNode returns the node with the most free units that takes n, or -1.
func freestNode(nodes []admission.Node, n int64) int {
	best := -1
	for i := range nodes {
		if nodes[i].Free >= n && (best < 0 || nodes[i].Free > nodes[best].Free) {
			best = i
		}
	}
	return best
}
