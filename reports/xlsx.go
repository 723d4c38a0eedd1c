package reports

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// Sheet names of the workbook.
const (
	SheetSummary   = "Summary"
	SheetDaily     = "Daily"
	SheetWorkloads = "Workloads"
	SheetMethod    = "Method"
	SheetCapacity  = "Capacity"
	// SheetRestatements lists the adjustments billed this month and the
	// rewrites of this month's hours.
	SheetRestatements = "Restatements"
)

// methodText explains every column; it is the workbook's Method sheet and
// the README's formulas.
var methodText = []string{
	"How this chargeback is computed",
	"",
	"Who held a GPU: what Kubernetes allocated, then what DCGM saw. NVIDIA dcgm-exporter series per GPU and MIG instance name the pod holding the device (namespace/pod, or exported_namespace/exported_pod after a scrape with honorLabels false; the exporter's own pod is never a holder). kube-state-metrics says which pods were Running on which node with which GPU requests (nvidia.com/gpu, nvidia.com/mig-<profile>, shared and milli-GPU resources). Pods join Kueue LocalQueues through their label kueue.x-k8s.io/queue-name (on the DCGM series or kube_pod_labels), then ClusterQueues and teams through the configuration file.",
	"Intervals: a sample counts from its timestamp until the device's next sample (gaps over 5 minutes are not bridged: the last sample counts for one scrape interval and the rest is unobserved). An hour is closed once data 5 minutes past its end arrived, so it does not depend on how the data was read.",
	"Unmeasured: time a Running pod held GPUs by its requests while DCGM did not show it on any device of its node (an exporter restart, a device dropped from the exporter, a device plugin that lost track of its pods) is charged to that pod, on the node's devices no telemetry covered (then those DCGM showed free), as unmeasured GPU-hours: the pod held the GPU, but nobody measured how busy it was. DCGM series without an activity field are unmeasured too. Unmeasured is neither active nor idle: a broken exporter does not make a team look idle or busy, and this column shows how much of each bill no telemetry measured.",
	"GPU-hours: time a pod held a GPU, in whole-GPU equivalents. A MIG slice counts its compute slices over the GPU's (3g.40gb on an H100 = 3/7 GPU). A GPU shared by time-slicing or MPS is split among the pods holding it, evenly or by the replicas each requested; a fractional (milli-GPU) request counts its fraction.",
	"Active GPU-hours: GPU-hours x activity, where activity is DCGM_FI_PROF_GR_ENGINE_ACTIVE (0-1) where reported, else DCGM_FI_DEV_GPU_UTIL / 100. On a shared GPU the activity is the GPU's, counted once and split like the time.",
	"Efficiency: active GPU-hours / measured GPU-hours (GPU-hours less unmeasured).",
	"Cost: every hour, each GPU costs its flavor's price per GPU-hour (a cloud rate, or purchase / (depreciation months x 730) + power x PUE x electricity price + overhead / 730 for owned GPUs). That amount is split among the pods that held the GPU in proportion to time held x share; the rest of the hour is unallocated.",
	"Active cost = measured held cost x activity; idle cost = measured held cost x (1 - activity): paid while the GPU was held but did nothing. Unmeasured cost: held, activity unknown. Unallocated cost: capacity nobody held. The four always sum to cost.",
	"Unallocated policy: platform keeps it on the _unallocated line; quota shares each flavor's among the ClusterQueues by nominal quota (teams pay for what they reserve); usage shares it in proportion to each team's cost in that flavor and hour.",
	"Borrowed cost: the part of a team's cost run beyond its ClusterQueue's nominal quota in a flavor, on capacity borrowed from the cohort, measured per hour: (used GPU-hours - nominal) / used of each of its rows, exactly (MIG quotas count their compute slices: a team using exactly its quota of slices borrows nothing).",
	"Rounding: amounts are integer micro-units; every split uses largest-remainder rounding, so every hour's lines sum exactly to the cluster's cost (GPUs x prices x 1 hour).",
	"_unallocated: GPU time held by no pod, or with no telemetry and no Kubernetes allocation. _unowned: GPU time held by pods whose queue and namespace belong to no configured team.",
	"Energy: the increase of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (a counter in mJ; a drop is a reset and the new value counts from zero), else DCGM_FI_DEV_POWER_USAGE x time; a MIG slice takes its compute share of the GPU's, a shared GPU's is split like its time. Energy cost = kWh x electricity price x PUE, priced once per hour for the cluster and split exactly; it is shown beside cost, not added to it.",
	"Workloads: the pods' owner (kube_pod_owner, or the JobSet, PyTorchJob, RayCluster or Job named in the pod's labels), with the idle cost each one caused.",
	"Restatements and adjustments: a rewrite of hours already written (a backfill of missing telemetry, a correction) is recorded per team and hour with its figures before and after, who ran it, with what and why. While a month is open its hours are rewritten and the Restatements sheet lists what changed. Once a month is closed (gpuledger close) its figures never change: a later correction of its hours is an adjustment, the difference per team, billed in the first open month (the adjustment column; charge = cost + adjustment).",
	"Variance: budget - cost, per team; positive means under budget. The TOTAL's budget and variance cover the teams with budgets only: platform overhead (_unowned, _unallocated) is in no budget.",
	"Capacity: per flavor, the share of its GPU time that pods held (allocated, from Kubernetes) and that was busy (active, from DCGM) over the window before the month's end. Expansion is recommended when the allocated share is at or above the threshold over the whole window, and only when the ledger has the flavor from before the window and for 95% of its hours; the cost of the block is its GPUs x the flavor's price x 730 hours. The forecast is where a line fitted to the daily allocated shares crosses the threshold.",
	"Capacity, queues: per ClusterQueue, the 90th percentile of its workloads' waits for admission (Kueue's kueue_admission_wait_time_seconds, and the workloads still pending at their wait so far) over the wait window and over its last day, interpolated within Kueue's buckets. Expansion of the flavor the queue's workloads held most is recommended when both are over the threshold, with the same history and coverage conditions.",
	"Capacity, endpoints (scale to zero): per inference endpoint (a namespace's vLLM servers of one model), from vLLM's series over the month: its idle gaps (from one request running, waiting or generating tokens to the next, known to a scrape interval) in buckets at the cooldowns. A cooldown C scales the replica down for every gap's part beyond C, less twice the model's load (the load, and the work it delays), and each such gap is a cold start; the choice saves the most (GPU time at the workload's price, less a penalty per cold start) within the p95 extra latency allowed (an upper bound: the requests the ledger counted within the load after each such gap's end, every request where it counted none; 0 when at most 5% wait, else the load). Per-day figures are over the days the endpoint reported. KEDA's default cooldown (300 s) is beside it. Idle GPU-hours and cost are DCGM's, of the endpoint's Deployment or LeaderWorkerSet.",
}

