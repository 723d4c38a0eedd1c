// Package simtoreal replays one window of jobs on a real Kueue (its own
// etcd, kube-apiserver and unmodified Kueue on 127.0.0.1, driven by
// admission/kube) and in the simulator, with the same jobs and policies,
// and reports both worlds' figures side by side with the simulator's error.
package simtoreal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/admission/kube"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/sim"
)

// Workloads and Policies are what Run accepts.
var (
	Workloads = []string{"philly", "gavel", "mechanism"}
	// Policies a real Kueue runs: without or with Admission Fair Sharing,
	// with gpuledger's weights, and with its flavor-target check.
	Policies = []string{"kueue", "kueue-afs", "costfair", "costfair+targets"}
	// CohortPolicies are those of the cohort layout: Kueue's cohort fair
	// sharing, and the same with gpuledger's ClusterQueue weights.
	CohortPolicies = []string{"kueue", "costfair-drs"}
)

// Layouts are how the teams' queues are laid out on Kueue.
var Layouts = []string{"shared", "cohort"}

// Options are one comparison's.
type Options struct {
	// Trace is the philly-pcs folder; VCs the VCs replayed (teams).
	Trace string
	VCs   []string
	// From and Span are the window of submissions, on the aligned clock;
	// OffsetSpread shifts each VC's clock by an offset drawn from Seed.
	From, Span, OffsetSpread time.Duration
	Seed                     uint64
	// Workload is philly, gavel (Gavel's mix at GavelJobsPerHour on the
	// VCs) or mechanism (sim.Mechanism's teams on its own cluster).
	Workload         string
	GavelJobsPerHour float64
	// Load sizes the ClusterQueue: the window's GPU demand over its GPUs.
	Load float64
	// ClusterFile gives the flavors and prices (sim.LoadReplayFlavors).
	ClusterFile string
	// Speedup is trace seconds per real second; Limit the trace time
	// after the window's start at which both worlds stop.
	Speedup float64
	Limit   time.Duration
	// HalfLife of the decayed usage and spend (trace clock); Sampling is
	// Kueue's usageSamplingInterval (real clock); WeightInterval how often
	// the controller sets the weights (trace clock).
	HalfLife, Sampling, WeightInterval time.Duration
	Policies                           []string
	// Worlds are where to replay: sim, kueue or both; Check sets Real
	// from them. Real runs the real Kueue too; Runs real runs per policy.
	Worlds []string
	Real   bool
	Runs   int
	// Interactive is the mechanism's share of notebook jobs; IdlePenalty
	// the simulator's costfair idle penalty.
	Interactive, IdlePenalty float64
	// SimSettled has the simulator's costfair read the spend as the
	// controller reads the ledger: whole trace hours once ended, every
	// WeightInterval (sim.ReplayOptions.SettledSpend).
	SimSettled bool
	// SimWeights runs the simulator's costfair through Kueue's Admission
	// Fair Sharing and the controller's weights, set every WeightInterval
	// with the controller's hysteresis (sim.ReplayOptions.ControllerWeights).
	SimWeights bool
	// MaxPending bounds each team's jobs waiting in the queue in both
	// worlds (sim.ReplayOptions.MaxPending); 0: none.
	MaxPending int
	// Layout is shared (every team a LocalQueue of one ClusterQueue) or
	// cohort (every team a ClusterQueue of its own in one cohort, its
	// nominal quota its share of each flavor: sim.CohortModel).
	Layout string
	// Out is the folder for the stacks' logs and outcomes.csv.
	Out string
	// KueueOutcomes, when set, is an outcomes.csv of an earlier run whose
	// real Kueue runs are analysed again instead of running Kueue
	// (ReadOutcomes): the same workload flags must be given.
	KueueOutcomes string
	// Command is echoed in the output's first line.
	Command string
	// Progress receives a line per real run and its progress.
	Progress io.Writer
}

