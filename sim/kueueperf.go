package sim

import (
	"fmt"
	"time"
)

// KueuePerf is the shape of Kueue's scheduler performance tests
// (kubernetes-sigs/kueue test/performance/scheduler/configs): cohorts of
// ClusterQueues with a nominal quota and a borrowing limit, each queue
// receiving sets of one-pod workloads created at a fixed interval.
type KueuePerf struct {
	Cohorts, QueuesPerCohort int
	Nominal, BorrowingLimit  int
	Sets                     []KueueWorkloadSet
}

// KueueWorkloadSet is one class of workloads of each queue.
type KueueWorkloadSet struct {
	Class    string
	Count    int
	Interval time.Duration
	Runtime  time.Duration
	Priority int32
	Request  int
}

// KueueBaseline is Kueue's baseline configuration: 5 cohorts × 6 queues,
// nominal 20, borrowing limit 100, 500 workloads a queue. Kueue's recorded
// results for it (configs/baseline/rangespec.yaml, five runs): queue usage
// 58.7%, average time to admission small 215 s, medium 77 s, large 6.7 s.
var KueueBaseline = KueuePerf{Cohorts: 5, QueuesPerCohort: 6, Nominal: 20, BorrowingLimit: 100, Sets: []KueueWorkloadSet{
	{Class: "small", Count: 350, Interval: 100 * time.Millisecond, Runtime: 200 * time.Millisecond, Priority: 50, Request: 1},
	{Class: "medium", Count: 100, Interval: 500 * time.Millisecond, Runtime: 500 * time.Millisecond, Priority: 100, Request: 5},
	{Class: "large", Count: 50, Interval: 1200 * time.Millisecond, Runtime: time.Second, Priority: 200, Request: 20},
}}

// KueueLarge is Kueue's large-scale configuration: 20 cohorts × 100 queues,
// 30 workloads a queue, 60,000 in all.
var KueueLarge = KueuePerf{Cohorts: 20, QueuesPerCohort: 100, Nominal: 20, BorrowingLimit: 100, Sets: []KueueWorkloadSet{
	{Class: "small", Count: 20, Interval: 20 * time.Millisecond, Runtime: 50 * time.Millisecond, Priority: 50, Request: 1},
	{Class: "medium", Count: 7, Interval: 50 * time.Millisecond, Runtime: 100 * time.Millisecond, Priority: 100, Request: 5},
	{Class: "large", Count: 3, Interval: 200 * time.Millisecond, Runtime: 200 * time.Millisecond, Priority: 200, Request: 20},
}}

// Generate returns the queues and the workloads, sorted by creation time.
func (k KueuePerf) Generate() ([]TraceQueue, []TraceJob) {
	var queues []TraceQueue
	var jobs []TraceJob
	for c := range k.Cohorts {
		for q := range k.QueuesPerCohort {
			name := fmt.Sprintf("cohort-%d-cq-%d", c, q)
			queues = append(queues, TraceQueue{Name: name, NominalGPUs: k.Nominal, Cohort: fmt.Sprintf("cohort-%d", c), BorrowingLimit: k.BorrowingLimit})
			for _, set := range k.Sets {
				for i := range set.Count {
					jobs = append(jobs, TraceJob{ID: fmt.Sprintf("%s-%s-%d", name, set.Class, i), Queue: name,
						Submit: time.Duration(i) * set.Interval, Duration: set.Runtime, GPUs: set.Request, Pods: 1, PerPod: set.Request,
						Priority: set.Priority, Class: set.Class})
				}
			}
		}
	}
	sortJobs(jobs)
	return queues, jobs
}