// WriteXLSX writes the workbook: Summary (one row per team, a TOTAL row and
// a chart of cost by team), Daily (cost per team per day), Workloads (the
// most idle workloads) and Method.
func (cb *Chargeback) WriteXLSX(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", SheetSummary); err != nil {
		return err
	}
	st, err := newStyles(f)
	if err != nil {
		return err
	}
	if err := cb.writeSummary(f, st); err != nil {
		return fmt.Errorf("summary sheet: %w", err)
	}
	if err := cb.writeDaily(f, st); err != nil {
		return fmt.Errorf("daily sheet: %w", err)
	}
	if err := cb.writeWorkloads(f, st); err != nil {
		return fmt.Errorf("workloads sheet: %w", err)
	}
	if err := cb.writeRestatements(f, st); err != nil {
		return fmt.Errorf("restatements sheet: %w", err)
	}
	if len(cb.Capacity) > 0 || len(cb.Queues) > 0 || len(cb.Endpoints) > 0 {
		if err := cb.writeCapacity(f, st); err != nil {
			return fmt.Errorf("capacity sheet: %w", err)
		}
	}
	if err := writeMethod(f, st); err != nil {
		return fmt.Errorf("method sheet: %w", err)
	}
	_, err = f.WriteTo(w)
	return err
}

