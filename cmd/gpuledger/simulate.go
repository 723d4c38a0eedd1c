package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/sim"
)

func runSimulate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("simulate", stdout)
	workload := fs.String("workload", "philly", "what to replay: philly (the VC traces), gavel (Gavel's synthetic mix on the Philly VCs' queues), kueue-baseline or kueue-large (Kueue's scheduler performance configurations)")
	seed := fs.Uint64("seed", 1, "random seed of the gavel mix and of -philly.offsetDays; the same seed gives the same numbers")
	rate := fs.Float64("gavel.jobsPerHour", 60, "arrival rate of the gavel mix, jobs per hour in all")
	trace := fs.String("trace", "../shared/data/traces/philly-pcs", "folder of trace_<vc>.csv, philly_vc_nodes.csv and model_speedups.csv")
	vcList := fs.String("vcs", "", "comma-separated VCs to replay (default: every trace_<vc>.csv)")
	missingNodes := fs.Int("philly.missingNodes", 0, "node count of a VC philly_vc_nodes.csv does not list (51b7ef); 0 leaves such VCs out, with a note")
	offsetDays := fs.Float64("philly.offsetDays", 0, "shift each VC's clock (which starts at its own first job) by an offset drawn from -seed in [0, this many days), so that which VCs overlap is not an artefact of all starting at day 0")
	load := fs.Float64("load", 0, "offered load: size the cluster so that the replayed jobs' GPU demand over their submission span is this fraction of it (overrides -scale); 0 uses -scale")
	fromDay := fs.Float64("from", 30, "first day of the traces to replay (submit times are from each VC's first job)")
	days := fs.Float64("days", 1, "how many days of submissions to replay")
	scale := fs.Float64("scale", 0.1, "fraction of every quota (and so of the cluster) to simulate; 1 is the VCs' real size")
	policies := fs.String("policies", "fifo,kueue,kueue-afs,costfair", "comma-separated policies: fifo, kueue (fair sharing), kueue-afs (admission fair sharing), costfair, costfair-drs (kueue with money weights)")
	gating := fs.Bool("gating", true, "admit gangs all or nothing; -gating=false places pods as GPUs free up")
	halfLife := fs.Duration("halfLife", time.Hour, "half-life of the decayed usage kueue-afs and costfair weigh")
	readyTimeout := fs.Duration("readyTimeout", 0, "with -gating=false: evict a gang not fully placed this long after admission and requeue it with exponential backoff (Kueue's waitForPodsReady); 0 never")
	out := fs.String("out", "gpuledger-sim", "folder for simulate.json and simulate.csv")
	loop := fs.Bool("loop", false, "close the loop: the cluster's GPUs emit dcgm-exporter telemetry every -scrape, ingest and attribution write each policy's hours to an embedded ledger in <out>/ledger-<policy>, and costfair reads its shares from it")
	scrape := fs.Duration("scrape", time.Minute, "with -loop: the telemetry's scrape interval")
	preemption := fs.Bool("preemption", false, "with -gating: queues reclaim their nominal quota from borrowers and lower priorities within a queue (kueue: Kueue's fair-sharing preemption, LessThanOrEqualToFinalShare then LessThanInitialShare; the others reclaim nominal quota only); on by default for the kueue-* workloads, whose configurations preempt")
	order := fs.String("order", "fifo", "order inside a queue: fifo (Kueue's: priority, then creation) or small-first (fewer GPUs first, through Workload priorities)")
	agingAfter := fs.Duration("agingAfter", 0, "with -gating: a job waiting this long goes to the front of its queue, and the GPUs freeing up are reserved for it while it does not fit; 0 never")
	preemptionRules := fs.String("preemptionRules", "", "with -preemption: kueue (Kueue's fair-sharing strategies) or reclaim (take back nominal quota only); default kueue for the kueue policy, reclaim for the others")
	idlePenalty := fs.Float64("idlePenalty", 0, "an experiment: costfair counts an idle GPU-hour (partial gangs' held GPUs) as 1+this GPU-hours of spend; without -loop")
	ftf := fs.Bool("ftf", true, "measure finish-time fairness: replay each queue alone on its quota first")
	clusterFile := fs.String("cluster", "", "the replay's flavors and prices (see examples/philly-replay.yaml): each flavor gets its share of every quota and of the nodes, queues try them in this order (several flavors need -gating); default one H100 flavor at the price book's aws/p5.48xlarge rate")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var queues []sim.TraceQueue
	var jobs []sim.TraceJob
	nodeSize := sim.GPUsPerNode
	sampleEvery := time.Hour
	classes := []string{"1", "2-4", "5-8", ">8"}
	switch *workload {
	case "philly":
		from := time.Duration(*fromDay * 24 * float64(time.Hour))
		to := from + time.Duration(*days*24*float64(time.Hour))
		var err error
		po := sim.PhillyOptions{From: from, To: to, VCs: splitList(*vcList), MissingNodes: *missingNodes, SkipUnlisted: *missingNodes == 0,
			OffsetSpread: time.Duration(*offsetDays * 24 * float64(time.Hour)), OffsetSeed: *seed}
		if queues, jobs, err = sim.LoadPhilly(*trace, po); err != nil {
			return fmt.Errorf("%w; pass -trace with the philly-pcs folder", err)
		}
		if len(jobs) == 0 {
			return usageError{fmt.Sprintf("no job was submitted between day %g and day %g; widen -from/-days", *fromDay, *fromDay+*days)}
		}
		if *load > 0 {
			if *scale, err = sim.ScaleForLoad(queues, jobs, to-from, *load); err != nil {
				return usageError{err.Error()}
			}
		}
		fmt.Fprintf(stdout, "Replaying %d jobs of %d queues (days %g to %g, %.1f%% of the quotas: offered load %.2f), gating %v.\n\n",
			len(jobs), len(queues), *fromDay, *fromDay+*days, 100**scale, sim.OfferedGPUs(jobs, to-from)/(*scale*float64(sim.QuotaGPUs(queues))), *gating)
	case "gavel":
		var err error
		if queues, _, err = sim.LoadPhilly(*trace, sim.PhillyOptions{VCs: splitList(*vcList), MissingNodes: *missingNodes, SkipUnlisted: *missingNodes == 0}); err != nil {
			return fmt.Errorf("%w; pass -trace with the philly-pcs folder (for its queues)", err)
		}
		jobs = sim.Gavel(queues, *rate, time.Duration(*days*24*float64(time.Hour)), *seed)
		fmt.Fprintf(stdout, "Replaying Gavel's mix: %d jobs over %g days at %g/h on %d queues (%.0f%% of the quotas), seed %d, gating %v.\n\n",
			len(jobs), *days, *rate, len(queues), 100**scale, *seed, *gating)
	case "kueue-baseline", "kueue-large":
		cfg := sim.KueueBaseline
		if *workload == "kueue-large" {
			cfg = sim.KueueLarge
		}
		queues, jobs = cfg.Generate()
		*scale, nodeSize, classes = 1, 20, []string{"small", "medium", "large"}
		sampleEvery = time.Second // the configurations run for minutes
		// Kueue's configurations preempt (reclaimWithinCohort: Any,
		// withinClusterQueue: LowerPriority) unless told otherwise.
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "preemption" })
		if !set {
			*preemption = true
		}
		fmt.Fprintf(stdout, "Replaying Kueue's %s configuration: %d workloads in %d ClusterQueues, preemption %v.\n\n", *workload, len(jobs), len(queues), *preemption)
	default:
		return usageError{fmt.Sprintf("-workload=%q: want philly, kueue-baseline or kueue-large", *workload)}
	}
	flavors, err := sim.LoadReplayFlavors(*clusterFile)
	if err != nil {
		return err
	}
	var isolated map[string]float64
	if *ftf {
		began := time.Now()
		if isolated, err = sim.IsolatedJCT(queues, jobs, sim.ReplayOptions{CapacityScale: *scale, NodeSize: nodeSize, Flavors: flavors}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "each queue alone: %s\n", time.Since(began).Round(time.Millisecond))
	}
	var results []sim.ReplayResult
	for _, p := range splitList(*policies) {
		if err := ctx.Err(); err != nil {
			return err
		}
		began := time.Now()
		ropts := sim.ReplayOptions{Policy: p, Gating: *gating, HalfLife: *halfLife, CapacityScale: *scale,
			NodeSize: nodeSize, ReadyTimeout: *readyTimeout, Preemption: *preemption, IdlePenalty: *idlePenalty, Isolated: isolated,
			ScrapeInterval: *scrape, SampleEvery: sampleEvery, Flavors: flavors, Order: *order, AgingAfter: *agingAfter, PreemptionRules: *preemptionRules}
		if *loop {
			dir := filepath.Join(*out, "ledger-"+p)
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			store, err := embedded.Open(dir, embedded.Options{})
			if err != nil {
				return err
			}
			ropts.Ledger = store
			ropts.Ingest = func(m *attribution.Model, o attribution.Options, now func() time.Time) (sim.Ingester, error) {
				return ingest.NewPipeline(m, o, store, ingest.PipelineOptions{ReorderWindow: -1, Now: now})
			}
			defer store.Close()
		}
		r, err := sim.Replay(queues, jobs, ropts)
		if err != nil {
			if errors.Is(err, admission.ErrPolicy) {
				return usageError{err.Error()}
			}
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", p, time.Since(began).Round(time.Millisecond))
		results = append(results, r)
	}
	if err := sim.WriteReplayTable(stdout, results, classes); err != nil {
		return err
	}
	jsonPath, csvPath, err := sim.SaveReplayResults(*out, results, classes)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s and %s\n", jsonPath, csvPath)
	return nil
}
