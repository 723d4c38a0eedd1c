package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
)

// Simulation is what `gpuledger simulate` runs: a workload replayed under
// each policy with the same options.
type Simulation struct {
	Workload *Workload
	// Base are the options of every replay; Policy, CapacityScale,
	// NodeSize, SampleEvery and Isolated are set per run.
	Base     ReplayOptions
	Policies []string
	// FTF replays each queue alone on its quota first, for finish-time
	// fairness.
	FTF bool
	// Loop, when set, gives each policy's replay the ledger its
	// telemetry is attributed into (the closed loop) and the pipeline
	// that writes it; done is called when the replays are over.
	Loop func(policy string) (store ledger.Store, ingest IngesterFactory, done func() error, err error)
	// Progress is told how long each stage took.
	Progress io.Writer
}

// Run replays the policies in turn, writes the table to w and the results
// to out (simulate.json, simulate.csv).
func (s Simulation) Run(ctx context.Context, w io.Writer, out string) error {
	wl, base := s.Workload, s.Base
	base.CapacityScale, base.NodeSize, base.SampleEvery = wl.Scale, wl.NodeSize, wl.SampleEvery
	if s.FTF {
		began := time.Now()
		iso, err := IsolatedJCT(wl.Queues, wl.Jobs, ReplayOptions{CapacityScale: wl.Scale, NodeSize: wl.NodeSize, Flavors: base.Flavors})
		if err != nil {
			return err
		}
		base.Isolated = iso
		fmt.Fprintf(s.Progress, "each queue alone: %s\n", time.Since(began).Round(time.Millisecond))
	}
	var results []ReplayResult
	for _, p := range s.Policies {
		if err := ctx.Err(); err != nil {
			return err
		}
		began := time.Now()
		o := base
		o.Policy = p
		var done func() error
		if s.Loop != nil {
			var err error
			if o.Ledger, o.Ingest, done, err = s.Loop(p); err != nil {
				return err
			}
		}
		r, err := Replay(wl.Queues, wl.Jobs, o)
		if done != nil {
			err = errors.Join(err, done())
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(s.Progress, "%s: %s\n", p, time.Since(began).Round(time.Millisecond))
		results = append(results, r)
	}
	if err := WriteReplayTable(w, results, wl.Classes); err != nil {
		return err
	}
	jsonPath, csvPath, err := SaveReplayResults(out, results, wl.Classes)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s and %s\n", jsonPath, csvPath)
	return nil
}

// SimulateFlags are `gpuledger simulate`'s flags.
type SimulateFlags struct {
	Workload    WorkloadOptions
	Replay      ReplayOptions
	Policies    []string
	FTF, Loop   bool
	Out         string
	ClusterFile string
}

// Register registers the flags, each setting a field of f.
func (f *SimulateFlags) Register(fs *flag.FlagSet) {
	wo, o := &f.Workload, &f.Replay
	fs.StringVar(&wo.Workload, "workload", "philly", "what to replay: philly (the VC traces), gavel (Gavel's synthetic mix on the Philly VCs' queues), kueue-baseline or kueue-large (Kueue's scheduler performance configurations)")
	fs.Uint64Var(&wo.Seed, "seed", 1, "random seed of the gavel mix and of -philly.offsetDays; the same seed gives the same numbers")
	fs.Float64Var(&wo.GavelJobsPerHour, "gavel.jobsPerHour", 60, "arrival rate of the gavel mix, jobs per hour in all")
	fs.StringVar(&wo.Trace, "trace", "../shared/data/traces/philly-pcs", "folder of trace_<vc>.csv, philly_vc_nodes.csv and model_speedups.csv")
	flagutil.ListVar(fs, &wo.VCs, "vcs", "", "comma-separated VCs to replay (default: every trace_<vc>.csv)")
	fs.IntVar(&wo.MissingNodes, "philly.missingNodes", 0, "node count of a VC philly_vc_nodes.csv does not list (51b7ef); 0 leaves such VCs out, with a note")
	flagutil.DaysVar(fs, &wo.OffsetSpread, "philly.offsetDays", 0, "shift each VC's clock (which starts at its own first job) by an offset drawn from -seed in [0, this many days), so that which VCs overlap is not an artefact of all starting at day 0")
	fs.Float64Var(&wo.Load, "load", 0, "offered load: size the cluster so that the replayed jobs' GPU demand over their submission span is this fraction of it (overrides -scale); 0 uses -scale")
	flagutil.DaysVar(fs, &wo.From, "from", 30, "first day of the traces to replay (submit times are from each VC's first job)")
	flagutil.DaysVar(fs, &wo.Span, "days", 1, "how many days of submissions to replay")
	fs.Float64Var(&wo.Scale, "scale", 0.1, "fraction of every quota (and so of the cluster) to simulate; 1 is the VCs' real size")
	flagutil.ListVar(fs, &f.Policies, "policies", "fifo,kueue,kueue-afs,costfair", "comma-separated policies: fifo, kueue (fair sharing), kueue-afs (admission fair sharing), costfair, costfair-drs (kueue with money weights)")
	fs.BoolVar(&o.Gating, "gating", true, "admit gangs all or nothing; -gating=false places pods as GPUs free up")
	fs.DurationVar(&o.HalfLife, "halfLife", time.Hour, "half-life of the decayed usage kueue-afs and costfair weigh")
	fs.DurationVar(&o.ReadyTimeout, "readyTimeout", 0, "with -gating=false: evict a gang not fully placed this long after admission and requeue it with exponential backoff (Kueue's waitForPodsReady); 0 never")
	fs.StringVar(&f.Out, "out", "gpuledger-sim", "folder for simulate.json and simulate.csv")
	fs.BoolVar(&f.Loop, "loop", false, "close the loop: the cluster's GPUs emit dcgm-exporter telemetry every -scrape, ingest and attribution write each policy's hours to an embedded ledger in <out>/ledger-<policy>, and costfair reads its shares from it")
	fs.DurationVar(&o.ScrapeInterval, "scrape", time.Minute, "with -loop: the telemetry's scrape interval")
	fs.BoolVar(&o.Preemption, "preemption", false, "with -gating: queues reclaim their nominal quota from borrowers and lower priorities within a queue (kueue: Kueue's fair-sharing preemption, LessThanOrEqualToFinalShare then LessThanInitialShare; the others reclaim nominal quota only); on by default for the kueue-* workloads, whose configurations preempt")
	fs.StringVar(&o.Order, "order", "fifo", "order inside a queue: fifo (Kueue's: priority, then creation) or small-first (fewer GPUs first, through Workload priorities)")
	fs.DurationVar(&o.AgingAfter, "agingAfter", 0, "with -gating: a job waiting this long goes to the front of its queue, and the GPUs freeing up are reserved for it while it does not fit; 0 never")
	fs.StringVar(&o.PreemptionRules, "preemptionRules", "", "with -preemption: kueue (Kueue's fair-sharing strategies) or reclaim (take back nominal quota only); default kueue for the kueue policy, reclaim for the others")
	fs.Float64Var(&o.IdlePenalty, "idlePenalty", 0, "an experiment: costfair counts an idle GPU-hour (partial gangs' held GPUs) as 1+this GPU-hours of spend; without -loop")
	fs.BoolVar(&f.FTF, "ftf", true, "measure finish-time fairness: replay each queue alone on its quota first")
	fs.StringVar(&f.ClusterFile, "cluster", "", "the replay's flavors and prices (see examples/philly-replay.yaml): each flavor gets its share of every quota and of the nodes, queues try them in this order (several flavors need -gating); default one H100 flavor at the price book's aws/p5.48xlarge rate")
}
