package sim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// CheckRegimes says whether every regime is one Evaluate knows.
func (c EvalConfig) CheckRegimes() error {
	for _, r := range c.Regimes {
		if !slices.Contains([]string{"none", "reclaim", "kueue"}, r) {
			return fmt.Errorf("-regimes item %q: want none, reclaim or kueue", r)
		}
	}
	return nil
}

// RunEval is what `gpuledger policy-eval` does: it evaluates the grid
// (Evaluate, telling progress every 10 s how far it is), writes the tuned
// table and the goal's check to w, and every run to <out>/policy-eval.csv.
func RunEval(ctx context.Context, c EvalConfig, w, progress io.Writer, out string) error {
	began, last := time.Now(), time.Now()
	runs, err := Evaluate(ctx, c, func(stage string, done, total int) {
		if time.Since(last) > 10*time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(progress, "policy-eval: %s: %d of %d, %s\n", stage, done, total, time.Since(began).Round(time.Second))
		}
	})
	if err != nil {
		return fmt.Errorf("%w; pass -trace with the philly-pcs folder and VCs that are in it", err)
	}
	rows := Tuned(c, runs)
	if err := WriteEvalTable(w, rows); err != nil {
		return err
	}
	WriteGoal(w, c, rows)
	path := filepath.Join(out, "policy-eval.csv")
	if err := SaveEvalRuns(path, runs); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d replays in %s; every run in %s\n", len(runs), time.Since(began).Round(time.Second), path)
	return nil
}

// RegisterFlags registers policy-eval's flags of the grid, each setting a
// field of c.
func (c *EvalConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Dir, "trace", "../shared/data/traces/philly-pcs", "folder of the Philly-derived traces")
	flagutil.ListVar(fs, &c.Halves[0], "halfA", "6214e9,11cb48,2869ce,ed69ec", "VCs of half A")
	flagutil.ListVar(fs, &c.Halves[1], "halfB", "b436b2,7f04ca,0e4a51", "VCs of half B")
	flagutil.ListVar(fs, &c.Workloads, "workloads", "philly,gavel", "philly (the VCs' jobs) and/or gavel (Gavel's synthetic mix on the same queues)")
	fs.Float64Var(&c.GavelJobsPerHour, "gavel.jobsPerHour", 30, "arrival rate of the gavel mix")
	flagutil.DaysVar(fs, &c.From, "from", 30, "first day of submissions replayed, on the aligned clock")
	flagutil.DaysVar(fs, &c.Span, "days", 30, "days of submissions replayed; every job submitted in them runs to completion")
	flagutil.DaysVar(fs, &c.OffsetSpread, "offsetDays", 30, "each VC's clock is shifted by an offset drawn from the seed in [0, this many days)")
	flagutil.SeedsVar(fs, &c.Seeds, "seeds", "1,2,3", "seeds of the offsets and of the gavel mix")
	flagutil.FloatsVar(fs, &c.Loads, "loads", "0.7,0.85,0.95,1.1", "offered loads: GPU demand / capacity")
	flagutil.ListVar(fs, &c.Regimes, "regimes", "none,kueue", "preemption regimes, each applied to every policy: none, reclaim (take back nominal quota, newest first) or kueue (Kueue's fair-sharing preemption)")
	flagutil.FloatsVar(fs, &c.TuneLoads, "goalLoads", "0.85,0.95,1.1", "loads the goal is checked at and variants are tuned on")
	fs.IntVar(&c.Workers, "workers", 0, "replays run at once (default: GOMAXPROCS)")
}