func cell(col, row int) string {
	name, _ := excelize.CoordinatesToCellName(col, row)
	return name
}

func (cb *Chargeback) writeSummary(f *excelize.File, st *xlsxStyles) error {
	s := SheetSummary
	title := fmt.Sprintf("GPU chargeback %s", cb.Month.Format("January 2006"))
	if cb.Cluster != "" {
		title += " — cluster " + cb.Cluster
	}
	if err := f.SetCellStr(s, "A1", title); err != nil {
		return err
	}
	if err := f.SetCellStyle(s, "A1", "A1", st.title); err != nil {
		return err
	}
	header := headerText(cb.header())
	if err := f.SetSheetRow(s, "A3", &header); err != nil {
		return err
	}
	kinds := []colKind{kText}
	for range cb.Flavors {
		kinds = append(kinds, kHours)
	}
	kinds = append(kinds, kHours, kHours, kHours, kPct, kMoney, kMoney, kMoney, kMoney, kMoney, kMoney, kHours, kMoney, kMoney, kMoney,
		kText, kMoney, kMoney, kText)
	lines := append(slices.Clone(cb.Lines), cb.Total)
	// Columns: team, one per flavor, gpu_hours, active_gpu_hours,
	// unmeasured_gpu_hours, efficiency_pct, then the money: cost, active,
	// idle, unmeasured, unallocated, borrowed; energy_kwh, energy_cost,
	// budget, variance.
	costCol := 1 + len(cb.Flavors) + 5
	for i := range lines {
		l := &lines[i]
		row := 4 + i
		vals := []any{l.Team}
		for _, fl := range cb.Flavors {
			vals = append(vals, round3(l.GPUHoursByFlavor[fl]))
		}
		vals = append(vals, round3(l.GPUHours), round3(l.ActiveGPUHours), round3(l.UnmeasuredGPUHours), round1(l.EfficiencyPct()),
			ledger.MicrosToFloat(l.CostMicros), ledger.MicrosToFloat(l.ActiveCostMicros()), ledger.MicrosToFloat(l.IdleCostMicros),
			ledger.MicrosToFloat(l.UnmeasuredCostMicros), ledger.MicrosToFloat(l.UnallocatedCostMicros), ledger.MicrosToFloat(l.BorrowedCostMicros),
			round3(l.EnergyKWh), ledger.MicrosToFloat(l.EnergyCostMicros))
		if l.HasBudget {
			vals = append(vals, ledger.MicrosToFloat(l.BudgetMicros), ledger.MicrosToFloat(l.VarianceMicros()))
		} else {
			vals = append(vals, nil, nil)
		}
		note := ""
		if l.AdjustmentMicros != 0 {
			note = "includes adjustments of closed months (" + SheetRestatements + ")"
		}
		vals = append(vals, cb.Currency, ledger.MicrosToFloat(l.AdjustmentMicros), ledger.MicrosToFloat(l.ChargeMicros()), note)
		if err := f.SetSheetRow(s, cell(1, row), &vals); err != nil {
			return err
		}
	}
	last := 3 + len(lines)
	if err := st.table(f, s, 3, last, last, kinds); err != nil {
		return err
	}
	// A stacked column per team (the TOTAL row left out): active, idle,
	// unmeasured and unallocated cost.
	var series []excelize.ChartSeries
	for c := costCol + 1; c <= costCol+4; c++ {
		col, _ := excelize.ColumnNumberToName(c)
		series = append(series, excelize.ChartSeries{
			Name:       fmt.Sprintf("%s!$%s$3", s, col),
			Categories: fmt.Sprintf("%s!$A$4:$A$%d", s, last-1),
			Values:     fmt.Sprintf("%s!$%s$4:$%s$%d", s, col, col, last-1),
		})
	}
	if err := f.AddChart(s, cell(2, last+3), &excelize.Chart{
		Type:      excelize.ColStacked,
		Series:    series,
		Title:     excelize.ChartTitle{Paragraph: []excelize.RichTextRun{{Text: "Cost by team (" + cb.Currency + "): active, idle, unmeasured, unallocated"}}},
		Legend:    excelize.ChartLegend{Position: "bottom"},
		Dimension: excelize.ChartDimension{Width: 720, Height: 360},
	}); err != nil {
		return err
	}
	// The chart's 360 px are about 18 rows below last+3.
	return finish(f, s, sheetLayout{fromRow: 3, freezeRow: 3, lastRow: last + 22, lastCol: len(header)})
}