// Check says what is wrong with o, naming the flag of sim-to-real that
// sets it, and sets o.Real from o.Worlds.
func (o *Options) Check() error {
	for _, w := range o.Worlds {
		if w != "sim" && w != "kueue" {
			return fmt.Errorf("-worlds item %q: want sim or kueue", w)
		}
		o.Real = o.Real || w == "kueue"
	}
	if !slices.Contains(Workloads, o.Workload) {
		return fmt.Errorf("-workload %q: want one of %s", o.Workload, strings.Join(Workloads, ", "))
	}
	if !slices.Contains(Layouts, o.Layout) {
		return fmt.Errorf("-layout %q: want one of %s", o.Layout, strings.Join(Layouts, ", "))
	}
	for _, p := range o.Policies {
		if want := o.policies(); o.Real && !slices.Contains(want, p) {
			return fmt.Errorf("-policies item %q: want %s (what a real Kueue runs with -layout %s)", p, strings.Join(want, ", "), o.Layout)
		}
	}
	if o.MaxPending < 0 {
		return fmt.Errorf("-maxPending %d: want 0 (no bound) or more", o.MaxPending)
	}
	if o.Speedup <= 0 || o.Span <= 0 || o.Limit < o.Span || o.Runs < 1 {
		return fmt.Errorf("-speedup %g, -hours %g, -limit %g, -runs %d: want a speedup > 0, hours > 0, a limit of at least -hours and a run",
			o.Speedup, o.Span.Hours(), o.Limit.Hours(), o.Runs)
	}
	return nil
}

// policies are those the layout can run.
func (o *Options) policies() []string {
	if o.Layout == "cohort" {
		return CohortPolicies
	}
	return Policies
}

// RegisterFlags registers sim-to-real's flags, each setting a field of o.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Trace, "trace", "../shared/data/traces/philly-pcs", "folder of the Philly-derived traces")
	flagutil.ListVar(fs, &o.VCs, "vcs", "6214e9,11cb48,2869ce,ed69ec,b436b2,7f04ca,0e4a51", "VCs replayed (teams)")
	flagutil.DaysVar(fs, &o.From, "from", 30, "first day of submissions replayed, on the aligned clock")
	flagutil.HoursVar(fs, &o.Span, "hours", 12, "hours of submissions replayed")
	flagutil.DaysVar(fs, &o.OffsetSpread, "offsetDays", 30, "each VC's clock is shifted by an offset drawn from -seed in [0, this many days)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the VCs' offsets and of the gavel mix")
	fs.StringVar(&o.Workload, "workload", "philly", "philly (the VCs' jobs), gavel (Gavel's synthetic mix on the same VCs) or mechanism (four teams pinned to flavors by what their models need, all backlogged, on the scenario's own cluster: -vcs, -from, -offsetDays, -load and -cluster are unused, -hours is its span)")
	fs.Float64Var(&o.GavelJobsPerHour, "gavel.jobsPerHour", 30, "arrival rate of the gavel mix")
	fs.Float64Var(&o.Load, "load", 0.95, "offered load: the window's GPU demand over the ClusterQueue's GPUs")
	fs.StringVar(&o.ClusterFile, "cluster", "examples/philly-replay.yaml", "flavors and prices (see examples/philly-replay.yaml)")
	fs.Float64Var(&o.Speedup, "speedup", 240, "trace seconds per real second: Kueue requeues waiting workloads once a real second, so keep a second small against the jobs' durations")
	flagutil.HoursVar(fs, &o.Limit, "limit", 18, "trace hours after the window's start at which both runs stop")
	fs.DurationVar(&o.HalfLife, "halfLife", 6*time.Hour, "half-life of the decayed usage and spend (trace clock)")
	fs.DurationVar(&o.Sampling, "sampling", time.Second, "Kueue's usageSamplingInterval (real clock); × -speedup is the simulator's admission penalty")
	fs.DurationVar(&o.WeightInterval, "weightInterval", 10*time.Minute, "how often the controller sets the weights (trace clock)")
	flagutil.ListVar(fs, &o.Policies, "policies", "kueue-afs,costfair", "policies to compare: kueue (a ClusterQueue without Admission Fair Sharing: BestEffortFIFO), kueue-afs, costfair, costfair+targets (costfair whose AdmissionCheck also keeps each team to its money-fair share of every flavor)")
	flagutil.ListVar(fs, &o.Worlds, "worlds", "sim,kueue", "where to replay: sim (the simulator), kueue (a real Kueue), or both")
	fs.Float64Var(&o.Interactive, "mechanism.interactive", 0, "with -workload mechanism: the share of research's jobs that are notebooks holding one GPU 80% idle")
	fs.IntVar(&o.MaxPending, "maxPending", 0, "each team has at most this many jobs waiting in the queue, in both worlds; its next job enters when one of them starts (its wait still counts from its submission), which keeps a backlogged team's queue, and Kueue's scheduling cycles, short; 0: no bound")
	fs.Float64Var(&o.IdlePenalty, "idlePenalty", 0, "an experiment: the simulator's costfair counts an idle GPU-hour as 1+this GPU-hours of spend (the replay's ledger has no idle time, so the real controller's -idlePenalty would have nothing to count)")
	fs.BoolVar(&o.SimSettled, "sim.settled", false, "the simulator's costfair reads the spend as the controller reads the ledger: the trace hours that have ended, every -weightInterval (default: the spend up to the moment)")
	fs.BoolVar(&o.SimWeights, "sim.weights", false, "the simulator's costfair runs as the controller makes a real Kueue run it: Admission Fair Sharing's usage over the LocalQueue weights the controller sets every -weightInterval, moved only past its 10% hysteresis (default: costfair orders by the money share itself)")
	fs.IntVar(&o.Runs, "runs", 1, "real runs of each policy (min/median/max over them)")
	fs.StringVar(&o.Layout, "layout", "shared", "shared (every team a LocalQueue of one ClusterQueue; policies kueue, kueue-afs, costfair, costfair+targets) or cohort (every team a ClusterQueue of its own in one cohort, its nominal quota its share of every flavor, Kueue's cohort fair sharing on; policies kueue and costfair-drs, whose ClusterQueue weights the controller sets)")
	fs.StringVar(&o.KueueOutcomes, "kueue.outcomes", "", "analyse the real Kueue's runs kept in this outcomes.csv (an earlier sim-to-real's, with -worlds sim,kueue) instead of running Kueue again; give the flags that run used")
	fs.StringVar(&o.Out, "out", "gpuledger-sim/sim-to-real", "folder for the stacks' logs, the outcomes (outcomes.csv) and, a real run each, the control plane's load by trace hour (POLICY-RUN/control-plane.csv; tools/control-plane-table.sh sums it up)")
}

