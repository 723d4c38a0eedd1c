package sim

import (
	"container/heap"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/config"
)

// Device is one schedulable GPU unit: a whole GPU, or one MIG instance.
type Device struct {
	Node     *NodeInfo
	GPU      int    // index on the node
	Profile  string // MIG profile; "" for a whole GPU
	Instance int    // GPU_I_ID; 0 for a whole GPU
	// Holds lists who held the device, in time order.
	Holds []Hold
}

// Hold is one pod's use of a device.
type Hold struct {
	Start, End time.Time
	Job        *Job
	Pod        string
	Container  string
	// PodDevices is how many devices the pod holds (its GPU request).
	PodDevices int
	// Waiting: the pod holds the device but its gang has not started
	// (placed without gang gating): the device idles.
	Waiting bool

	ksm [len(ksmFamilies)][]byte // the pod's kube-state-metrics series, rendered once
}

// NodeInfo is a node of the modelled cluster.
type NodeInfo struct {
	Name, Model, Flavor, Rack string
	GPUs                      int
	MIG                       []string
	// Devices are the node's schedulable units, GPU by GPU.
	Devices []*Device
}

// Cluster is the modelled cluster: nodes, devices and queues.
type Cluster struct {
	Name  string
	Nodes []*NodeInfo
	// Devices lists every device in node order.
	Devices []*Device
	cfg     *config.Config
}

// NewCluster builds the model of one configured cluster.
func NewCluster(cfg *config.Config, cluster string) (*Cluster, error) {
	cl, err := cfg.Cluster(cluster)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: cl.Name, cfg: cfg}
	for _, n := range cl.Nodes {
		ni := &NodeInfo{Name: n.Name, Model: n.GPUModel, Flavor: n.Flavor, Rack: n.Rack, GPUs: n.GPUs, MIG: n.MIG}
		for g := 0; g < n.GPUs; g++ {
			if len(n.MIG) == 0 {
				ni.Devices = append(ni.Devices, &Device{Node: ni, GPU: g})
				continue
			}
			for i, p := range n.MIG {
				ni.Devices = append(ni.Devices, &Device{Node: ni, GPU: g, Profile: p, Instance: i + 1})
			}
		}
		c.Nodes = append(c.Nodes, ni)
		c.Devices = append(c.Devices, ni.Devices...)
	}
	return c, nil
}

// Stats summarises a Run.
type Stats struct {
	Submitted, Admitted, Finished int
	// MeanWait is the mean time from submission to admission of the jobs
	// admitted.
	MeanWait time.Duration
	// Pending is the number of jobs still waiting at the end.
	Pending int
}

type cqState struct {
	cfg     *config.ClusterQueue
	pending []*Job
	flavors []string
}

type running struct {
	end  time.Time
	job  *Job
	cq   *cqState
	key  admission.FlavorResource
	devs []*Device
}

// quotaSnapshot holds the configured ClusterQueues with Kueue's quota
// rules, as package admission applies them.
func quotaSnapshot(cfg *config.Config) *admission.Snapshot {
	snap := &admission.Snapshot{Queues: map[string]*admission.ClusterQueue{}, Usage: map[string]map[admission.FlavorResource]int64{}}
	limit := func(p *int) int64 {
		if p == nil {
			return -1
		}
		return int64(*p)
	}
	for _, q := range cfg.ClusterQueues {
		aq := &admission.ClusterQueue{Name: q.Name, Cohort: q.Cohort, Quotas: map[admission.FlavorResource]admission.Quota{}}
		for _, fq := range q.Flavors {
			aq.Flavors = append(aq.Flavors, fq.Name)
			for _, r := range fq.Resources {
				aq.Quotas[admission.FlavorResource{Flavor: fq.Name, Resource: r.Name}] = admission.Quota{
					Nominal: int64(r.NominalQuota), BorrowingLimit: limit(r.BorrowingLimit), LendingLimit: limit(r.LendingLimit)}
			}
		}
		snap.Queues[q.Name] = aq
		snap.Usage[q.Name] = map[admission.FlavorResource]int64{}
	}
	return snap
}