func (cb *Chargeback) writeDaily(f *excelize.File, st *xlsxStyles) error {
	s := SheetDaily
	if _, err := f.NewSheet(s); err != nil {
		return err
	}
	teams := make([]string, len(cb.Lines))
	for i := range cb.Lines {
		teams[i] = cb.Lines[i].Team
	}
	header := append(append([]string{"date"}, teams...), "total")
	if err := f.SetSheetRow(s, "A1", &header); err != nil {
		return err
	}
	kinds := []colKind{kDate}
	sums := make([]int64, len(teams)+1)
	for i, d := range cb.Days {
		vals := []any{d.Date}
		var day int64
		for j, t := range teams {
			vals = append(vals, ledger.MicrosToFloat(d.CostMicros[t]))
			sums[j] += d.CostMicros[t]
			day += d.CostMicros[t]
		}
		sums[len(teams)] += day
		vals = append(vals, ledger.MicrosToFloat(day))
		if err := f.SetSheetRow(s, cell(1, 2+i), &vals); err != nil {
			return err
		}
	}
	total := []any{"TOTAL"}
	for _, v := range sums {
		total = append(total, ledger.MicrosToFloat(v))
		kinds = append(kinds, kMoney)
	}
	last := 2 + len(cb.Days)
	if err := f.SetSheetRow(s, cell(1, last), &total); err != nil {
		return err
	}
	if err := st.table(f, s, 1, last, last, kinds); err != nil {
		return err
	}
	return finish(f, s, sheetLayout{fromRow: 1, freezeRow: 1, lastRow: last, lastCol: len(header)})
}

// writeRestatements lists, per team and rewrite, the adjustments billed
// this month (in its charge) and the rewrites of this month's hours (in
// its cost, or billed in a later month when it was closed).
func (cb *Chargeback) writeRestatements(f *excelize.File, st *xlsxStyles) error {
	s := SheetRestatements
	if _, err := f.NewSheet(s); err != nil {
		return err
	}
	header := headerText([]string{"kind", "team", "cluster", "from", "to", "hours", "before", "after", "change", "gpu_hours_before", "gpu_hours_after",
		"billed_in", "by", "source", "at", "reason"})
	if err := f.SetSheetRow(s, "A1", &header); err != nil {
		return err
	}
	row := 2
	put := func(kind string, gs []RestatementGroup) error {
		for _, g := range gs {
			billed := ""
			if !g.BilledIn.IsZero() {
				billed = g.BilledIn.Format("2006-01")
			}
			vals := []any{kind, g.Team, g.Cluster, g.From.Format("2006-01-02 15:04"), g.To.Format("2006-01-02 15:04"), g.Hours,
				ledger.MicrosToFloat(g.BeforeMicros), ledger.MicrosToFloat(g.AfterMicros), ledger.MicrosToFloat(g.DeltaMicros()),
				round3(g.BeforeGPUHours), round3(g.AfterGPUHours), billed, orUnknown(g.By), g.Source, g.At.Format("2006-01-02 15:04:05"), g.Reason}
			if err := f.SetSheetRow(s, cell(1, row), &vals); err != nil {
				return err
			}
			row++
		}
		return nil
	}
	if err := put("adjustment billed here", GroupRestatements(cb.Adjustments)); err != nil {
		return err
	}
	var restated, later []ledger.Restatement
	for _, r := range cb.Restatements {
		if r.Adjustment() {
			later = append(later, r)
		} else {
			restated = append(restated, r)
		}
	}
	if err := put("restated before close", GroupRestatements(restated)); err != nil {
		return err
	}
	if err := put("adjusted after close", GroupRestatements(later)); err != nil {
		return err
	}
	kinds := []colKind{kText, kText, kText, kText, kText, kCount, kMoney, kMoney, kMoney, kHours, kHours, kText, kText, kText, kText, kText}
	l := sheetLayout{fromRow: 1, freezeRow: 1, lastRow: row, lastCol: len(header)}
	if row == 2 {
		if err := f.SetCellStr(s, "A2", "No adjustments are billed this month and none of its hours were rewritten."); err != nil {
			return err
		}
		if err := st.table(f, s, 1, 1, 0, kinds); err != nil {
			return err
		}
		l.fromRow = 3 // the sentence overflows; it sets no width
		return finish(f, s, l)
	}
	// The TOTAL is what this month bills: its adjustments.
	total := []any{"TOTAL adjustments billed here", "", "", "", "", "", "", "", ledger.MicrosToFloat(cb.Total.AdjustmentMicros)}
	if err := f.SetSheetRow(s, cell(1, row), &total); err != nil {
		return err
	}
	if err := st.table(f, s, 1, row, row, kinds); err != nil {
		return err
	}
	return finish(f, s, l)
}

