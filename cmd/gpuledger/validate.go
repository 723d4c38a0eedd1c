package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gpuledger/gpuledger/config"
)

func runValidate(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("validate", stdout)
	path := fs.String("config", "", "configuration file to check (required), such as examples/cluster.yaml")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{"validate needs -config FILE, such as -config examples/cluster.yaml"}
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	gpus, nodes := 0, 0
	for _, c := range cfg.Clusters {
		for _, n := range c.Nodes {
			nodes++
			gpus += n.GPUs
		}
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w.Format(*path))
	}
	fmt.Fprintf(stdout, "%s: ok: %d cluster(s), %d nodes, %d GPUs, %d ClusterQueues, %d LocalQueues, %d teams, %d warning(s)\n",
		*path, len(cfg.Clusters), nodes, gpus, len(cfg.ClusterQueues), len(cfg.LocalQueues), len(cfg.Teams), len(cfg.Warnings))
	return nil
}
