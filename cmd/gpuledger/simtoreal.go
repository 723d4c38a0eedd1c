package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/sim/simtoreal"
)

func runSimToReal(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("sim-to-real", stdout)
	trace := fs.String("trace", "../shared/data/traces/philly-pcs", "folder of the Philly-derived traces")
	vcs := fs.String("vcs", "6214e9,11cb48,2869ce,ed69ec,b436b2,7f04ca,0e4a51", "VCs replayed (teams)")
	fromDay := fs.Float64("from", 30, "first day of submissions replayed, on the aligned clock")
	hours := fs.Float64("hours", 12, "hours of submissions replayed")
	offsetDays := fs.Float64("offsetDays", 30, "each VC's clock is shifted by an offset drawn from -seed in [0, this many days)")
	seed := fs.Uint64("seed", 1, "seed of the VCs' offsets and of the gavel mix")
	workload := fs.String("workload", "philly", "philly (the VCs' jobs), gavel (Gavel's synthetic mix on the same VCs) or mechanism (four teams pinned to flavors by what their models need, all backlogged, on the scenario's own cluster: -vcs, -from, -offsetDays, -load and -cluster are unused, -hours is its span)")
	gavelRate := fs.Float64("gavel.jobsPerHour", 30, "arrival rate of the gavel mix")
	load := fs.Float64("load", 0.95, "offered load: the window's GPU demand over the ClusterQueue's GPUs")
	clusterFile := fs.String("cluster", "examples/philly-replay.yaml", "flavors and prices (see examples/philly-replay.yaml)")
	speedup := fs.Float64("speedup", 240, "trace seconds per real second: Kueue requeues waiting workloads once a real second, so keep a second small against the jobs' durations")
	limitHours := fs.Float64("limit", 18, "trace hours after the window's start at which both runs stop")
	halfLife := fs.Duration("halfLife", 6*time.Hour, "half-life of the decayed usage and spend (trace clock)")
	sampling := fs.Duration("sampling", time.Second, "Kueue's usageSamplingInterval (real clock); × -speedup is the simulator's admission penalty")
	weightInterval := fs.Duration("weightInterval", 10*time.Minute, "how often the controller sets the weights (trace clock)")
	policies := fs.String("policies", "kueue-afs,costfair", "policies to compare: kueue (a ClusterQueue without Admission Fair Sharing: BestEffortFIFO), kueue-afs, costfair, costfair+targets (costfair whose AdmissionCheck also keeps each team to its money-fair share of every flavor)")
	worlds := fs.String("worlds", "sim,kueue", "where to replay: sim (the simulator), kueue (a real Kueue), or both")
	interactive := fs.Float64("mechanism.interactive", 0, "with -workload mechanism: the share of research's jobs that are notebooks holding one GPU 80% idle")
	idlePenalty := fs.Float64("idlePenalty", 0, "an experiment: the simulator's costfair counts an idle GPU-hour as 1+this GPU-hours of spend (the real controller has no such penalty)")
	runs := fs.Int("runs", 1, "real runs of each policy (min/median/max over them)")
	out := fs.String("out", "gpuledger-sim/sim-to-real", "folder for the stacks' logs and the outcomes (outcomes.csv)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := simtoreal.Options{Trace: *trace, VCs: splitList(*vcs), From: days2d(*fromDay), Span: time.Duration(*hours * float64(time.Hour)),
		OffsetSpread: days2d(*offsetDays), Seed: *seed, Workload: *workload, GavelJobsPerHour: *gavelRate, Load: *load, ClusterFile: *clusterFile,
		Speedup: *speedup, Limit: time.Duration(*limitHours * float64(time.Hour)), HalfLife: *halfLife, Sampling: *sampling,
		WeightInterval: *weightInterval, Policies: splitList(*policies), Runs: *runs, Interactive: *interactive, IdlePenalty: *idlePenalty,
		Out: *out, Command: "gpuledger sim-to-real " + strings.Join(args, " "), Progress: os.Stderr}
	for _, w := range splitList(*worlds) {
		if w != "sim" && w != "kueue" {
			return usageError{fmt.Sprintf("-worlds item %q: want sim or kueue", w)}
		}
		o.Real = o.Real || w == "kueue"
	}
	if !slices.Contains(simtoreal.Workloads, *workload) {
		return usageError{fmt.Sprintf("-workload %q: want one of %s", *workload, strings.Join(simtoreal.Workloads, ", "))}
	}
	for _, p := range o.Policies {
		if o.Real && !slices.Contains(simtoreal.Policies, p) {
			return usageError{fmt.Sprintf("-policies item %q: want %s (what a real Kueue runs)", p, strings.Join(simtoreal.Policies, ", "))}
		}
	}
	if *speedup <= 0 || *hours <= 0 || *limitHours < *hours || *runs < 1 {
		return usageError{fmt.Sprintf("-speedup %g, -hours %g, -limit %g, -runs %d: want a speedup > 0, hours > 0, a limit of at least -hours and a run", *speedup, *hours, *limitHours, *runs)}
	}
	return simtoreal.Run(ctx, stdout, o)
}
