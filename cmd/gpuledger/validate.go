package main

import (
	"context"
	"io"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

func runValidate(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("validate", stdout)
	path := fs.String("config", "", "configuration file to check (required), such as examples/cluster.yaml")
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return flagutil.Usagef("validate needs -config FILE, such as -config examples/cluster.yaml")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	cfg.WriteSummary(stdout, *path)
	return nil
}
