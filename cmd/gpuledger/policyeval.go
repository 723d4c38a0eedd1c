package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/sim"
)

func runPolicyEval(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy-eval", stdout)
	trace := fs.String("trace", "../shared/data/traces/philly-pcs", "folder of the Philly-derived traces")
	halfA := fs.String("halfA", "6214e9,11cb48,2869ce,ed69ec", "VCs of half A")
	halfB := fs.String("halfB", "b436b2,7f04ca,0e4a51", "VCs of half B")
	workloads := fs.String("workloads", "philly,gavel", "philly (the VCs' jobs) and/or gavel (Gavel's synthetic mix on the same queues)")
	gavelRate := fs.Float64("gavel.jobsPerHour", 30, "arrival rate of the gavel mix")
	fromDay := fs.Float64("from", 30, "first day of submissions replayed, on the aligned clock")
	days := fs.Float64("days", 30, "days of submissions replayed; every job submitted in them runs to completion")
	offsetDays := fs.Float64("offsetDays", 30, "each VC's clock is shifted by an offset drawn from the seed in [0, this many days)")
	seeds := fs.String("seeds", "1,2,3", "seeds of the offsets and of the gavel mix")
	loads := fs.String("loads", "0.7,0.85,0.95,1.1", "offered loads: GPU demand / capacity")
	regimes := fs.String("regimes", "none,kueue", "preemption regimes, each applied to every policy: none, reclaim (take back nominal quota, newest first) or kueue (Kueue's fair-sharing preemption)")
	goalLoads := fs.String("goalLoads", "0.85,0.95,1.1", "loads the goal is checked at and variants are tuned on")
	candidates := fs.String("candidates", "", "candidates to replay, comma-separated (default all: "+strings.Join(sim.CandidateNames(), ", ")+"); kueue and kueue-afs, the baselines, are always replayed")
	workers := fs.Int("workers", 0, "replays run at once (default: GOMAXPROCS)")
	out := fs.String("out", "gpuledger-sim", "folder for policy-eval.csv")
	clusterFile := fs.String("cluster", "", "flavors and prices for every run (see examples/philly-replay.yaml); default one H100 flavor")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := sim.EvalConfig{Dir: *trace, Halves: [2][]string{splitList(*halfA), splitList(*halfB)}, Workloads: splitList(*workloads),
		GavelJobsPerHour: *gavelRate, From: days2d(*fromDay), Span: days2d(*days), OffsetSpread: days2d(*offsetDays),
		Regimes: splitList(*regimes), Workers: *workers}
	var err error
	if cfg.Candidates, err = sim.PickCandidates(splitList(*candidates)); err != nil {
		return usageError{"-candidates: " + err.Error()}
	}
	if cfg.Flavors, err = sim.LoadReplayFlavors(*clusterFile); err != nil {
		return err
	}
	if cfg.Loads, err = floatList("-loads", *loads); err != nil {
		return err
	}
	if cfg.TuneLoads, err = floatList("-goalLoads", *goalLoads); err != nil {
		return err
	}
	if cfg.Seeds, err = seedList(*seeds); err != nil {
		return err
	}
	for _, r := range cfg.Regimes {
		if !slices.Contains([]string{"none", "reclaim", "kueue"}, r) {
			return usageError{fmt.Sprintf("-regimes item %q: want none, reclaim or kueue", r)}
		}
	}
	fmt.Fprintf(stdout, "gpuledger policy-eval %s\n\n", strings.Join(args, " "))
	began := time.Now()
	last := time.Now()
	runs, err := sim.Evaluate(ctx, cfg, func(stage string, done, total int) {
		if time.Since(last) > 10*time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "policy-eval: %s: %d of %d, %s\n", stage, done, total, time.Since(began).Round(time.Second))
		}
	})
	if err != nil {
		return fmt.Errorf("%w; pass -trace with the philly-pcs folder and VCs that are in it", err)
	}
	rows := sim.Tuned(cfg, runs)
	if err := sim.WriteEvalTable(stdout, rows); err != nil {
		return err
	}
	sim.WriteGoal(stdout, cfg, rows)
	if err := sim.SaveEvalRuns(filepath.Join(*out, "policy-eval.csv"), runs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d replays in %s; every run in %s\n", len(runs), time.Since(began).Round(time.Second), filepath.Join(*out, "policy-eval.csv"))
	return nil
}

func days2d(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

func floatList(flag, v string) ([]float64, error) {
	var out []float64
	for _, item := range splitList(v) {
		f, err := strconv.ParseFloat(item, 64)
		if err != nil || f <= 0 {
			return nil, usageError{fmt.Sprintf("%s item %q: want a positive number", flag, item)}
		}
		out = append(out, f)
	}
	return out, nil
}

// seedList parses the -seeds flag: unsigned integers, at least one.
func seedList(v string) ([]uint64, error) {
	var out []uint64
	for _, item := range splitList(v) {
		n, err := strconv.ParseUint(item, 10, 64)
		if err != nil {
			return nil, usageError{fmt.Sprintf("-seeds item %q: want an unsigned integer", item)}
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usageError{"-seeds is empty: want at least one seed"}
	}
	return out, nil
}
