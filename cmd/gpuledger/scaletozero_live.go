package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// liveOptions are scale-to-zero's on the ledger's endpoints.
type liveOptions struct {
	store    ledger.Store
	cluster  string
	from, to time.Time
	eps      capacity.EndpointOptions
	out      string
	keda     capacity.KEDATarget
}

// scaleToZeroLive recommends from the ledger: every endpoint with vLLM's
// series gets its gaps replayed; serving workloads without them are
// listed with what DCGM says they held idle.
func scaleToZeroLive(ctx context.Context, stdout io.Writer, o liveOptions) error {
	advice, other, err := capacity.EvaluateEndpoints(ctx, o.store, o.cluster, o.from, o.to, o.eps)
	if err != nil {
		return err
	}
	if len(advice) == 0 && len(other) == 0 {
		return usageError{fmt.Sprintf("the ledger has no serving workload from %s to %s: pass -month with a month gpuledger serve or ingest wrote, with vLLM's series for the endpoints",
			o.from.Format("2006-01-02"), o.to.Format("2006-01-02"))}
	}
	if err := os.RemoveAll(filepath.Join(o.out, "keda")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.out, "keda"), 0o755); err != nil {
		return err
	}
	csvPath := filepath.Join(o.out, "scale-to-zero-"+o.from.Format("2006-01")+".csv")
	csv, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "cluster,namespace,model,workload,sla_class,gpus_per_replica,price_per_gpu_hour,reported_hours,busy_hours,requests,idle_gaps,always_on_gpu_hours,idle_gpu_hours_dcgm,idle_cost_dcgm,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,p95_extra_latency_s,net_saving,waiting_requests_max,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_p95_extra_latency_s,keda_default_waiting_requests_max,keda_default_net_saving,days_reported")
	days := o.to.Sub(o.from).Hours() / 24
	source := "vLLM's series, and a gateway's arrivals where it counts them; else the GPUs' activity"
	if o.eps.GPUActivity {
		source = "every serving workload's GPUs' activity, as -gpuActivity asks"
	}
	fmt.Fprintf(stdout, "gpuledger scale-to-zero, %s to %s (%.0f days), from the ledger's endpoint hours (%s)\n\n", o.from.Format("2006-01-02"), o.to.Format("2006-01-02"), days, source)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\tworkload\tclass\tGPUs×load\tdays\tbusy\tidle GPU-h (DCGM)\tidle cost\tgaps >5m\tKEDA 300 s: saved GPU-h\tcold/day\twait (≤)\tp95 (≤)\tgpuledger: cooldown\tpre-warm\tsaved GPU-h\tcold/day\twait (≤)\tp95 (≤)\tmin replicas\tnet saving\t")
	var totalSaved, totalDefault float64
	var totalNet int64
	for i := range advice {
		e, rec, cs, price, class := &advice[i].LiveEndpoint, advice[i].Rec, advice[i].Rec.ColdStart, advice[i].PriceMicros, advice[i].Class
		long, _ := e.Gaps().Over(300)
		busy := "-"
		if e.ReportedSeconds > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*e.BusySeconds/e.ReportedSeconds)
		}
		cooldown := rec.Best.Policy.Cooldown.String()
		if rec.MinReplicas == 1 {
			cooldown = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f×%s\t%d\t%s\t%.1f\t%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%s\t\n", e.ID(), workloadName(e.Kind, e.Name), dash(class),
			cs.GPUsPerReplica, cs.Load, e.Days, busy, e.IdleGPUSeconds/3600, ledger.FormatCents(e.IdleCostMicros), long,
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, waitShare(rec.Default), rec.Default.P95ExtraLatency, cooldown, dash(capacity.PrewarmText(rec.Best.Policy.PreWarm)),
			rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, waitShare(rec.Best), rec.Best.P95ExtraLatency, rec.MinReplicas, ledger.FormatCents(rec.Best.NetSavingMicros))
		fmt.Fprintf(csv, "%s,%s,%s,%s,%s,%.4f,%s,%.2f,%.2f,%.0f,%d,%.2f,%.2f,%s,%d,%.0f,%s,%.2f,%.2f,%.0f,%s,%.0f,%.2f,%.2f,%.0f,%.0f,%s,%d\n", e.Cluster, e.Namespace, e.Model,
			workloadName(e.Kind, e.Name), class, cs.GPUsPerReplica, ledger.FormatCents(price), e.ReportedSeconds/3600, e.BusySeconds/3600, e.Requests, long,
			rec.Best.AlwaysOnGPUHours, e.IdleGPUSeconds/3600, ledger.FormatCents(e.IdleCostMicros), rec.MinReplicas, rec.Best.Policy.Cooldown.Seconds(),
			capacity.PrewarmText(rec.Best.Policy.PreWarm), rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, rec.Best.P95ExtraLatency.Seconds(),
			ledger.FormatCents(rec.Best.NetSavingMicros), rec.Best.AffectedRequests, rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay,
			rec.Default.P95ExtraLatency.Seconds(), rec.Default.AffectedRequests, ledger.FormatCents(rec.Default.NetSavingMicros), e.Days)
		totalDefault += rec.Default.SavedGPUHours
		if rec.MinReplicas == 0 {
			totalSaved += rec.Best.SavedGPUHours
			totalNet += rec.Best.NetSavingMicros
			t := o.keda.ForWorkload(e.Namespace, e.Kind, e.Name, e.Model)
			if err := os.WriteFile(filepath.Join(o.out, "keda", t.Namespace+"-"+t.Name+".yaml"), []byte(capacity.KEDAObject(rec, t)), 0o644); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d endpoints; scaling to zero as recommended saves %.1f GPU-hours (KEDA's default on all: %.1f), %s net of the cold starts.\n",
		len(advice), totalSaved, totalDefault, ledger.FormatCents(totalNet))
	if len(other) > 0 {
		fmt.Fprintf(stdout, "\nServing workloads without vLLM's series (idle from DCGM's activity only; scrape their /metrics for a cooldown):\n")
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "namespace\tworkload\tGPU-h\tidle GPU-h\tidle cost\t")
		for _, w := range other {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%s\t\n", w.Namespace, workloadName(w.Kind, w.Name), w.GPUSeconds/3600, w.IdleGPUSeconds()/3600, ledger.FormatCents(w.IdleCostMicros))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\ndays: the days the endpoint reported (per-day figures are over them); gaps >5m: idle gaps longer than KEDA's default cooldown; saved over the window, less two loads a cold start (the load, and the work it delays); wait (≤): at most this share of the requests waits for a load (those the ledger counted within the load after each gap's end, at scrape resolution: the gateway's arrivals where it counted them, else vLLM's finished and in-flight requests; all of them where a gap the cooldown may exceed has no count, such as one across a time at zero replicas without a gateway); p95 (≤): the 95th percentile request waits at most this (0 when at most 5%% wait, else the load); net saving: the saved GPU time at the workload's price in the ledger less -penalty per cold start.\nPer endpoint: %s; KEDA objects: %s\n",
		csvPath, filepath.Join(o.out, "keda"))
	return nil
}

// waitShare is the share of the requests that wait for a load, an upper
// bound, as a percentage.
func waitShare(o capacity.Outcome) string {
	if o.Requests <= 0 {
		if o.ColdStarts > 0 {
			return "all"
		}
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*o.AffectedRequests/o.Requests)
}

func workloadName(kind, name string) string {
	if name == "" {
		return "-"
	}
	return kind + "/" + name
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
