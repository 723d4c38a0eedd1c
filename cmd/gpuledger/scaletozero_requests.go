package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// requestOptions are scale-to-zero's on a per-request log.
type requestOptions struct {
	file    string
	cold    map[string]capacity.ColdStart // by endpoint, or its last path element
	def     capacity.ColdStart
	price   int64
	maxP95  time.Duration
	out     string
	keda    capacity.KEDATarget
	kedaNS  string
	command string
}

// scaleToZeroRequests recommends from a per-request log, each endpoint's
// requests replayed exactly, before any series is deployed.
func scaleToZeroRequests(stdout io.Writer, o requestOptions) error {
	f, err := os.Open(o.file)
	if err != nil {
		return usageError{fmt.Sprintf("-requests: %v; pass a CSV with the header timestamp,endpoint,service_seconds", err)}
	}
	log, err := capacity.ParseRequests(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w; fix the file (a line per request: timestamp,endpoint,service_seconds)", o.file, err)
	}
	if err := os.RemoveAll(filepath.Join(o.out, "keda")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.out, "keda"), 0o755); err != nil {
		return err
	}
	csvPath := filepath.Join(o.out, "scale-to-zero-requests.csv")
	csv, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "endpoint,requests,days,gpus_per_replica,load_s,always_on_gpu_hours,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,waiting_requests,p95_extra_latency_s,net_saving,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_waiting_requests,keda_default_p95_extra_latency_s,keda_default_net_saving")
	fmt.Fprintf(stdout, "%s\n\n%s to %s (%.0f days), %d endpoints, from the requests themselves (exact replay); GPU-hour %s, %s a cold start\n\n", o.command,
		log.Start.Format("2006-01-02"), log.Start.Add(log.Span).Format("2006-01-02"), log.Span.Hours()/24, len(log.Endpoints),
		ledger.FormatCents(o.price), ledger.FormatCents(o.def.PenaltyMicros))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\trequests\tGPUs×load\tKEDA 300 s: saved GPU-h\tcold/day\twait\tp95\tgpuledger: cooldown\tpre-warm\tsaved GPU-h\tcold/day\twait\tp95\tmin replicas\tnet saving\t")
	var saved, savedDefault float64
	var net int64
	for _, name := range slices.Sorted(maps.Keys(log.Endpoints)) {
		reqs := log.Endpoints[name]
		cs, ok := o.cold[name]
		if !ok {
			cs, ok = o.cold[path.Base(name)]
		}
		if !ok {
			cs = o.def
		}
		rec := capacity.RecommendRequests(name, reqs, log.Span, cs, o.price, o.maxP95)
		cooldown := rec.Best.Policy.Cooldown.String()
		if rec.MinReplicas == 1 {
			cooldown = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%g×%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%s\t\n", name, len(reqs), cs.GPUsPerReplica, cs.Load,
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, waitShare(rec.Default), rec.Default.P95ExtraLatency.Round(time.Second), cooldown,
			dash(capacity.PrewarmText(rec.Best.Policy.PreWarm)), rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, waitShare(rec.Best), rec.Best.P95ExtraLatency.Round(time.Second),
			rec.MinReplicas, ledger.FormatCents(rec.Best.NetSavingMicros))
		fmt.Fprintf(csv, "%s,%d,%.0f,%g,%.0f,%.2f,%d,%.0f,%s,%.2f,%.2f,%.0f,%.0f,%s,%.2f,%.2f,%.0f,%.0f,%s\n", name, len(reqs), rec.Best.Days, cs.GPUsPerReplica,
			cs.Load.Seconds(), rec.Best.AlwaysOnGPUHours, rec.MinReplicas, rec.Best.Policy.Cooldown.Seconds(), capacity.PrewarmText(rec.Best.Policy.PreWarm),
			rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, rec.Best.AffectedRequests, rec.Best.P95ExtraLatency.Seconds(), ledger.FormatCents(rec.Best.NetSavingMicros),
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, rec.Default.AffectedRequests, rec.Default.P95ExtraLatency.Seconds(),
			ledger.FormatCents(rec.Default.NetSavingMicros))
		savedDefault += rec.Default.SavedGPUHours
		if rec.MinReplicas == 0 {
			saved += rec.Best.SavedGPUHours
			net += rec.Best.NetSavingMicros
			t := o.keda.For(o.kedaNS, capacity.KEDAName(name))
			if err := os.WriteFile(filepath.Join(o.out, "keda", t.Name+".yaml"), []byte(capacity.KEDAObject(rec, t)), 0o644); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nScaling to zero as recommended saves %.1f GPU-hours (KEDA's default on all: %.1f), %s net of the cold starts.\n"+
		"A request that comes a cooldown or more after the last one ended waits for the load, as do those during it; each then runs its service time, so the work a load delays ends later. wait: the share of requests that waited; p95: what the 95th percentile request waited; per-day figures over the log's days.\nPer endpoint: %s; KEDA objects: %s\n",
		saved, savedDefault, ledger.FormatCents(net), csvPath, filepath.Join(o.out, "keda"))
	return nil
}
