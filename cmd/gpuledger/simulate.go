package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/sim"
	"github.com/gpuledger/gpuledger/sim/demo"
)

func runSimulate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("simulate", stdout)
	var f sim.SimulateFlags
	f.Register(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	w, err := sim.LoadWorkload(f.Workload)
	if errors.Is(err, sim.ErrWorkload) {
		return usageError{Msg: "-workload: " + err.Error()}
	} else if err != nil {
		return err
	}
	// Kueue's configurations preempt unless told otherwise.
	o, set := f.Replay, false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "preemption" })
	o.Preemption = o.Preemption || (!set && w.Preempts)
	fmt.Fprintf(stdout, "%s, gating %v, preemption %v.\n\n", w.Summary, o.Gating, o.Preemption)
	if o.Flavors, err = sim.LoadReplayFlavors(f.ClusterFile); err != nil {
		return err
	}
	s := sim.Simulation{Workload: w, Base: o, Policies: f.Policies, FTF: f.FTF, Progress: os.Stderr}
	if f.Loop {
		s.Loop = demo.ClosedLoop(f.Out)
	}
	if err := s.Run(ctx, stdout, f.Out); errors.Is(err, admission.ErrPolicy) {
		return usageError{Msg: err.Error()}
	} else if err != nil {
		return err
	}
	return nil
}
