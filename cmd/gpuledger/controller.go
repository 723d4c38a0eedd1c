package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/admission/kube"
	"github.com/gpuledger/gpuledger/config"
)

func runController(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("controller", stdout)
	cfgPath := configFlag(fs, "business-data configuration file (teams, prices, budgets)")
	cluster := fs.String("cluster", "", "cluster of the configuration this Kueue runs; empty for the only one")
	openStore := storeFlags(fs, defaultLedgerPath, storeWrite)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; default $KUBECONFIG, else the in-cluster service account")
	interval := fs.Duration("interval", 2*time.Minute, "how often the fair-sharing weights are computed")
	halfLife := fs.Duration("halfLife", 7*24*time.Hour, "half-life of the decayed spend the weights follow")
	hysteresis := fs.Float64("hysteresis", 0.1, "write a weight only when it moves by more than this fraction")
	dryRun := fs.Bool("dryRun", false, "compute the weights and write Events, but change no weight")
	defaultDuration := fs.Duration("defaultDuration", 24*time.Hour, "how long a workload without maximumExecutionTimeSeconds is priced for by the budget check")
	retryAfter := fs.Duration("retryAfter", 5*time.Minute, "requeueAfterSeconds of a workload held over its team's limit")
	flavorTargets := fs.Bool("flavorTargets", false, "the budget check also holds a workload whose team holds its money-fair share of the flavor Kueue assigned while a team under its share waits for that flavor (an experiment: see docs/policy-eval)")
	targetRetryAfter := fs.Duration("flavorTargets.retryAfter", 30*time.Second, "requeueAfterSeconds of a workload held by the flavor targets")
	leaderElect := fs.Bool("leaderElect", false, "hold a Lease so that of several replicas one acts")
	leaseNS := fs.String("leaderElection.namespace", "gpuledger", "namespace of the Lease")
	listen := fs.String("http.listenAddr", "127.0.0.1:9402", "address of /metrics and /healthz (\":9402\" in a pod, for scraping); empty for none")
	newLogger := logFlags(fs)
	log, cfg, err := parseWithConfig(fs, args, cfgPath, newLogger)
	if err != nil {
		return err
	}
	teams, err := kubeTeams(cfg, *cluster)
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
	c, err := kube.New(rc, kube.Options{Teams: teams, Store: store, Interval: *interval, HalfLife: *halfLife,
		Hysteresis: *hysteresis, DryRun: *dryRun, DefaultDuration: *defaultDuration, RetryAfter: *retryAfter, Log: log,
		FlavorTargets: *flavorTargets, TargetRetryAfter: *targetRetryAfter})
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
	log.Info("controller started", "cluster", teams.Cluster, "dryRun", *dryRun, "leaderElect", *leaderElect, "metrics", *listen)
	if *leaderElect {
		host, _ := os.Hostname()
		return kube.RunElected(ctx, c, *leaseNS, "gpuledger-controller", fmt.Sprintf("%s-%d", host, os.Getpid()))
	}
	return c.Run(ctx)
}

// kubeTeams takes what the controller needs from the configuration: the
// queue and namespace owners of the cluster's cost model, the budgets (a
// team's limit, and its entitlement in the fair share) and the prices.
func kubeTeams(cfg *config.Config, cluster string) (kube.Teams, error) {
	am, err := cfg.AttributionModel(cluster)
	if err != nil {
		return kube.Teams{}, err
	}
	t := kube.Teams{Cluster: am.Cluster, Currency: cfg.Currency, ByNamespace: am.NamespaceTeams, ByClusterQueue: am.ClusterQueueTeams,
		LimitMicros: map[string]int64{}, Entitlement: map[string]float64{}, PriceMicrosPerGPUHour: map[string]int64{}}
	for team, budget := range cfg.TeamBudgets() {
		if budget > 0 {
			t.LimitMicros[team] = budget
			t.Entitlement[team] = float64(budget)
		}
	}
	for _, f := range cfg.ResourceFlavors {
		t.PriceMicrosPerGPUHour[f.Name] = cfg.PriceMicros(f.Name)
	}
	return t, nil
}
