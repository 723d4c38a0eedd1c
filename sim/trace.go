package sim

import (
	"encoding/csv"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// TraceJob is one job of a trace: a gang of Pods pods of PerPod units each
// (GPUs, GPUs in all) that must all run at once for Duration, submitted at
// Submit (from the trace's start).
type TraceJob struct {
	ID       string
	Queue    string
	Submit   time.Duration
	Duration time.Duration
	GPUs     int
	Pods     int
	PerPod   int
	Priority int32
	// Class names the job's kind in the results; empty: by size.
	Class string
	// Resource is what its pods ask for; empty: nvidia.com/gpu.
	Resource string
	// Flavors, when set, are the only flavors it may run on (what its
	// model needs: an H100's memory, say); empty: any.
	Flavors []string
	// Model is the Gavel job type it trains, for flavors that run at
	// Gavel's per-model throughputs; empty: one drawn by its ID.
	Model string
	// Idle is the share of the GPU time it holds that its GPUs sit idle
	// (a notebook between cells, an endpoint without traffic), 0 to 1:
	// costfair counts that time at 1 + IdlePenalty, and IdlePaidGPUHours
	// counts it while others wait. Without the ledger loop only.
	Idle float64
	// Job, when set, is who runs it in the telemetry (namespace,
	// LocalQueue, kind); without one the replay makes one up.
	Job *Job
}

// TraceQueue is a queue of a trace with its nominal quota in GPUs.
type TraceQueue struct {
	Name        string
	NominalGPUs int
	// Cohort is the queue's cohort; BorrowingLimit < 0 means none.
	Cohort         string
	BorrowingLimit int
}

// sortJobs orders jobs by submission time, then ID.
func sortJobs(jobs []TraceJob) {
	slices.SortStableFunc(jobs, func(a, b TraceJob) int {
		if a.Submit != b.Submit {
			return int(a.Submit - b.Submit)
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(recs) < 1 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return recs, nil
}