// Run compares the worlds and prints the table to w.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	// A kept run's outcomes are read before outcomes.csv is written,
	// which may be the same file.
	var kept []byte
	if o.KueueOutcomes != "" {
		var err error
		if kept, err = os.ReadFile(o.KueueOutcomes); err != nil {
			return fmt.Errorf("-kueue.outcomes: %w", err)
		}
	} else if o.Real {
		if err := kubetest.Built(); err != nil {
			return err
		}
	}
	var (
		queues  []sim.TraceQueue
		jobs    []sim.TraceJob
		flavors []sim.ReplayFlavor
		gpus    int
	)
	switch o.Workload {
	case "philly", "gavel":
		var err error
		queues, jobs, err = sim.LoadPhilly(o.Trace, sim.PhillyOptions{From: o.From, To: o.From + o.Span, VCs: o.VCs,
			OffsetSpread: o.OffsetSpread, OffsetSeed: o.Seed})
		if err != nil {
			return fmt.Errorf("%w; pass -trace with the philly-pcs folder and -vcs that are in it", err)
		}
		if o.Workload == "gavel" {
			jobs = sim.Gavel(queues, o.GavelJobsPerHour, o.Span, o.Seed)
		}
		if flavors, err = sim.LoadReplayFlavors(o.ClusterFile); err != nil {
			return err
		}
		if len(flavors) == 0 {
			flavors = []sim.ReplayFlavor{{Name: "gpu", Share: 1, PriceMicrosPerGPUHour: 6_880_000}}
		}
		gpus = int(math.Ceil(sim.OfferedGPUs(jobs, o.Span) / o.Load))
	case "mechanism":
		queues, flavors, jobs = sim.Mechanism(sim.MechanismOptions{Days: o.Span.Hours() / 24, Seed: o.Seed, Interactive: o.Interactive})
		gpus = sim.MechanismGPUs()
	default:
		return fmt.Errorf("workload %q: want one of %s", o.Workload, strings.Join(Workloads, ", "))
	}
	newModel := sim.SharedModel
	if o.Layout == "cohort" {
		newModel = sim.CohortModel
	}
	model, err := newModel(queues, flavors, gpus)
	if err != nil {
		return err
	}
	caps := model.FlavorCapacity()
	var quotas map[string]map[string]int
	layout := fmt.Sprintf("one ClusterQueue of %d GPUs", gpus)
	if o.Layout == "cohort" {
		quotas = model.Quotas()
		layout = fmt.Sprintf("a ClusterQueue per team in one cohort, %d GPUs split between them as nominal quota", gpus)
	}
	jobs, dropped := fitting(jobs, flavors, caps)
	real := time.Duration(float64(o.Limit) / o.Speedup).Round(time.Second)
	fmt.Fprintf(w, "%s\n\n", o.Command)
	if o.MaxPending > 0 {
		layout += fmt.Sprintf(", each team at most %d jobs waiting in the queue (-maxPending)", o.MaxPending)
	}
	if o.Workload == "mechanism" {
		fmt.Fprintf(w, "%d mechanism jobs of %d teams submitted over %s (seed %d), every team backlogged; %s (%s); %gx speedup: %s of trace in %s\n\n",
			len(jobs), len(queues), o.Span, o.Seed, layout, flavorList(flavors, caps), o.Speedup, o.Limit, real)
	} else {
		fmt.Fprintf(w, "%d %s jobs of %d VCs submitted over %s from day %g (seed %d), %d left out (larger than any flavor); %s (%s) at load %g; %gx speedup: %s of trace in %s\n\n",
			len(jobs), o.Workload, len(queues), o.Span, o.From.Hours()/24, o.Seed, dropped, layout, flavorList(flavors, caps), o.Load, o.Speedup, o.Limit, real)
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
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	csv, err := os.Create(filepath.Join(o.Out, "outcomes.csv"))
	if err != nil {
		return err
	}
	defer csv.Close()
	fmt.Fprintln(csv, strings.Join(outcomesHeader, ","))
	writeOutcomes := func(policy, world string, run int, outs []sim.JobOutcome) {
		for _, o := range outs {
			fmt.Fprintf(csv, "%s,%s,%d,%s,%s,%d,%s,%.0f,%.0f,%.0f\n", policy, world, run, o.ID, o.Queue, o.GPUs, o.Flavor,
				o.Submit.Seconds(), o.Start.Seconds(), o.Finish.Seconds())
		}
	}
	penalty := time.Duration(float64(o.Sampling) * o.Speedup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tworld\tstarted\tfinished\tavg JCT\tmean wait\tp90 wait\tmax wait\tJain (backlogged)\tmoney gap\tidle paid GPU-h\tlongest stall\tmean |Δwait| vs sim\tsame flavor\t")
	began := time.Now()
	// blocks are the money gap's rows by GapBlock, printed after the
	// table, and teams each queue's share of it.
	var blocks, teams []string
	addTeams := func(label string, f sim.RunFigures) {
		for _, q := range f.Queues() {
			teams = append(teams, fmt.Sprintf("%s\t%s\t%s\t", label, q, f.QueueBlockCells(q)))
		}
	}
	for _, policy := range o.Policies {
		m, err := newModel(queues, flavors, gpus)
		if err != nil {
			return err
		}
		ropts := sim.ReplayOptions{Policy: policy, Gating: true, HalfLife: o.HalfLife, AdmissionPenalty: penalty,
			Flavors: flavors, Limit: o.Limit, IdlePenalty: o.IdlePenalty, MaxPending: o.MaxPending}
		if o.SimSettled {
			ropts.SettledSpend = o.WeightInterval
		}
		if o.SimWeights {
			ropts.ControllerWeights = o.WeightInterval // at the controller's default hysteresis
		}
		if policy == "costfair+targets" {
			ropts.Policy, ropts.FlavorTargets = "costfair", true
		}
		res, err := sim.ReplayModel(m, jobs, ropts)
		if err != nil {
			return fmt.Errorf("simulate %s: %w", policy, err)
		}
		writeOutcomes(policy, "sim", 0, res.Outcomes)
		simFig := sim.Figures(jobs, res.Outcomes, prices, o.Limit)
		fmt.Fprintf(tw, "%s\tsimulator\t%s\t\t\n", policy, simFig.Cells())
		blocks = append(blocks, fmt.Sprintf("%s/simulator\t%s\t", policy, simFig.BlockCells()))
		addTeams(policy+"/simulator", simFig)
		if !o.Real {
			continue
		}
		var keptRuns map[int][]sim.JobOutcome
		runs := o.Runs
		if kept != nil {
			if keptRuns, err = ReadOutcomes(bytes.NewReader(kept), policy); err != nil {
				return fmt.Errorf("-kueue.outcomes %s: %w", o.KueueOutcomes, err)
			}
			runs = len(keptRuns)
		}
		var realFigs []sim.RunFigures
		for run := 1; run <= runs; run++ {
			outs, ok := keptRuns[run]
			if kept != nil && !ok {
				return fmt.Errorf("-kueue.outcomes %s: policy %s has runs %v: want them numbered from 1", o.KueueOutcomes, policy, slices.Sorted(maps.Keys(keptRuns)))
			}
			if kept == nil {
				fmt.Fprintf(o.Progress, "sim-to-real: %s on Kueue, run %d of %d (%s so far)\n", policy, run, runs, time.Since(began).Round(time.Second))
				if outs, err = o.realRun(ctx, filepath.Join(o.Out, fmt.Sprintf("%s-%d", policy, run)), rj, kf, quotas, policy); err != nil {
					return fmt.Errorf("%s on Kueue, run %d: %w", policy, run, err)
				}
			}
			writeOutcomes(policy, "kueue", run, outs)
			fig := sim.Figures(jobs, outs, prices, o.Limit)
			div := sim.Diverge(res.Outcomes, outs)
			realFigs = append(realFigs, fig)
			blocks = append(blocks, fmt.Sprintf("%s/kueue-%d\t%s\t", policy, run, fig.BlockCells()))
			addTeams(fmt.Sprintf("%s/kueue-%d", policy, run), fig)
			fmt.Fprintf(tw, "%s\tKueue run %d\t%s\t%s\t%.0f%%\t\n", policy, run, fig.Cells(), div.MeanAbsWait.Round(time.Minute), 100*div.SameFlavor)
		}
		if runs > 1 {
			fmt.Fprintf(tw, "%s\tKueue min/median/max\t%s\t\t\t\n", policy, sim.SpreadCells(realFigs))
		}
		fmt.Fprintf(tw, "%s\tsimulator error\t%s\t\t\t\n", policy, sim.ErrorCells(simFig, sim.MedianFigures(realFigs)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printRows(w, fmt.Sprintf("money gap by %g trace hours, from the start (-: no hour with two teams waiting):", sim.GapBlock.Hours()), blocks); err != nil {
		return err
	}
	if err := printRows(w, fmt.Sprintf("each team's share of the waiting teams' spend less its share of their entitlements (mean of the hours it waited), and the GPUs it held by flavor (mean of the hours), by %g trace hours:", sim.GapBlock.Hours()), teams); err != nil {
		return err
	}
	if o.Real {
		fmt.Fprintf(w, "\nsimulator error: (simulator − Kueue) / Kueue, against the median real run. Every outcome in %s.\n", filepath.Join(o.Out, "outcomes.csv"))
	} else {
		fmt.Fprintf(w, "\nEvery outcome in %s.\n", filepath.Join(o.Out, "outcomes.csv"))
	}
	return nil
}

// printRows prints a blank line, title and the tab-separated rows,
// aligned right.
func printRows(w io.Writer, title string, rows []string) error {
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}

// fitting leaves out the jobs larger than every flavor: they would wait
// forever in both worlds.
func fitting(jobs []sim.TraceJob, flavors []sim.ReplayFlavor, caps map[string]int) (kept []sim.TraceJob, dropped int) {
	largest := 0
	for _, f := range flavors {
		largest = max(largest, caps[f.Name])
	}
	for _, j := range jobs {
		if j.GPUs > largest {
			dropped++
			continue
		}
		kept = append(kept, j)
	}
	return kept, dropped
}

// realRun replays the jobs once on a fresh stack; quotas, when set, are
// the cohort layout's ClusterQueues.
func (o Options) realRun(ctx context.Context, dir string, jobs []kube.ReplayJob, flavors []kube.ReplayFlavor, quotas map[string]map[string]int, policy string) ([]sim.JobOutcome, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	realHalfLife := time.Duration(float64(o.HalfLife) / o.Speedup)
	kc := fmt.Sprintf("admissionFairSharing:\n  usageHalfLifeTime: %s\n  usageSamplingInterval: %s\n", realHalfLife, o.Sampling)
	if quotas != nil {
		// Cohort fair sharing (on when the block is there); the
		// ClusterQueues do not preempt, so its strategies do not act.
		kc += "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"
	}
	s, err := kubetest.Launch(dir, kubetest.Options{KueueConfig: kc})
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
	ro := kube.ReplayOptions{Flavors: flavors, Quotas: quotas, Speedup: o.Speedup, Limit: o.Limit, MaxPending: o.MaxPending,
		Log: slog.New(slog.NewTextHandler(logFile, nil)),
		Progress: func(created, admitted, finished, total int) {
			fmt.Fprintf(o.Progress, "sim-to-real: %s: %d of %d created, %d admitted, %d finished\n", policy, created, total, admitted, finished)
		}}
	loadFile, err := os.Create(filepath.Join(dir, "control-plane.csv"))
	if err != nil {
		return nil, err
	}
	defer loadFile.Close()
	var warned time.Time
	load := newLoadLog(s, loadFile, func(err error) {
		if time.Since(warned) > time.Duration(float64(time.Hour)/o.Speedup) {
			warned = time.Now()
			ro.Log.Warn("sim-to-real: the control plane's figures not read", "err", err)
		}
	})
	ro.Hourly = load.hour
	switch policy {
	case "kueue":
		ro.NoFairSharing = true
	case "kueue-afs":
	case "costfair", "costfair+targets", "costfair-drs":
		store, err := embedded.Open(filepath.Join(dir, "ledger"), embedded.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		defer store.Close()
		ro.Steer, ro.Store, ro.HalfLife, ro.WeightInterval = true, store, o.HalfLife, o.WeightInterval
		ro.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		ro.FlavorTargets = policy == "costfair+targets"
		// In the cohort layout the ClusterQueues' weights steer, not
		// Admission Fair Sharing (each ClusterQueue has one LocalQueue).
		ro.NoFairSharing = policy == "costfair-drs"
	default:
		return nil, fmt.Errorf("policy %q: want one of %s", policy, strings.Join(Policies, ", "))
	}
	outs, err := kube.ReplayOnKueue(ctx, s.Config, jobs, ro)
	if err != nil {
		return nil, err
	}
	res := make([]sim.JobOutcome, len(outs))
	for i, o := range outs {
		res[i] = sim.JobOutcome{ID: o.ID, Queue: o.Team, Flavor: o.Flavor, GPUs: o.GPUs, Submit: o.Submit, Start: o.Admitted, Finish: o.Finished}
	}
	return res, nil
}

// flavorList describes the flavors and their capacity in a line.
func flavorList(flavors []sim.ReplayFlavor, caps map[string]int) string {
	var parts []string
	for _, f := range flavors {
		price := fmt.Sprintf("%.3f", float64(f.PriceMicrosPerGPUHour)/1e6)
		part := fmt.Sprintf("%d %s at %s/GPU-hour", caps[f.Name], f.Name, price)
		if f.Resource != "" && f.Resource != "nvidia.com/gpu" {
			part = fmt.Sprintf("%d %s of %d GPUs at %s/GPU-hour", caps[f.Name], f.Resource, f.GPUs, price)
		}
		if f.Speed > 0 && f.Speed != 1 {
			part += fmt.Sprintf(", speed %.3g", f.Speed)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
