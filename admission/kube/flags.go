package kube

import (
	"flag"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/config"
)

// RegisterFlags registers `gpuledger controller`'s flags of the weights
// and the budget check, each setting a field of o.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.Interval, "interval", 2*time.Minute, "how often the fair-sharing weights are computed")
	fs.DurationVar(&o.HalfLife, "halfLife", 7*24*time.Hour, "half-life of the decayed spend the weights follow")
	fs.Float64Var(&o.Hysteresis, "hysteresis", admission.DefaultHysteresis, "write a weight only when it moves by more than this fraction")
	fs.BoolVar(&o.DryRun, "dryRun", false, "compute the weights and write Events, but change no weight")
	fs.DurationVar(&o.DefaultDuration, "defaultDuration", 24*time.Hour, "how long a workload without maximumExecutionTimeSeconds is priced for by the budget check")
	fs.DurationVar(&o.RetryAfter, "retryAfter", 5*time.Minute, "requeueAfterSeconds of a workload held over its team's limit")
	fs.BoolVar(&o.FlavorTargets, "flavorTargets", false, "the budget check also holds a workload whose team holds its money-fair share of the flavor Kueue assigned while a team under its share waits for that flavor, and a team whose next workload would be held gets LocalQueue weight 0.001 (last in Admission Fair Sharing's order) until it would not be (an experiment: see docs/policy-eval)")
	fs.BoolVar(&o.ClusterQueueWeights, "clusterQueueWeights", false, "also set the fairSharing.weight of the ClusterQueues of every cohort, and of the Cohort objects under another, from their spend against what their nominal quotas are worth, for Kueue's cohort fair sharing (needs patch on clusterqueues and cohorts: the chart's controller.clusterQueueWeights)")
	fs.Float64Var(&o.IdlePenalty, "idlePenalty", 0, "the weights count an hour's idle cost (GPUs held while inactive) 1+this times; it lowered the GPU-hours held idle while others waited on most seeds of the mechanism scenario and widened the money gap on most (see docs/admission)")
	fs.DurationVar(&o.TargetRetryAfter, "flavorTargets.retryAfter", 30*time.Second, "requeueAfterSeconds of a workload held by the flavor targets")
}

// TeamsOf takes what the controller needs from the configuration: the
// queue and namespace owners of the cluster's cost model, the budgets (a
// team's limit, and its entitlement in the fair share) and the prices.
func TeamsOf(cfg *config.Config, cluster string) (Teams, error) {
	am, err := cfg.AttributionModel(cluster)
	if err != nil {
		return Teams{}, err
	}
	t := Teams{Cluster: am.Cluster, Currency: cfg.Currency, ByNamespace: am.NamespaceTeams, ByClusterQueue: am.ClusterQueueTeams,
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
