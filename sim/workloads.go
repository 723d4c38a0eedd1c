package sim

import (
	"errors"
	"fmt"
	"time"
)

// WorkloadOptions pick what a replay side by side (gpuledger simulate)
// replays.
type WorkloadOptions struct {
	// Workload is philly (the VC traces), gavel (Gavel's mix on the
	// Philly VCs' queues), kueue-baseline or kueue-large (Kueue's
	// scheduler performance configurations).
	Workload string
	// Trace is the philly-pcs folder; VCs those replayed (default all).
	Trace string
	VCs   []string
	// MissingNodes is the node count of a VC the trace does not size; 0
	// leaves such VCs out.
	MissingNodes int
	// From and Span are the days of submissions replayed.
	From, Span time.Duration
	// OffsetSpread shifts each VC's clock by an offset drawn from Seed.
	OffsetSpread time.Duration
	Seed         uint64
	// GavelJobsPerHour is the gavel mix's arrival rate.
	GavelJobsPerHour float64
	// Load, when above 0, sizes the cluster so that the jobs' GPU demand
	// is this fraction of it; else Scale is the fraction of every quota.
	Load, Scale float64
}

// Workload is what LoadWorkload built.
type Workload struct {
	Queues []TraceQueue
	Jobs   []TraceJob
	// Scale is the fraction of every quota simulated; NodeSize the GPUs
	// of a node; SampleEvery the fairness sampling; Classes the wait
	// classes reported.
	Scale       float64
	NodeSize    int
	SampleEvery time.Duration
	Classes     []string
	// Preempts is whether the workload's own configuration preempts
	// (Kueue's do).
	Preempts bool
	// Summary says what is replayed, for the output's first line.
	Summary string
}

// LoadWorkload builds the queues and jobs of o.
func LoadWorkload(o WorkloadOptions) (*Workload, error) {
	w := &Workload{Scale: o.Scale, NodeSize: GPUsPerNode, SampleEvery: time.Hour, Classes: []string{"1", "2-4", "5-8", ">8"}}
	days := func(d time.Duration) float64 { return d.Hours() / 24 }
	var err error
	switch o.Workload {
	case "philly":
		po := PhillyOptions{From: o.From, To: o.From + o.Span, VCs: o.VCs, MissingNodes: o.MissingNodes, SkipUnlisted: o.MissingNodes == 0,
			OffsetSpread: o.OffsetSpread, OffsetSeed: o.Seed}
		if w.Queues, w.Jobs, err = LoadPhilly(o.Trace, po); err != nil {
			return nil, fmt.Errorf("%w; pass -trace with the philly-pcs folder", err)
		}
		if len(w.Jobs) == 0 {
			return nil, fmt.Errorf("no job was submitted between day %g and day %g; widen -from/-days", days(o.From), days(o.From+o.Span))
		}
		if o.Load > 0 {
			if w.Scale, err = ScaleForLoad(w.Queues, w.Jobs, o.Span, o.Load); err != nil {
				return nil, err
			}
		}
		w.Summary = fmt.Sprintf("Replaying %d jobs of %d queues (days %g to %g, %.1f%% of the quotas: offered load %.2f)", len(w.Jobs), len(w.Queues),
			days(o.From), days(o.From+o.Span), 100*w.Scale, OfferedGPUs(w.Jobs, o.Span)/(w.Scale*float64(QuotaGPUs(w.Queues))))
	case "gavel":
		if w.Queues, _, err = LoadPhilly(o.Trace, PhillyOptions{VCs: o.VCs, MissingNodes: o.MissingNodes, SkipUnlisted: o.MissingNodes == 0}); err != nil {
			return nil, fmt.Errorf("%w; pass -trace with the philly-pcs folder (for its queues)", err)
		}
		w.Jobs = Gavel(w.Queues, o.GavelJobsPerHour, o.Span, o.Seed)
		w.Summary = fmt.Sprintf("Replaying Gavel's mix: %d jobs over %g days at %g/h on %d queues (%.0f%% of the quotas), seed %d",
			len(w.Jobs), days(o.Span), o.GavelJobsPerHour, len(w.Queues), 100*w.Scale, o.Seed)
	case "kueue-baseline", "kueue-large":
		cfg := KueueBaseline
		if o.Workload == "kueue-large" {
			cfg = KueueLarge
		}
		w.Queues, w.Jobs = cfg.Generate()
		w.Scale, w.NodeSize, w.Classes = 1, 20, []string{"small", "medium", "large"}
		w.SampleEvery = time.Second // the configurations run for minutes
		// Kueue's configurations preempt (reclaimWithinCohort: Any,
		// withinClusterQueue: LowerPriority).
		w.Preempts = true
		w.Summary = fmt.Sprintf("Replaying Kueue's %s configuration: %d workloads in %d ClusterQueues", o.Workload, len(w.Jobs), len(w.Queues))
	default:
		return nil, fmt.Errorf("%w: %q; want philly, gavel, kueue-baseline or kueue-large", ErrWorkload, o.Workload)
	}
	return w, nil
}

// ErrWorkload is LoadWorkload's error for a workload it does not know.
var ErrWorkload = errors.New("unknown workload")
