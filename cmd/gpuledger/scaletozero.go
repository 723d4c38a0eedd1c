package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runScaleToZero(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("scale-to-zero", stdout)
	var f capacity.ScaleToZeroFlags
	f.Register(fs)
	cfgPath := config.Flag(fs, "with -month: the configuration whose capacity section prices cold starts (coldStartSeconds, coldStartModels, coldStartPenalty, slaClasses) and whose flavors price GPU-hours the ledger has no workload rate for; the flags given explicitly override its defaults")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Read)
	newLogger := flagutil.Logger(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var cfg *config.Config
	if !f.Month.IsZero() && f.Requests == "" {
		// Without -config and none to find, capacity's defaults.
		c, _, err := config.Locate(*cfgPath, os.Stderr)
		var none usageError
		if err != nil && (*cfgPath != "" || !errors.As(err, &none)) {
			return err
		}
		cfg = c
	}
	f.Run.Command, f.Run.Progress = "gpuledger scale-to-zero "+strings.Join(args, " "), os.Stderr
	return f.Execute(ctx, stdout, func(name string) bool { return set[name] }, cfg,
		func(ctx context.Context) (ledger.Store, error) { return openStore(ctx, newLogger()) })
}
