package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
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

	ksm  [len(ksmFamilies)][]byte // the pod's kube-state-metrics series, rendered once
	vllm *vllmState               // an inference pod's vLLM series (vllm.go)
}

// NodeInfo is a node of the modelled cluster.
type NodeInfo struct {
	Name, Model, Flavor, Rack string
	GPUs                      int
	MIG                       []string
	// Devices are the node's schedulable units, GPU by GPU.
	Devices []*Device
}

// Cluster is the modelled cluster's nodes and devices (a Model's).
type Cluster struct {
	Name  string
	Nodes []*NodeInfo
	// Devices lists every device in node order.
	Devices []*Device
	// Workloads are the jobs Model.Run admitted or left pending, with
	// their times, for Kueue's queue series in the telemetry.
	Workloads []WorkloadTimes
}

// Stats summarises a Model.Run.
type Stats struct {
	Submitted, Admitted, Finished int
	// MeanWait is the mean time from submission to admission of the jobs
	// admitted.
	MeanWait time.Duration
	// Pending is the number of jobs still waiting at the end.
	Pending int
}

// Run admits and places jobs over [start, end) through the admission core
// with Kueue's defaults: BestEffortFIFO queues (priority, then creation;
// a workload that does not fit lets later ones go ahead), quotas with
// borrowing and lending limits in the cohort, flavors in each
// ClusterQueue's order, no preemption. Jobs are gangs, all or nothing: a
// job that fits on one node is one pod, a larger one is pods of whole
// nodes. Running jobs that pass end are cut at end; the devices' Holds are
// filled in, for the telemetry.
func (m *Model) Run(jobs []Job, start, end time.Time) (Stats, error) {
	var st Stats
	tj := make([]TraceJob, 0, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if !j.Submit.Before(end) {
			continue
		}
		st.Submitted++
		if j.Submit.Before(start) {
			return st, fmt.Errorf("job %s is submitted at %s, before the start %s", j.Name, j.Submit.Format(time.RFC3339), start.Format(time.RFC3339))
		}
		cq, ok := m.LocalQueues[j.Namespace+"/"+j.Queue]
		if !ok || m.Queues[cq] == nil {
			continue // no ClusterQueue: never admitted, as in Kueue
		}
		pods, perPod := 1, j.Count
		if j.Count > m.NodeUnits && m.NodeUnits > 0 {
			if j.Count%m.NodeUnits != 0 {
				return st, fmt.Errorf("job %s asks for %d × %s: more than a node has (%d) and not whole nodes", j.Name, j.Count, j.Resource, m.NodeUnits)
			}
			pods, perPod = j.Count/m.NodeUnits, m.NodeUnits
		}
		tj = append(tj, TraceJob{ID: j.Name, Queue: cq, Submit: j.Submit.Sub(start), Duration: j.Duration,
			GPUs: j.Count, Pods: pods, PerPod: perPod, Resource: j.Resource, Job: j})
	}
	sortJobs(tj)
	// Events at end belong to the next period.
	r, err := newReplay(m, tj, ReplayOptions{Policy: "fifo", Gating: true, Epoch: start, Limit: end.Sub(start) - time.Nanosecond, recordHolds: true})
	if err != nil {
		return st, err
	}
	if err := r.play(context.Background()); err != nil {
		return st, err
	}
	var waitSum time.Duration
	m.Cluster.Workloads = m.Cluster.Workloads[:0]
	for _, j := range r.jobs {
		wt := WorkloadTimes{ClusterQueue: j.Queue, GPUs: float64(j.GPUs) * migShare(j.Job.Profile()),
			WorkloadTime: ledger.WorkloadTime{Cluster: m.Cluster.Name, Namespace: j.Job.Namespace, Name: j.Job.Name, LocalQueue: j.Job.Queue,
				Resource: j.Job.Resource, Count: j.Job.Count, Submit: start.Add(j.Submit)}}
		if wt.Resource == "" {
			wt.Resource = config.ResourceGPU
		}
		if j.run != nil {
			st.Admitted++
			waitSum += j.start - j.Submit
			wt.Admit = start.Add(j.start)
			if finish := wt.Admit.Add(j.Duration); finish.Before(end) {
				wt.Finish = finish
			}
		}
		m.Cluster.Workloads = append(m.Cluster.Workloads, wt)
	}
	st.Finished = len(r.jcts)
	st.Pending = r.queues.Len() + r.queues.Deferred()
	if st.Admitted > 0 {
		st.MeanWait = waitSum / time.Duration(st.Admitted)
	}
	for _, d := range m.Cluster.Devices {
		for i := range d.Holds {
			if d.Holds[i].End.After(end) {
				d.Holds[i].End = end
			}
		}
	}
	return st, nil
}

// migShare is the share of a GPU one unit of a MIG profile is (its
// compute slices of 7), 1 for a whole GPU.
func migShare(profile string) float64 {
	if profile == "" {
		return 1
	}
	mp, err := attribution.ParseMIGProfile(profile)
	if err != nil {
		return 1
	}
	return float64(mp.ComputeSlices) / 7
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

// String describes the cluster for logs.
func (c *Cluster) String() string {
	gpus := 0
	for _, n := range c.Nodes {
		gpus += n.GPUs
	}
	return fmt.Sprintf("%s: %d nodes, %d GPUs, %d schedulable devices", c.Name, len(c.Nodes), gpus, len(c.Devices))
}