type endHeap []*running

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(*running)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run admits and places jobs over [start, end) with BestEffortFIFO queues
// (Kueue's default queueing strategy): each ClusterQueue goes through its
// pending jobs oldest first and admits every one that fits in the queue's
// nominal quota plus what it may borrow from its cohort (Kueue's
// borrowingLimit and lendingLimit), and free devices of the flavor exist.
// Flavors are tried in the ClusterQueue's order. Jobs are all-or-nothing:
// every GPU a job needs is held from one instant. Running jobs that pass end
// are cut at end. Device Holds are filled in.
func (c *Cluster) Run(jobs []Job, start, end time.Time) Stats {
	lqs := make(map[string]string) // namespace/name → ClusterQueue
	for _, lq := range c.cfg.LocalQueues {
		lqs[lq.Namespace+"/"+lq.Name] = lq.ClusterQueue
	}
	quota := quotaSnapshot(c.cfg)
	cqs := make(map[string]*cqState)
	var cqOrder []*cqState
	for i := range c.cfg.ClusterQueues {
		q := &c.cfg.ClusterQueues[i]
		s := &cqState{cfg: q}
		for _, fq := range q.Flavors {
			s.flavors = append(s.flavors, fq.Name)
		}
		cqs[q.Name] = s
		cqOrder = append(cqOrder, s)
	}
	free := make(map[*Device]bool, len(c.Devices))
	for _, d := range c.Devices {
		free[d] = true
	}

	var st Stats
	var waitSum time.Duration
	var ends endHeap
	next := 0
	now := start
	for {
		// Next event: a submission or a completion.
		t := end
		if next < len(jobs) && jobs[next].Submit.Before(t) {
			t = jobs[next].Submit
		}
		if len(ends) > 0 && ends[0].end.Before(t) {
			t = ends[0].end
		}
		if !t.Before(end) {
			break
		}
		now = t
		for len(ends) > 0 && !ends[0].end.After(now) {
			r := heap.Pop(&ends).(*running)
			quota.Usage[r.cq.cfg.Name][r.key] -= int64(r.job.Count)
			for _, d := range r.devs {
				free[d] = true
			}
			st.Finished++
		}
		for next < len(jobs) && !jobs[next].Submit.After(now) {
			j := &jobs[next]
			next++
			st.Submitted++
			if q := cqs[lqs[j.Namespace+"/"+j.Queue]]; q != nil {
				q.pending = append(q.pending, j)
			}
		}
		for admitted := true; admitted; {
			admitted = false
			for _, q := range cqOrder {
				kept := q.pending[:0]
				for _, j := range q.pending {
					r := c.tryAdmit(quota, q, j, free)
					if r == nil {
						kept = append(kept, j)
						continue
					}
					r.end = now.Add(j.Duration)
					perPod := make(map[string]int)
					for i, d := range r.devs {
						perPod[podName(j, d, r.devs, i)]++
					}
					for i, d := range r.devs {
						pod := podName(j, d, r.devs, i)
						d.Holds = append(d.Holds, Hold{Start: now, End: r.end, Job: j,
							Pod: pod, Container: containerName(j.Kind), PodDevices: perPod[pod]})
					}
					heap.Push(&ends, r)
					st.Admitted++
					waitSum += now.Sub(j.Submit)
					admitted = true
				}
				q.pending = kept
			}
		}
	}
	for _, q := range cqOrder {
		st.Pending += len(q.pending)
	}
	for _, d := range c.Devices {
		for i := range d.Holds {
			if d.Holds[i].End.After(end) {
				d.Holds[i].End = end
			}
		}
	}
	if st.Admitted > 0 {
		st.MeanWait = waitSum / time.Duration(st.Admitted)
	}
	return st
}

// podName gives one pod per node a job runs on, as a PyTorchJob or JobSet
// would: <job>-<n>.
func podName(j *Job, d *Device, devs []*Device, i int) string {
	n := 0
	for k := 1; k <= i; k++ {
		if devs[k].Node != devs[k-1].Node {
			n++
		}
	}
	return j.Name + "-" + strconv.Itoa(n)
}

func containerName(k Kind) string {
	switch k {
	case KindNotebook:
		return "notebook"
	case KindInference:
		return "vllm"
	}
	return "trainer"
}

// tryAdmit returns the job's placement if its ClusterQueue may admit it
// now: within quota (admission's rules, borrowing in the cohort) and onto
// free devices, in the queue's flavor order.
func (c *Cluster) tryAdmit(quota *admission.Snapshot, q *cqState, j *Job, free map[*Device]bool) *running {
	for _, f := range q.flavors {
		k := admission.FlavorResource{Flavor: f, Resource: j.Resource}
		if quota.FitsQuota(q.cfg.Name, k, int64(j.Count)) != "" {
			continue
		}
		devs := c.place(f, j, free)
		if devs == nil {
			continue
		}
		for _, d := range devs {
			free[d] = false
		}
		quota.Usage[q.cfg.Name][k] += int64(j.Count)
		return &running{job: j, cq: q, key: k, devs: devs}
	}
	return nil
}

// place picks devices of flavor f for j: whole GPUs best-fit on one node
// when the job fits on a node, else whole nodes; MIG instances first-fit.
func (c *Cluster) place(f string, j *Job, free map[*Device]bool) []*Device {
	prof := j.Profile()
	type cand struct {
		n    *NodeInfo
		devs []*Device
	}
	var cands []cand
	for _, n := range c.Nodes {
		if n.Flavor != f {
			continue
		}
		var devs []*Device
		for _, d := range n.Devices {
			if free[d] && d.Profile == prof {
				devs = append(devs, d)
			}
		}
		if len(devs) > 0 {
			cands = append(cands, cand{n, devs})
		}
	}
	if prof != "" {
		var out []*Device
		for _, cd := range cands {
			for _, d := range cd.devs {
				if len(out) < j.Count {
					out = append(out, d)
				}
			}
		}
		if len(out) < j.Count {
			return nil
		}
		return out
	}
	// Best fit on one node.
	sort.SliceStable(cands, func(a, b int) bool { return len(cands[a].devs) < len(cands[b].devs) })
	for _, cd := range cands {
		if len(cd.devs) >= j.Count {
			return cd.devs[:j.Count]
		}
	}
	// Spread over whole free nodes, fullest-free first.
	var out []*Device
	for i := len(cands) - 1; i >= 0 && len(out) < j.Count; i-- {
		cd := cands[i]
		if len(cd.devs) == cd.n.GPUs {
			out = append(out, cd.devs[:min(len(cd.devs), j.Count-len(out))]...)
		}
	}
	if len(out) < j.Count {
		return nil
	}
	return out
}

// String describes the cluster for logs.
func (c *Cluster) String() string {
	gpus := 0
	for _, n := range c.Nodes {
		gpus += n.GPUs
	}
	return fmt.Sprintf("%s: %d nodes, %d GPUs, %d schedulable devices", c.Name, len(c.Nodes), gpus, len(c.Devices))
}