func (cb *Chargeback) writeWorkloads(f *excelize.File, st *xlsxStyles) error {
	s := SheetWorkloads
	if _, err := f.NewSheet(s); err != nil {
		return err
	}
	header := headerText([]string{"team", "namespace", "kind", "name", "gpu_hours", "active_gpu_hours", "unmeasured_gpu_hours", "efficiency_pct",
		"cost", "idle_cost", "unmeasured_cost"})
	if err := f.SetSheetRow(s, "A1", &header); err != nil {
		return err
	}
	row := func(w *ledger.WorkloadRow) []any {
		eff := 0.0
		if measured := w.GPUSeconds - w.UnmeasuredGPUSeconds; measured > 0 {
			eff = 100 * w.ActiveGPUSeconds / measured
		}
		return []any{w.Team, w.Namespace, w.Kind, w.Name, round3(w.GPUSeconds / 3600), round3(w.ActiveGPUSeconds / 3600),
			round3(w.UnmeasuredGPUSeconds / 3600), round1(eff), ledger.MicrosToFloat(w.CostMicros), ledger.MicrosToFloat(w.IdleCostMicros),
			ledger.MicrosToFloat(w.UnmeasuredCostMicros)}
	}
	var sum ledger.WorkloadRow
	for i := range cb.Workloads {
		w := &cb.Workloads[i]
		vals := row(w)
		if err := f.SetSheetRow(s, cell(1, 2+i), &vals); err != nil {
			return err
		}
		sum.GPUSeconds += w.GPUSeconds
		sum.ActiveGPUSeconds += w.ActiveGPUSeconds
		sum.UnmeasuredGPUSeconds += w.UnmeasuredGPUSeconds
		sum.CostMicros += w.CostMicros
		sum.IdleCostMicros += w.IdleCostMicros
		sum.UnmeasuredCostMicros += w.UnmeasuredCostMicros
	}
	last := 2 + len(cb.Workloads)
	sum.Team = fmt.Sprintf("TOTAL of the %d listed", len(cb.Workloads))
	vals := row(&sum)
	if err := f.SetSheetRow(s, cell(1, last), &vals); err != nil {
		return err
	}
	kinds := []colKind{kText, kText, kText, kText, kHours, kHours, kHours, kPct, kMoney, kMoney, kMoney}
	if err := st.table(f, s, 1, last, last, kinds); err != nil {
		return err
	}
	return finish(f, s, sheetLayout{fromRow: 1, freezeRow: 1, lastRow: last, lastCol: len(header)})
}

