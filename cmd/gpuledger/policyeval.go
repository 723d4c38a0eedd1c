package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/sim"
)

func runPolicyEval(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy-eval", stdout)
	var c sim.EvalConfig
	c.RegisterFlags(fs)
	candidates := flagutil.List(fs, "candidates", "", "candidates to replay, comma-separated (default all: "+strings.Join(sim.CandidateNames(), ", ")+"); kueue and kueue-afs, the baselines, are always replayed")
	out := fs.String("out", "gpuledger-sim", "folder for policy-eval.csv")
	clusterFile := fs.String("cluster", "", "flavors and prices for every run (see examples/philly-replay.yaml); default one H100 flavor")
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if c.Candidates, err = sim.PickCandidates(*candidates); err != nil {
		return usageError{Msg: "-candidates: " + err.Error()}
	}
	if err := c.CheckRegimes(); err != nil {
		return usageError{Msg: err.Error()}
	}
	if c.Flavors, err = sim.LoadReplayFlavors(*clusterFile); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gpuledger policy-eval %s\n\n", strings.Join(args, " "))
	return sim.RunEval(ctx, c, stdout, os.Stderr, *out)
}
