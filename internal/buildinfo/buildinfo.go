// Package buildinfo says which build of gpuledger runs: its version, the
// commit it was built from and the Go toolchain, from what the toolchain
// recorded in the binary.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Line is "gpuledger <version> (commit <rev>[, modified], committed
// <time>, <go version> <os>/<arch>)", from what the Go toolchain recorded
// (no commit when it recorded none).
func Line(version string) string {
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