// writeCapacity writes the expansion trigger's verdict per flavor at the
// month's end.
func (cb *Chargeback) writeCapacity(f *excelize.File, st *xlsxStyles) error {
	s := SheetCapacity
	if _, err := f.NewSheet(s); err != nil {
		return err
	}
	header := headerText([]string{"flavor", "gpus", "allocated_pct", "active_pct", "daily_allocated_min_pct", "daily_allocated_max_pct", "hours_with_data",
		"window_hours", "window_start", "window_end", "action", "expand_gpus (negative: held idle, to reclaim)", "monthly_cost (of the block, or of the idle GPUs)", "forecast", "why"})
	if err := f.SetSheetRow(s, "A1", &header); err != nil {
		return err
	}
	if err := st.table(f, s, 1, 1+len(cb.Capacity), 0, []colKind{kText, kPct, kPct, kPct, kPct, kPct, kCount, kCount, kText, kText, kText,
		kPct, kMoney, kText, kText}); err != nil {
		return err
	}
	for i, r := range cb.Capacity {
		expand, cost, forecast := verdictCells(&r.Verdict)
		vals := []any{r.Flavor, round1(r.GPUs), round1(100 * r.Allocated), round1(100 * r.Active), round1(100 * r.DailyMin), round1(100 * r.DailyMax),
			r.HoursWithData, r.Hours, r.From.Format("2006-01-02 15:04"), r.To.Format("2006-01-02 15:04"), r.Action, expand, cost, forecast, r.Why}
		if err := f.SetSheetRow(s, cell(1, 2+i), &vals); err != nil {
			return err
		}
	}
	row := len(cb.Capacity) + 3
	if len(cb.Queues) > 0 {
		if err := cb.writeQueues(f, st, s, row); err != nil {
			return err
		}
		row += len(cb.Queues) + 2
	}
	cols := 16
	if len(cb.Endpoints) > 0 {
		if err := cb.writeEndpoints(f, st, s, row); err != nil {
			return err
		}
		row += len(cb.Endpoints) + 2
		cols = 21
	}
	// Three tables of different headers: none is frozen.
	return finish(f, s, sheetLayout{fromRow: 1, lastRow: row, lastCol: cols})
}

// writeEndpoints writes scale-to-zero's table from row on: per endpoint,
// what it held idle and KEDA's default beside gpuledger's choice.
func (cb *Chargeback) writeEndpoints(f *excelize.File, st *xlsxStyles, s string, row int) error {
	header := []string{"namespace", "model", "workload", "sla_class", "gpus_per_replica", "load_seconds", "busy_percent", "requests", "idle_gpu_hours_dcgm", "idle_cost_dcgm",
		"keda_300s_saved_gpu_hours", "keda_300s_cold_starts_per_day", "min_replicas", "cooldown_seconds", "prewarm_utc", "saved_gpu_hours", "cold_starts_per_day",
		"p95_extra_seconds_at_most", "waiting_requests_at_most", "days_reported", "net_saving"}
	header = headerText(header)
	if err := f.SetSheetRow(s, cell(1, row), &header); err != nil {
		return err
	}
	if err := st.table(f, s, row, row+len(cb.Endpoints), 0, []colKind{kText, kText, kText, kText, kHours, kCount, kPct, kCount, kPct,
		kMoney, kPct, kPct, kCount, kCount, kText, kPct, kPct, kPct, kPct, kCount, kMoney}); err != nil {
		return err
	}
	for i, e := range cb.Endpoints {
		r := e.Rec
		var busy, cooldown any = "", ""
		if e.ReportedSeconds > 0 {
			busy = round1(100 * e.BusySeconds / e.ReportedSeconds)
		}
		if r.MinReplicas == 0 {
			cooldown = r.Best.Policy.Cooldown.Seconds()
		}
		var pre []string
		for _, w := range r.Best.Policy.PreWarm {
			pre = append(pre, w.String())
		}
		workload := ""
		if e.Name != "" {
			workload = e.Kind + "/" + e.Name
		}
		vals := []any{e.Namespace, e.Model, workload, e.Class, round3(r.ColdStart.GPUsPerReplica), r.ColdStart.Load.Seconds(), busy, e.Requests,
			round1(e.IdleGPUSeconds / 3600), ledger.MicrosToFloat(e.IdleCostMicros), round1(r.Default.SavedGPUHours), round1(r.Default.ColdStartsPerDay),
			r.MinReplicas, cooldown, strings.Join(pre, " "), round1(r.Best.SavedGPUHours), round1(r.Best.ColdStartsPerDay), r.Best.P95ExtraLatency.Seconds(),
			round1(r.Best.AffectedRequests), e.Days, ledger.MicrosToFloat(r.Best.NetSavingMicros)}
		if err := f.SetSheetRow(s, cell(1, row+1+i), &vals); err != nil {
			return err
		}
	}
	return nil
}

