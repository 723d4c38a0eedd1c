package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gpuledger/gpuledger/internal/buildinfo"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// version is set at build time: go build -ldflags "-X main.version=v0.3.0".
var version = "dev"

func runVersion(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("version", stdout)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, buildinfo.Line(version))
	return nil
}
