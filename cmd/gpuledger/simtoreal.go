package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/sim/simtoreal"
)

func runSimToReal(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("sim-to-real", stdout)
	var o simtoreal.Options
	o.RegisterFlags(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return usageError{Msg: err.Error()}
	}
	o.Command, o.Progress = "gpuledger sim-to-real "+strings.Join(args, " "), os.Stderr
	return simtoreal.Run(ctx, stdout, o)
}
