package reports

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// ErrNoLines says the store keeps no lines (ledger.LineStore).
var ErrNoLines = errors.New("this ledger keeps no lines to explain its figures")

// ExplainQuery asks why a team, or one of its workloads, paid what it did
// over [From, To).
type ExplainQuery struct {
	From, To time.Time
	// Cluster narrows to one cluster; empty: every cluster.
	Cluster string
	// Team is the team explained; empty: every team (an admin's view).
	Team string
	// Namespace and Workload (its name) narrow to one workload's lines:
	// what the workload's pods held, without the team's share of the
	// unallocated.
	Namespace, Workload string
	// Limit bounds the lines returned, largest first; Total and
	// LineCount are over all of them. 0: 100.
	Limit int
}

// Explanation is the answer: the ledger's figures, the lines that make
// them up, and whether they agree.
type Explanation struct {
	Query ExplainQuery
	// Ledger is the figure being explained: the team's rows summed over
	// the range (Query.Team), or the workload's workload rows. Only its
	// money and GPU-seconds are set.
	Ledger ledger.Row
	// Lines are the largest lines (ledger.LineStore.Lines, by cost), at
	// most Query.Limit; Total sums every line, LineCount counts them.
	Lines     []ledger.Line
	Total     ledger.Line
	LineCount int
	// Reconciled says the lines sum to the ledger's figure, every money
	// field to the micro-unit (the workload's: cost, idle and
	// unmeasured). When they do not, the hours were rewritten between
	// the two writes (a crash): writing them again mends it.
	Reconciled bool
	// Restatements are the rewrites of the range's hours of the team:
	// figures changed after they were first written.
	Restatements []ledger.Restatement
}

// Explain answers q from store, which must keep lines.
func Explain(ctx context.Context, store ledger.Store, q ExplainQuery) (Explanation, error) {
	ex := Explanation{Query: q}
	ls, ok := store.(ledger.LineStore)
	if !ok {
		return ex, ErrNoLines
	}
	if q.Limit <= 0 {
		ex.Query.Limit = 100
	}
	if (q.Namespace == "") != (q.Workload == "") {
		return ex, fmt.Errorf("explain: a workload is named by its namespace and its name; got namespace %q and workload %q", q.Namespace, q.Workload)
	}
	lines, err := ls.Lines(ctx, ledger.LineQuery{From: q.From, To: q.To, Cluster: q.Cluster, Team: q.Team, Namespace: q.Namespace, Workload: q.Workload})
	if err != nil {
		return ex, err
	}
	ex.LineCount = len(lines)
	ex.Total = ledger.Line{Key: ledger.Key{Hour: q.From, Cluster: q.Cluster, Team: q.Team}}
	for i := range lines {
		ex.Total.AddFigures(&lines[i])
	}
	ex.Lines = lines[:min(len(lines), ex.Query.Limit)]
	if q.Workload == "" {
		rows, err := store.Query(ctx, ledger.Query{From: q.From, To: q.To, Step: ledger.StepHour, GroupBy: []ledger.Dimension{ledger.DimTeam},
			Cluster: q.Cluster, Team: q.Team})
		if err != nil {
			return ex, err
		}
		for _, r := range rows {
			ex.Ledger.GPUSeconds += r.GPUSeconds
			ex.Ledger.ActiveGPUSeconds += r.ActiveGPUSeconds
			ex.Ledger.UnmeasuredGPUSeconds += r.UnmeasuredGPUSeconds
			ex.Ledger.CostMicros += r.CostMicros
			ex.Ledger.IdleCostMicros += r.IdleCostMicros
			ex.Ledger.UnmeasuredCostMicros += r.UnmeasuredCostMicros
			ex.Ledger.UnallocatedCostMicros += r.UnallocatedCostMicros
			ex.Ledger.EnergyCostMicros += r.EnergyCostMicros
		}
		t := &ex.Total
		ex.Reconciled = t.CostMicros == ex.Ledger.CostMicros && t.IdleCostMicros == ex.Ledger.IdleCostMicros &&
			t.UnmeasuredCostMicros == ex.Ledger.UnmeasuredCostMicros && t.UnallocatedCostMicros == ex.Ledger.UnallocatedCostMicros &&
			t.EnergyCostMicros == ex.Ledger.EnergyCostMicros
	} else {
		wls, err := store.TopWorkloads(ctx, ledger.Query{From: q.From, To: q.To, Cluster: q.Cluster, Team: q.Team}, math.MaxInt32)
		if err != nil {
			return ex, err
		}
		for _, w := range wls {
			if w.Namespace != q.Namespace || w.Name != q.Workload {
				continue
			}
			ex.Ledger.GPUSeconds += w.GPUSeconds
			ex.Ledger.ActiveGPUSeconds += w.ActiveGPUSeconds
			ex.Ledger.UnmeasuredGPUSeconds += w.UnmeasuredGPUSeconds
			ex.Ledger.CostMicros += w.CostMicros
			ex.Ledger.IdleCostMicros += w.IdleCostMicros
			ex.Ledger.UnmeasuredCostMicros += w.UnmeasuredCostMicros
		}
		t := &ex.Total
		ex.Reconciled = t.CostMicros == ex.Ledger.CostMicros && t.IdleCostMicros == ex.Ledger.IdleCostMicros &&
			t.UnmeasuredCostMicros == ex.Ledger.UnmeasuredCostMicros
	}
	rs, err := store.Restatements(ctx, q.Cluster, q.From, q.To)
	if err != nil {
		return ex, err
	}
	for _, r := range rs {
		if q.Team == "" || r.Team == q.Team {
			ex.Restatements = append(ex.Restatements, r)
		}
	}
	return ex, nil
}

