package capacity

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger"
)

// Assessment are the verdicts of one evaluation and the alerts they raise.
type Assessment struct {
	Report Report
	Alerts []Alert
}

// AssessOptions are what one evaluation reads.
type AssessOptions struct {
	Store   ledger.Store
	Config  *config.Config
	Cluster string
	Now     time.Time
	// Prices are the flavors' prices per GPU-hour, in micro-units.
	Prices map[string]int64
	// WhatIfs, when set, replays the verdicts (sim.WhatIfs) over the last
	// WhatIfDays.
	WhatIfs    func(ctx context.Context, now time.Time, recs []Recommendation, waits []QueueWait) ([]string, error)
	WhatIfDays int
}

// Assess evaluates the expansion trigger, the queue-wait trigger and the
// budgets, and the alerts they raise.
func Assess(ctx context.Context, o AssessOptions) (*Assessment, error) {
	rule, wr := RuleOf(o.Config.Capacity), WaitRuleOf(o.Config.Capacity)
	recs, err := Evaluate(ctx, o.Store, o.Cluster, o.Now, rule, o.Prices)
	if err != nil {
		return nil, err
	}
	waits, err := EvaluateWaits(ctx, o.Store, o.Cluster, o.Now, wr, o.Prices)
	if err != nil {
		return nil, err
	}
	budgets, err := Budgets(ctx, o.Store, o.Cluster, o.Config.TeamBudgets(), o.Now)
	if err != nil {
		return nil, err
	}
	var whatIfs []string
	if o.WhatIfs != nil {
		if whatIfs, err = o.WhatIfs(ctx, o.Now, recs, waits); err != nil {
			return nil, err
		}
	}
	cur := o.Config.Currency
	a := &Assessment{Report: Report{Cluster: o.Cluster, At: o.Now, Currency: cur, Rule: rule, WaitRule: wr, Expansion: recs, Waits: waits,
		WhatIfs: whatIfs, WhatIfDays: o.WhatIfDays, Budgets: budgets}}
	a.Alerts = append(ExpansionAlerts(o.Cluster, cur, recs), WaitAlerts(o.Cluster, cur, waits)...)
	a.Alerts = append(a.Alerts, BudgetAlerts(o.Cluster, cur, budgets)...)
	return a, nil
}

// AlertNames are the alerts as name{flavor,cluster_queue,team}, for a line.
func (a *Assessment) AlertNames() string {
	var names []string
	for _, al := range a.Alerts {
		labels := slices.DeleteFunc([]string{al.Labels["flavor"], al.Labels["cluster_queue"], al.Labels["team"]}, func(s string) bool { return s == "" })
		names = append(names, al.Labels["alertname"]+"{"+strings.Join(labels, ",")+"}")
	}
	return strings.Join(names, ", ")
}
