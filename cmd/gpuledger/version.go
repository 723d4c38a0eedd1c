package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v0.3.0".
var version = "dev"

func runVersion(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("version", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionLine())
	return nil
}

// versionLine is "gpuledger <version> (commit <rev>[, modified], committed
// <time>, <go version> <os>/<arch>)", from what the Go toolchain recorded
// (no commit when it recorded none).
func versionLine() string {
	commit, built, modified := "", "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				built = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := fmt.Sprintf("gpuledger %s (", version)
	if commit != "" { // absent when built with -buildvcs=false
		line += "commit " + commit
		if modified {
			line += ", modified"
		}
		if built != "" {
			line += ", committed " + built
		}
		line += ", "
	}
	return line + fmt.Sprintf("%s %s/%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
