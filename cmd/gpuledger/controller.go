package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gpuledger/gpuledger/admission/kube"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runController(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("controller", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (teams, prices, budgets)")
	cluster := fs.String("cluster", "", "cluster of the configuration this Kueue runs; empty for the only one")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Write)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; default $KUBECONFIG, else the in-cluster service account")
	var o kube.Options
	o.RegisterFlags(fs)
	leaderElect := fs.Bool("leaderElect", false, "hold a Lease so that of several replicas one acts")
	leaseNS := fs.String("leaderElection.namespace", "gpuledger", "namespace of the Lease")
	listen := fs.String("http.listenAddr", "127.0.0.1:9402", "address of /metrics and /healthz (\":9402\" in a pod, for scraping); empty for none")
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	teams, err := kube.TeamsOf(cfg, *cluster)
	if err != nil {
		return err
	}
	rc, err := kube.RestConfig(*kubeconfig)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	o.Teams, o.Store, o.Log = teams, store, log
	c, err := kube.New(rc, o)
	if err != nil {
		return err
	}
	if *listen != "" {
		stop, err := c.ServeMetrics(ctx, *listen)
		if err != nil {
			return fmt.Errorf("%w; pass another -http.listenAddr, or an empty one for no metrics", err)
		}
		defer stop()
	}
	log.Info("controller started", "cluster", teams.Cluster, "dryRun", o.DryRun, "leaderElect", *leaderElect, "metrics", *listen)
	if *leaderElect {
		host, _ := os.Hostname()
		return kube.RunElected(ctx, c, *leaseNS, "gpuledger-controller", fmt.Sprintf("%s-%d", host, os.Getpid()))
	}
	return c.Run(ctx)
}
