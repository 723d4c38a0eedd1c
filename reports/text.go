package reports

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/gpuledger/gpuledger/ledger"
)

// WriteFiles writes the chargeback into dir in each format (csv, xlsx,
// named FileBase().<format>; focus, named FocusFileName()) and returns the
// paths.
func (cb *Chargeback) WriteFiles(dir string, formats []string) ([]string, error) {
	for _, f := range formats {
		if f != "csv" && f != "xlsx" && f != "focus" {
			return nil, fmt.Errorf("report format %q: want csv, xlsx or focus", f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create report folder: %w", err)
	}
	var paths []string
	for _, f := range formats {
		p := filepath.Join(dir, cb.FileBase()+"."+f)
		if f == "focus" {
			p = filepath.Join(dir, cb.FocusFileName())
		}
		w, err := os.Create(p)
		if err != nil {
			return nil, fmt.Errorf("create report: %w", err)
		}
		switch f {
		case "csv":
			err = cb.WriteCSV(w)
		case "xlsx":
			err = cb.WriteXLSX(w)
		case "focus":
			err = cb.WriteFOCUS(w)
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// FormatMoney formats micro-units as a whole-cent amount for display,
// rounded half to even.
func FormatMoney(v int64) string { return ledger.FormatCents(v) }

// cents formats a number of cents (exact: whole cents need no rounding).
func cents(c int64) string { return ledger.FormatCents(c * ledger.MicrosPerCent) }

// WriteTable prints the chargeback's lines and TOTAL as a text table
// whose columns add up: each column's TOTAL is rounded half to even and its rows
// are the largest-remainder split of it in cents (tenths of GPU-hours).
func (cb *Chargeback) WriteTable(w io.Writer) {
	lines := append(slices.Clone(cb.Lines), cb.Total)
	col := func(f func(l *Line) int64) []int64 {
		v := make([]int64, len(lines))
		for i := range lines {
			v[i] = f(&lines[i])
		}
		return RoundCents(v)
	}
	hours := make([]float64, len(lines))
	unmeasured := make([]float64, len(lines))
	for i := range lines {
		hours[i], unmeasured[i] = lines[i].GPUHours, lines[i].UnmeasuredGPUHours
	}
	gpuH, unmH := RoundTenths(hours), RoundTenths(unmeasured)
	cost := col(func(l *Line) int64 { return l.CostMicros })
	idle := col(func(l *Line) int64 { return l.IdleCostMicros })
	unm := col(func(l *Line) int64 { return l.UnmeasuredCostMicros })
	unalloc := col(func(l *Line) int64 { return l.UnallocatedCostMicros })
	borrowed := col(func(l *Line) int64 { return l.BorrowedCostMicros })
	energy := col(func(l *Line) int64 { return l.EnergyCostMicros })
	budget := col(func(l *Line) int64 { return l.BudgetMicros })
	variance := col(func(l *Line) int64 {
		if !l.HasBudget {
			return 0
		}
		return l.VarianceMicros()
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "team\tGPU-hours\tunmeasured\tefficiency\tcost\tidle\tunmeasured\tunallocated\tborrowed\tenergy\tbudget\tvariance\t")
	for i := range lines {
		l := &lines[i]
		b, v := "", ""
		if l.HasBudget {
			b, v = cents(budget[i]), cents(variance[i])
		}
		fmt.Fprintf(tw, "%s\t%d.%d\t%d.%d\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Team, gpuH[i]/10, gpuH[i]%10, unmH[i]/10, unmH[i]%10,
			l.EfficiencyPct(), cents(cost[i]), cents(idle[i]), cents(unm[i]), cents(unalloc[i]), cents(borrowed[i]), cents(energy[i]), b, v)
	}
	tw.Flush()
	fmt.Fprintln(w, "Each column is rounded so that its rows add up to its TOTAL (largest remainder; the CSV has exact micro-units).")
	fmt.Fprintln(w, "Unmeasured: held by the team's pods per Kubernetes while no telemetry measured the GPU; efficiency leaves it out.")
	fmt.Fprintln(w, "TOTAL budget and variance cover the teams with budgets; _unowned and _unallocated are platform overhead, in no budget.")
}

// WriteIdleWorkloads prints the n workloads with the most idle cost (the
// order of cb.Workloads): GPU-hours, efficiency over measured time, idle
// cost.
func (cb *Chargeback) WriteIdleWorkloads(w io.Writer, n int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  team\tworkload\tGPU-hours\tefficiency\tidle cost")
	for i, wl := range cb.Workloads {
		if i == n {
			break
		}
		eff := 0.0
		if measured := wl.GPUSeconds - wl.UnmeasuredGPUSeconds; measured > 0 {
			eff = 100 * wl.ActiveGPUSeconds / measured
		}
		fmt.Fprintf(tw, "  %s\t%s/%s (%s)\t%.1f\t%.1f%%\t%s\n", wl.Team, wl.Namespace, wl.Name, wl.Kind, wl.GPUSeconds/3600, eff, FormatMoney(wl.IdleCostMicros))
	}
	tw.Flush()
}

// WriteSummary prints the month's chargeback table, what the cluster's
// gpus GPUs cost, the energy beside it, and the five most idle workloads.
func (cb *Chargeback) WriteSummary(w io.Writer, gpus int) {
	fmt.Fprintf(w, "\nChargeback %s (%s):\n", cb.Month.Format("2006-01"), cb.Currency)
	cb.WriteTable(w)
	fmt.Fprintf(w, "Cluster cost %s = %d GPUs at their rates for %.0f hours; every hour reconciles to the micro.\n",
		FormatMoney(cb.Total.CostMicros), gpus, cb.Total.GPUHours/float64(gpus))
	fmt.Fprintf(w, "Energy %.0f kWh, %s at the configured price and PUE (beside the cost, not in it).\n", cb.Total.EnergyKWh, FormatMoney(cb.Total.EnergyCostMicros))
	if len(cb.Workloads) > 0 {
		fmt.Fprintf(w, "\nMost idle workloads:\n")
		cb.WriteIdleWorkloads(w, 5)
	}
	fmt.Fprintln(w)
}
