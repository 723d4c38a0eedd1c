package admission

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// LedgerSpend is the cost-weighted share's source in production: each
// team's money as the ledger has it, every hour's cost and energy cost,
// decayed by its age (from the hour's middle) with HalfLife, so that the
// order follows what was spent, not what the scheduler thinks it handed
// out. Idle time is money spent like any other, unless IdlePenalty says
// otherwise.
type LedgerSpend struct {
	Store    ledger.Store
	Cluster  string
	HalfLife time.Duration
	// IdlePenalty counts an hour's idle cost (GPUs held while inactive)
	// 1+IdlePenalty times; 0, the default, counts it once. An option with
	// a price: on the mechanism scenario with notebooks holding GPUs idle
	// it lowered the GPU-hours held idle while other teams waited on most
	// seeds and widened the money gap on most (docs/admission/README.md).
	IdlePenalty float64
	// Epoch is the earliest hour read; hours older than 20 half-lives
	// weigh under a millionth and are not read either.
	Epoch time.Time
	// By is whose spend: ledger.DimTeam (the default) or
	// ledger.DimClusterQueue.
	By ledger.Dimension
}

// Spend returns each team's (or ClusterQueue's) decayed spend at now over
// the hours written up to through (micros).
func (l LedgerSpend) Spend(ctx context.Context, now, through time.Time) (map[string]float64, error) {
	out, _, err := l.SpendThrough(ctx, now, through)
	return out, err
}

// SpendThrough is Spend, and the end of the newest hour it read (zero when
// it read none): what the ledger has settled, and so where an estimate of
// the spend since has to start.
func (l LedgerSpend) SpendThrough(ctx context.Context, now, through time.Time) (map[string]float64, time.Time, error) {
	if err := CheckIdlePenalty(l.IdlePenalty); err != nil {
		return nil, time.Time{}, err
	}
	from := through.Add(-20 * l.HalfLife)
	if from.Before(l.Epoch) {
		from = l.Epoch
	}
	by := l.By
	switch by {
	case "":
		by = ledger.DimTeam
	case ledger.DimTeam, ledger.DimClusterQueue:
	default:
		return nil, time.Time{}, fmt.Errorf("spend by %q: want %s or %s", by, ledger.DimTeam, ledger.DimClusterQueue)
	}
	rows, err := l.Store.Query(ctx, ledger.Query{From: from, To: through, Step: ledger.StepHour,
		GroupBy: []ledger.Dimension{by}, Cluster: l.Cluster})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the %ss' spend from the ledger: %w", by, err)
	}
	out := map[string]float64{}
	var settled time.Time
	for _, r := range rows {
		if end := r.Hour.Add(time.Hour); end.After(settled) {
			settled = end
		}
		key := r.Team
		if by == ledger.DimClusterQueue {
			key = r.ClusterQueue
		}
		if key == "" || key == ledger.TeamUnallocated {
			continue
		}
		age := now.Sub(r.Hour.Add(30 * time.Minute))
		v := float64(r.CostMicros+r.EnergyCostMicros) + l.IdlePenalty*float64(r.IdleCostMicros)
		out[key] += v * math.Exp2(-age.Seconds()/l.HalfLife.Seconds())
	}
	return out, settled, nil
}

// CheckIdlePenalty refuses an idle penalty LedgerSpend cannot count: a
// negative or non-finite one.
func CheckIdlePenalty(p float64) error {
	if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
		return fmt.Errorf("idle penalty %v: want a number of 0 or more (0: idle time costs what it costs)", p)
	}
	return nil
}
