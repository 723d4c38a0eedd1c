package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/admission/kube"
	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/sim"
)

func runSimToReal(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("sim-to-real", `Replays a window of the Philly-derived traces on a real Kueue and in the
simulator, with the same jobs and the same policies, and prints both sets of
figures side by side with the simulator's error: does what the simulator
claims hold on the real scheduler?

The real side starts its own etcd, kube-apiserver and unmodified Kueue on
127.0.0.1 (built by tools/build-k8s-stack.sh; $GPULEDGER_K8S_STACK names the
folder) for each run, creates the jobs' Workloads at their submission times on a
clock compressed -speedup times, and marks each admitted one Finished after its
duration, as Kueue's scheduler performance runner does. Every VC is a team: a
namespace with a LocalQueue of one ClusterQueue that has the flavors of
-cluster, sized so that the window's GPU demand is -load of it, ordered by
Admission Fair Sharing. Policies: kueue-afs (plain Kueue: equal weights) and
costfair (gpuledger's controller sets the LocalQueues' weights every
-weightInterval from a ledger the runner writes each trace hour with what the
admitted workloads cost at the flavors' prices). The simulator replays the same
jobs on the same ClusterQueue with its kueue-afs and costfair policies, Kueue's
usage half-life and sampling interval as its half-life and admission penalty.`, stdout)
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
	real := false
	for _, w := range splitList(*worlds) {
		switch w {
		case "sim":
		case "kueue":
			real = true
		default:
			return usageError{fmt.Sprintf("-worlds item %q: want sim or kueue", w)}
		}
	}
	if real {
		if err := kubetest.Built(); err != nil {
			return err
		}
	}
	if *speedup <= 0 || *hours <= 0 || *limitHours < *hours || *runs < 1 {
		return usageError{fmt.Sprintf("-speedup %g, -hours %g, -limit %g, -runs %d: want a speedup > 0, hours > 0, a limit of at least -hours and a run", *speedup, *hours, *limitHours, *runs)}
	}
	from := days2d(*fromDay)
	span := time.Duration(*hours * float64(time.Hour))
	limit := time.Duration(*limitHours * float64(time.Hour))
	var (
		queues  []sim.TraceQueue
		jobs    []sim.TraceJob
		flavors []sim.ReplayFlavor
		gpus    int
	)
	switch *workload {
	case "philly", "gavel":
		var err error
		queues, jobs, err = sim.LoadPhilly(*trace, sim.PhillyOptions{From: from, To: from + span, VCs: splitList(*vcs),
			OffsetSpread: days2d(*offsetDays), OffsetSeed: *seed})
		if err != nil {
			return fmt.Errorf("%w; pass -trace with the philly-pcs folder and -vcs that are in it", err)
		}
		if *workload == "gavel" {
			jobs = sim.Gavel(queues, *gavelRate, span, *seed)
		}
		if flavors, err = sim.LoadReplayFlavors(*clusterFile); err != nil {
			return err
		}
		if len(flavors) == 0 {
			flavors = []sim.ReplayFlavor{{Name: "gpu", Share: 1, PriceMicrosPerGPUHour: 6_880_000}}
		}
		gpus = int(math.Ceil(sim.OfferedGPUs(jobs, span) / *load))
	case "mechanism":
		queues, flavors, jobs = sim.Mechanism(sim.MechanismOptions{Days: *hours / 24, Seed: *seed, Interactive: *interactive})
		gpus = sim.MechanismGPUs()
	default:
		return usageError{fmt.Sprintf("-workload %q: want philly, gavel or mechanism", *workload)}
	}
	model, err := sim.SharedModel(queues, flavors, gpus)
	if err != nil {
		return err
	}
	// A job larger than every flavor waits forever in both worlds: left out.
	largest := 0
	caps := model.FlavorCapacity()
	for _, f := range flavors {
		largest = max(largest, caps[f.Name])
	}
	kept := jobs[:0]
	dropped := 0
	for _, j := range jobs {
		if j.GPUs > largest {
			dropped++
			continue
		}
		kept = append(kept, j)
	}
	jobs = kept
	fmt.Fprintf(stdout, "gpuledger sim-to-real %s\n\n", strings.Join(args, " "))
	if *workload == "mechanism" {
		fmt.Fprintf(stdout, "%d mechanism jobs of %d teams submitted over %s (seed %d), every team backlogged; one ClusterQueue of %d GPUs (%s); %gx speedup: %s of trace in %s\n\n",
			len(jobs), len(queues), span, *seed, gpus, flavorList(flavors, caps), *speedup, limit, time.Duration(float64(limit) / *speedup).Round(time.Second))
	} else {
		fmt.Fprintf(stdout, "%d %s jobs of %d VCs submitted over %s from day %g (seed %d), %d left out (larger than any flavor); one ClusterQueue of %d GPUs (%s) at load %g; %gx speedup: %s of trace in %s\n\n",
			len(jobs), *workload, len(queues), span, *fromDay, *seed, dropped, gpus, flavorList(flavors, caps), *load, *speedup, limit, time.Duration(float64(limit) / *speedup).Round(time.Second))
	}
	// Prices per unit of each flavor's resource (a MIG slice its compute
	// share of the GPU's).
	prices := map[string]int64{}
	for fr, perSecond := range model.Rates {
		prices[fr.Flavor] = int64(math.Round(perSecond * 3600))
	}
	var kf []kube.ReplayFlavor
	for _, f := range flavors {
		kf = append(kf, kube.ReplayFlavor{Name: f.Name, GPUs: caps[f.Name], PriceMicrosPerGPUHour: prices[f.Name], Resource: f.Resource})
	}
	var rj []kube.ReplayJob
	for _, j := range jobs {
		rt, err := sim.RunTimes(j, flavors)
		if err != nil {
			return err
		}
		rj = append(rj, kube.ReplayJob{ID: j.ID, Team: j.Queue, Submit: j.Submit, Duration: j.Duration, Pods: j.Pods, PerPod: j.PerPod,
			Resource: j.Resource, Flavors: j.Flavors, RunTime: rt})
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	csv, err := os.Create(filepath.Join(*out, "outcomes.csv"))
	if err != nil {
		return err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "policy,world,run,job,queue,gpus,flavor,submit_s,start_s,finish_s")
	writeOutcomes := func(policy, world string, run int, outs []sim.JobOutcome) {
		for _, o := range outs {
			fmt.Fprintf(csv, "%s,%s,%d,%s,%s,%d,%s,%.0f,%.0f,%.0f\n", policy, world, run, o.ID, o.Queue, o.GPUs, o.Flavor,
				o.Submit.Seconds(), o.Start.Seconds(), o.Finish.Seconds())
		}
	}
	penalty := time.Duration(float64(*sampling) * *speedup)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tworld\tstarted\tfinished\tavg JCT\tmean wait\tp90 wait\tmax wait\tJain (backlogged)\tmoney gap\tidle paid GPU-h\tlongest stall\tmean |Δwait| vs sim\tsame flavor\t")
	began := time.Now()
	for _, policy := range splitList(*policies) {
		m, err := sim.SharedModel(queues, flavors, gpus)
		if err != nil {
			return err
		}
		ropts := sim.ReplayOptions{Policy: policy, Gating: true, HalfLife: *halfLife, AdmissionPenalty: penalty,
			Flavors: flavors, Limit: limit, IdlePenalty: *idlePenalty}
		if policy == "costfair+targets" {
			ropts.Policy, ropts.FlavorTargets = "costfair", true
		}
		res, err := sim.ReplayModel(m, jobs, ropts)
		if err != nil {
			return fmt.Errorf("simulate %s: %w", policy, err)
		}
		writeOutcomes(policy, "sim", 0, res.Outcomes)
		simFig := sim.Figures(jobs, res.Outcomes, prices, limit)
		fmt.Fprintf(tw, "%s\tsimulator\t%s\t\t\n", policy, simFig.Cells())
		if !real {
			continue
		}
		var realFigs []sim.RunFigures
		var divs []sim.Divergence
		for run := 1; run <= *runs; run++ {
			fmt.Fprintf(os.Stderr, "sim-to-real: %s on Kueue, run %d of %d (%s so far)\n", policy, run, *runs, time.Since(began).Round(time.Second))
			outs, err := realRun(ctx, filepath.Join(*out, fmt.Sprintf("%s-%d", policy, run)), rj, kf, policy, *speedup, limit, *halfLife, *sampling, *weightInterval)
			if err != nil {
				return fmt.Errorf("%s on Kueue, run %d: %w", policy, run, err)
			}
			writeOutcomes(policy, "kueue", run, outs)
			fig := sim.Figures(jobs, outs, prices, limit)
			div := sim.Diverge(res.Outcomes, outs)
			realFigs, divs = append(realFigs, fig), append(divs, div)
			fmt.Fprintf(tw, "%s\tKueue run %d\t%s\t%s\t%.0f%%\t\n", policy, run, fig.Cells(), div.MeanAbsWait.Round(time.Minute), 100*div.SameFlavor)
		}
		if *runs > 1 {
			fmt.Fprintf(tw, "%s\tKueue min/median/max\t%s\t\t\t\n", policy, sim.SpreadCells(realFigs))
		}
		med := sim.MedianFigures(realFigs)
		fmt.Fprintf(tw, "%s\tsimulator error\t%s\t\t\t\n", policy, sim.ErrorCells(simFig, med))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nsimulator error: (simulator − Kueue) / Kueue, against the median real run. Every outcome in %s.\n", filepath.Join(*out, "outcomes.csv"))
	return nil
}

// realRun replays the jobs once on a fresh stack.
func realRun(ctx context.Context, dir string, jobs []kube.ReplayJob, flavors []kube.ReplayFlavor, policy string,
	speedup float64, limit, halfLife, sampling, weightInterval time.Duration) ([]sim.JobOutcome, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	realHalfLife := time.Duration(float64(halfLife) / speedup)
	s, err := kubetest.Launch(dir, kubetest.Options{KueueConfig: fmt.Sprintf("admissionFairSharing:\n  usageHalfLifeTime: %s\n  usageSamplingInterval: %s\n", realHalfLife, sampling)})
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	o := kube.ReplayOptions{Flavors: flavors, Speedup: speedup, Limit: limit,
		Log: slog.New(slog.NewTextHandler(logFile, nil)),
		Progress: func(created, admitted, finished, total int) {
			fmt.Fprintf(os.Stderr, "sim-to-real: %s: %d of %d created, %d admitted, %d finished\n", policy, created, total, admitted, finished)
		}}
	switch policy {
	case "kueue":
		o.NoFairSharing = true
	case "kueue-afs":
	case "costfair", "costfair+targets":
		store, err := embedded.Open(filepath.Join(dir, "ledger"), embedded.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		defer store.Close()
		o.Steer, o.Store, o.HalfLife, o.WeightInterval = true, store, halfLife, weightInterval
		o.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		o.FlavorTargets = policy == "costfair+targets"
	default:
		return nil, usageError{fmt.Sprintf("-policies item %q: want kueue, kueue-afs, costfair or costfair+targets (what a real Kueue runs: without or with Admission Fair Sharing, with gpuledger's weights, and with its flavor-target check)", policy)}
	}
	outs, err := kube.ReplayOnKueue(ctx, s.Config, jobs, o)
	if err != nil {
		return nil, err
	}
	res := make([]sim.JobOutcome, len(outs))
	for i, o := range outs {
		res[i] = sim.JobOutcome{ID: o.ID, Queue: o.Team, Flavor: o.Flavor, GPUs: o.GPUs, Submit: o.Submit, Start: o.Admitted, Finish: o.Finished}
	}
	return res, nil
}

func flavorList(flavors []sim.ReplayFlavor, caps map[string]int) string {
	var parts []string
	for _, f := range flavors {
		part := fmt.Sprintf("%d %s at %s/GPU-hour", caps[f.Name], f.Name, formatMicros(f.PriceMicrosPerGPUHour))
		if f.Resource != "" && f.Resource != "nvidia.com/gpu" {
			part = fmt.Sprintf("%d %s of %d GPUs at %s/GPU-hour", caps[f.Name], f.Resource, f.GPUs, formatMicros(f.PriceMicrosPerGPUHour))
		}
		if f.Speed > 0 && f.Speed != 1 {
			part += fmt.Sprintf(", speed %.3g", f.Speed)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func formatMicros(m int64) string { return fmt.Sprintf("%.3f", float64(m)/1e6) }
