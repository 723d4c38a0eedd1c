package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// Where a command looks for its configuration when -config is not given.
const (
	Env      = "GPULEDGER_CONFIG"
	Standard = "/etc/gpuledger/config.yaml"
	Example  = "examples/cluster.yaml"
)

// Flag registers -config with the search order in its help.
func Flag(fs *flag.FlagSet, what string) *string {
	return fs.String("config", "", fmt.Sprintf("%s; default: $%s, else %s, else %s in a checkout of the repository", what, Env, Standard, Example))
}

// Find says which configuration file to read and why: the flag, the
// environment variable, the standard path, or the repository's example
// (for a checkout). With none of them it is a flagutil.UsageError that
// says what to do.
func Find(flagValue string) (path, why string, err error) {
	switch {
	case flagValue != "":
		return flagValue, "-config", nil
	case os.Getenv(Env) != "":
		return os.Getenv(Env), "$" + Env, nil
	}
	for _, c := range []struct{ path, why string }{{Standard, "the standard path"}, {Example, "the example of this checkout"}} {
		if _, err := os.Stat(c.path); err == nil {
			return c.path, c.why, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("config %s: %w", c.path, err)
		}
	}
	return "", "", flagutil.Usagef("no configuration found: pass -config, set %s, or put one at %s (%s in the repository shows the format)",
		Env, Standard, Example)
}

// Locate finds the configuration (Find), says on w which file it reads
// and why, reads it, and writes its warnings to w; it returns the file it
// read.
func Locate(flagValue string, w io.Writer) (*Config, string, error) {
	path, why, err := Find(flagValue)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(w, "gpuledger: configuration %s (from %s)\n", path, why)
	cfg, err := Load(path)
	if err != nil {
		return nil, path, err
	}
	for _, warn := range cfg.Warnings {
		fmt.Fprintf(w, "gpuledger: configuration warning: %s\n", warn.Format(path))
	}
	return cfg, path, nil
}

// WriteSummary writes what the file at path holds, as `gpuledger
// validate` reports it: its warnings, then the counts of clusters,
// nodes, GPUs, queues and teams.
func (c *Config) WriteSummary(w io.Writer, path string) {
	gpus, nodes := 0, 0
	for _, cl := range c.Clusters {
		for _, n := range cl.Nodes {
			nodes++
			gpus += n.GPUs
		}
	}
	for _, warn := range c.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn.Format(path))
	}
	fmt.Fprintf(w, "%s: ok: %d cluster(s), %d nodes, %d GPUs, %d ClusterQueues, %d LocalQueues, %d teams, %d warning(s)\n",
		path, len(c.Clusters), nodes, gpus, len(c.ClusterQueues), len(c.LocalQueues), len(c.Teams), len(c.Warnings))
}