// WriteText writes the explanation for people: the figure, whether the
// lines reconcile with it, the parts of it, and the largest lines.
func (ex *Explanation) WriteText(w io.Writer, currency string) error {
	q := &ex.Query
	what := "every team"
	switch {
	case q.Workload != "":
		what = fmt.Sprintf("workload %s/%s", q.Namespace, q.Workload)
		if q.Team != "" {
			what += " of team " + q.Team
		}
	case q.Team != "":
		what = "team " + q.Team
	}
	cluster := "every cluster"
	if q.Cluster != "" {
		cluster = "cluster " + q.Cluster
	}
	verdict := "they reconcile to the micro-unit"
	if !ex.Reconciled {
		verdict = fmt.Sprintf("they do NOT reconcile (lines %s): the hours were rewritten between the lines and the rows; write them again",
			ledger.FormatMicros(ex.Total.CostMicros))
	}
	if ex.LineCount == 0 && ex.Ledger.CostMicros == 0 && ex.Ledger.GPUSeconds == 0 {
		_, err := fmt.Fprintf(w, "%s, %s, %s to %s: the ledger has nothing of it; check the team, the namespace/name and the range.\n", what, cluster,
			q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
		return err
	}
	fmt.Fprintf(w, "%s, %s, %s to %s: %s %s in the ledger; %d lines make it up, and %s.\n", what, cluster,
		q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), ledger.FormatMicros(ex.Ledger.CostMicros), currency, ex.LineCount, verdict)
	l := &ex.Ledger
	fmt.Fprintf(w, "  held %.1f GPU-h (busy %.1f, unmeasured %.1f); idle %s, unmeasured %s, unallocated share %s; the lines' energy %s (beside the cost)\n",
		l.GPUSeconds/3600, l.ActiveGPUSeconds/3600, l.UnmeasuredGPUSeconds/3600, ledger.FormatMicros(l.IdleCostMicros),
		ledger.FormatMicros(l.UnmeasuredCostMicros), ledger.FormatMicros(l.UnallocatedCostMicros), ledger.FormatMicros(ex.Total.EnergyCostMicros))
	for _, r := range ex.Restatements {
		fmt.Fprintf(w, "  restated: team %s hour %s from %s to %s by %s (%s)\n", r.Team, r.Hour.Format(time.RFC3339),
			ledger.FormatMicros(r.BeforeMicros), ledger.FormatMicros(r.AfterMicros), r.Source, r.Reason)
	}
	if len(ex.Lines) < ex.LineCount {
		fmt.Fprintf(w, "\nThe %d largest lines of %d:\n", len(ex.Lines), ex.LineCount)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cost\tidle\tGPU-h\tbusy\tunmeasured\trate/h\tkind\tteam\tflavor\tdevice\tholder\t")
	for i := range ex.Lines {
		x := &ex.Lines[i]
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", ledger.FormatMicros(x.CostMicros), ledger.FormatMicros(x.IdleCostMicros),
			x.GPUSeconds/3600, x.ActiveGPUSeconds/3600, x.UnmeasuredGPUSeconds/3600, ledger.FormatMicros(x.RateMicrosPerHour), x.Kind, x.Team,
			x.Flavor, x.Device(), x.Holder())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sources := map[string]string{}
	var flavors []string
	for i := range ex.Lines {
		x := &ex.Lines[i]
		if _, ok := sources[x.Flavor]; !ok && x.RateSource != "" {
			sources[x.Flavor] = x.RateSource
			flavors = append(flavors, x.Flavor)
		}
	}
	slices.Sort(flavors)
	for _, f := range flavors {
		if _, err := fmt.Fprintf(w, "  rate of %s: %s\n", f, sources[f]); err != nil {
			return err
		}
	}
	return nil
}

// WriteCSV writes every line of the explanation (Query.Limit should not
// cut them: Explain with a Limit of at least LineCount), one a row, money
// as decimals of the currency.
func (ex *Explanation) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"from", "to", "cluster", "team", "namespace", "local_queue", "cluster_queue", "flavor", "kind", "node", "gpu", "mig",
		"pod", "workload_kind", "workload", "rate_per_gpu_hour", "rate_source", "gpu_hours", "busy_gpu_hours", "unmeasured_gpu_hours", "cost", "idle_cost",
		"unmeasured_cost", "unallocated_cost", "energy_cost"}); err != nil {
		return err
	}
	from, to := ex.Query.From.Format(time.RFC3339), ex.Query.To.Format(time.RFC3339)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for i := range ex.Lines {
		x := &ex.Lines[i]
		if err := cw.Write([]string{from, to, x.Cluster, x.Team, x.Namespace, x.LocalQueue, x.ClusterQueue, x.Flavor, string(x.Kind), x.Node, x.GPU,
			x.MIG, x.Pod, x.WorkloadKind, x.Workload, ledger.FormatMicros(x.RateMicrosPerHour), x.RateSource, f(x.GPUSeconds / 3600), f(x.ActiveGPUSeconds / 3600),
			f(x.UnmeasuredGPUSeconds / 3600), ledger.FormatMicros(x.CostMicros), ledger.FormatMicros(x.IdleCostMicros),
			ledger.FormatMicros(x.UnmeasuredCostMicros), ledger.FormatMicros(x.UnallocatedCostMicros), ledger.FormatMicros(x.EnergyCostMicros)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