// writeQueues writes the queue-wait table from row on.
func (cb *Chargeback) writeQueues(f *excelize.File, st *xlsxStyles, s string, row int) error {
	header := []string{"cluster_queue", "flavor", "wait_p90_minutes", "last_day_wait_p90_minutes", "admitted", "pending", "pending_gpus",
		"hours_with_data", "window_hours", "window_start", "window_end", "action", "expand_gpus (negative: held idle, to reclaim)", "monthly_cost (of the block, or of the idle GPUs)", "forecast", "why"}
	header = headerText(header)
	if err := f.SetSheetRow(s, cell(1, row), &header); err != nil {
		return err
	}
	if err := st.table(f, s, row, row+len(cb.Queues), 0, []colKind{kText, kText, kPct, kPct, kPct, kPct, kPct, kCount, kCount, kText, kText,
		kText, kPct, kMoney, kText, kText}); err != nil {
		return err
	}
	minutes := func(s float64) any {
		if math.IsNaN(s) {
			return ""
		}
		return round1(s / 60)
	}
	for i, q := range cb.Queues {
		expand, cost, forecast := verdictCells(&q.Verdict)
		vals := []any{q.ClusterQueue, q.Flavor, minutes(q.Wait), minutes(q.LastDay), q.Admitted, q.Pending, round1(q.PendingGPUs),
			q.HoursWithData, q.Hours, q.From.Format("2006-01-02 15:04"), q.To.Format("2006-01-02 15:04"), q.Action, expand, cost, forecast, q.Why}
		if err := f.SetSheetRow(s, cell(1, row+1+i), &vals); err != nil {
			return err
		}
	}
	return nil
}

// verdictCells are a verdict's GPUs to buy and their monthly cost (0
// unless it fired; for a reclaim verdict, minus the GPUs held idle and
// what they cost a month) and its forecast day (empty for none).
func verdictCells(v *capacity.Verdict) (expand float64, cost float64, forecast string) {
	switch {
	case v.Fired:
		expand, cost = float64(v.PurchaseGPUs), ledger.MicrosToFloat(v.MonthlyCostMicros)
	case v.Reclaim != nil:
		expand, cost = -round1(v.Reclaim.IdleGPUs), -ledger.MicrosToFloat(v.Reclaim.IdleCostMonthlyMicros)
	}
	if !v.Forecast.IsZero() {
		forecast = v.Forecast.Format("2006-01-02")
	}
	return expand, cost, forecast
}

func writeMethod(f *excelize.File, st *xlsxStyles) error {
	s := SheetMethod
	if _, err := f.NewSheet(s); err != nil {
		return err
	}
	for i, line := range methodText {
		if err := f.SetCellStr(s, cell(1, 1+i), line); err != nil {
			return err
		}
	}
	if err := f.SetCellStyle(s, "A2", cell(1, len(methodText)), st.wrap); err != nil {
		return err
	}
	if err := f.SetCellStyle(s, "A1", "A1", st.title); err != nil {
		return err
	}
	if err := finish(f, s, sheetLayout{fromRow: 1, lastRow: len(methodText), lastCol: 1, maxWidth: 110}); err != nil {
		return err
	}
	portrait := "portrait"
	return f.SetPageLayout(s, &excelize.PageLayoutOptions{Orientation: &portrait})
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
