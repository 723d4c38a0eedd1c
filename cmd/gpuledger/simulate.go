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
	w, err := sim.LoadWorkload(sim.WorkloadOptions{Workload: *workload, Trace: *trace, VCs: splitList(*vcList), MissingNodes: *missingNodes,
		From: days2d(*fromDay), Span: days2d(*days), OffsetSpread: days2d(*offsetDays), Seed: *seed, GavelJobsPerHour: *rate, Load: *load, Scale: *scale})
	if errors.Is(err, sim.ErrWorkload) {
		return usageError{"-workload: " + err.Error()}
	} else if err != nil {
		return err
	}
	// Kueue's configurations preempt unless told otherwise.
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "preemption" })
	if !set && w.Preempts {
		*preemption = true
	}
	fmt.Fprintf(stdout, "%s, gating %v, preemption %v.\n\n", w.Summary, *gating, *preemption)
	queues, jobs := w.Queues, w.Jobs
	flavors, err := sim.LoadReplayFlavors(*clusterFile)
	if err != nil {
		return err
	}
	var isolated map[string]float64
	if *ftf {
		began := time.Now()
		if isolated, err = sim.IsolatedJCT(queues, jobs, sim.ReplayOptions{CapacityScale: w.Scale, NodeSize: w.NodeSize, Flavors: flavors}); err != nil {
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
		ropts := sim.ReplayOptions{Policy: p, Gating: *gating, HalfLife: *halfLife, CapacityScale: w.Scale,
			NodeSize: w.NodeSize, ReadyTimeout: *readyTimeout, Preemption: *preemption, IdlePenalty: *idlePenalty, Isolated: isolated,
			ScrapeInterval: *scrape, SampleEvery: w.SampleEvery, Flavors: flavors, Order: *order, AgingAfter: *agingAfter, PreemptionRules: *preemptionRules}
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
	if err := sim.WriteReplayTable(stdout, results, w.Classes); err != nil {
		return err
	}
	jsonPath, csvPath, err := sim.SaveReplayResults(*out, results, w.Classes)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s and %s\n", jsonPath, csvPath)
	return nil
}
