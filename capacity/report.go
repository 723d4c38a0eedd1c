package capacity

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Report is what gpuledger capacity prints: the expansion verdicts per
// flavor and per ClusterQueue, who holds GPUs idle, the what-if replays,
// and the budgets.
type Report struct {
	Cluster  string
	At       time.Time
	Currency string
	Rule     Rule
	WaitRule WaitRule
	// Expansion and Waits are Evaluate's and EvaluateWaits' verdicts.
	Expansion []Recommendation
	Waits     []QueueWait
	// WhatIfs are the what-if replays' lines, over the last WhatIfDays.
	WhatIfs    []string
	WhatIfDays int
	Budgets    []Budget
}

// WriteText writes the report as tables.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Cluster %s as of %s: buy when a flavor's GPUs are %.0f%% %s over %.0f days, in blocks of %d GPUs; reclaim when held that much but busy less\n\n",
		r.Cluster, r.At.UTC().Format(time.RFC3339), 100*r.Rule.Threshold, r.Rule.Measure, r.Rule.Window.Hours()/24, r.Rule.PurchaseGPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "flavor\tGPUs\tallocated\tactive\tdaily allocated\thours with data\tverdict\tcost a month\tforecast\twhy")
	for _, e := range r.Expansion {
		verdict, cost := verdictCells(&e.Verdict, r.Currency)
		forecast := ""
		if !e.Forecast.IsZero() {
			forecast = e.Forecast.Format(time.DateOnly)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f%%\t%.1f%%\t%.1f%%-%.1f%%\t%d/%d\t%s\t%s\t%s\t%s\n", e.Flavor, e.GPUs, 100*e.Allocated, 100*e.Active,
			100*e.DailyMin, 100*e.DailyMax, e.HoursWithData, e.Hours, verdict, cost, forecast, e.Why)
	}
	if len(r.Expansion) == 0 {
		fmt.Fprintf(tw, "(no hours of cluster %s in the ledger)\n", r.Cluster)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nExpansion when a ClusterQueue's p%.0f wait for admission is over %s over %.0f days and their last day:\n",
		100*r.WaitRule.Quantile, Duration(r.WaitRule.Threshold.Seconds()), r.WaitRule.Window.Hours()/24)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cluster queue	flavor	wait	last day	admitted	pending	pending GPUs	hours with data	verdict	cost a month	forecast	why")
	for _, q := range r.Waits {
		verdict, cost := verdictCells(&q.Verdict, r.Currency)
		forecast := ""
		if !q.Forecast.IsZero() {
			forecast = q.Forecast.Format(time.DateOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%.1f\t%d/%d\t%s\t%s\t%s\t%s\n", q.ClusterQueue, q.Flavor, Duration(q.Wait),
			Duration(q.LastDay), q.Admitted, q.Pending, q.PendingGPUs, q.HoursWithData, q.Hours, verdict, cost, forecast, q.Why)
	}
	if len(r.Waits) == 0 {
		fmt.Fprintf(tw, "(no queue hours of cluster %s in the ledger: ingest Kueue's metrics, and run gpuledger controller for the pending workloads)\n", r.Cluster)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	reclaimHolders(w, r.Expansion, r.Waits, r.Currency)
	if len(r.WhatIfs) > 0 {
		fmt.Fprintf(w, "\nWhat-if, the last %d days' workloads replayed through the admission core as the cluster is, with idle workloads culled (capacity.reclaimIdleMinutes), and with the block:\n", r.WhatIfDays)
		for _, line := range r.WhatIfs {
			fmt.Fprintln(w, "  "+line)
		}
	}
	if len(r.Budgets) > 0 {
		fmt.Fprintf(w, "\nBudgets, %s:\n", ledger.StepMonth.Truncate(r.At).Format("2006-01"))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "team\tbudget\tspent\tforecast\treached\tforecast reaches")
		for _, b := range r.Budgets {
			pct := func(l int) string {
				if l == 0 {
					return "-"
				}
				return fmt.Sprintf("%d%%", l)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.Team, ledger.FormatCents(b.BudgetMicros), ledger.FormatCents(b.MonthToDateMicros),
				ledger.FormatCents(b.ForecastMicros), pct(b.Level), pct(b.ForecastLevel))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// verdictCells are a verdict's column and its cost a month: the block to
// buy and its price, or the GPUs held idle to reclaim and what they cost.
func verdictCells(v *Verdict, currency string) (string, string) {
	switch {
	case v.Fired:
		return fmt.Sprintf("buy +%d GPUs", v.PurchaseGPUs), ledger.FormatCents(v.MonthlyCostMicros) + " " + currency
	case v.Reclaim != nil:
		return fmt.Sprintf("reclaim %.1f idle GPUs", v.Reclaim.IdleGPUs), ledger.FormatCents(v.Reclaim.IdleCostMonthlyMicros) + " " + currency + " idle"
	}
	return "no", ""
}

// reclaimHolders prints, for each reclaim verdict, the namespaces that
// hold the most GPUs idle, and what each costs a month.
func reclaimHolders(w io.Writer, recs []Recommendation, waits []QueueWait, currency string) {
	var vs []*Verdict
	var names []string
	for i := range recs {
		if recs[i].Reclaim != nil {
			vs, names = append(vs, &recs[i].Verdict), append(names, "flavor "+recs[i].Flavor)
		}
	}
	for i := range waits {
		if waits[i].Reclaim != nil {
			vs, names = append(vs, &waits[i].Verdict), append(names, "ClusterQueue "+waits[i].ClusterQueue)
		}
	}
	if len(vs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nReclaim before buying: who holds GPUs idle (average over the window; idle: held, neither busy nor unmeasured):\n")
	for i, v := range vs {
		fmt.Fprintf(w, "  %s: %.1f GPUs held idle, %.1f%% of the held time busy, %s %s a month\n", names[i], v.Reclaim.IdleGPUs,
			100*v.Reclaim.HeldActive, ledger.FormatCents(v.Reclaim.IdleCostMonthlyMicros), currency)
		for _, h := range v.Reclaim.Holders {
			fmt.Fprintf(w, "    %s/%s (ClusterQueue %s): %.1f idle of %.1f held, %s %s a month\n", h.Team, h.Namespace, h.ClusterQueue,
				h.IdleGPUs, h.HeldGPUs, ledger.FormatCents(h.IdleCostMonthlyMicros), currency)
			if len(h.Workloads) > 0 {
				fmt.Fprintf(w, "      most idle workloads (over all its flavors): %s\n", IdleWorkloads(h.Workloads, currency))
			}
		}
	}
}
