package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// RunOptions are what every scale-to-zero run shares: where it writes its
// CSV and KEDA objects, and what it prints first.
type RunOptions struct {
	// Out is the folder of the CSV and of keda/, which a run replaces.
	Out string
	// KEDA is the objects' scaler; Namespace that of endpoints that come
	// without one (ServeGen's, a request log's).
	KEDA      KEDATarget
	Namespace string
	// Command is echoed in the output's first line.
	Command string
	// Progress receives a line per model done.
	Progress io.Writer
}

// runOutputs are a run's CSV and KEDA folder.
type runOutputs struct {
	csv     *os.File
	csvPath string
	keda    string
}

// openOutputs replaces keda/ (an earlier run's objects would mislead) and
// creates the CSV with its header.
func (o RunOptions) openOutputs(csvName, header string) (*runOutputs, error) {
	keda := filepath.Join(o.Out, "keda")
	if err := os.RemoveAll(keda); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(keda, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(o.Out, csvName)
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(f, header)
	return &runOutputs{csv: f, csvPath: p, keda: keda}, nil
}

func (r *runOutputs) writeKEDA(file string, rec ScaleToZero, t KEDATarget) error {
	return os.WriteFile(filepath.Join(r.keda, file+".yaml"), []byte(KEDAObject(rec, t)), 0o644)
}

func (r *runOutputs) close() error { return r.csv.Close() }

// finish prints the legend (a format and its arguments) and where the
// run wrote, and closes the CSV.
func (r *runOutputs) finish(w io.Writer, legend string, args ...any) error {
	fmt.Fprintf(w, "\n"+legend+"\nPer endpoint: %s; KEDA objects: %s\n", append(args, r.csvPath, r.keda)...)
	return r.close()
}

// ServeGenRun recommends for ServeGen's production LLM API traces: one
// endpoint per client, arrivals drawn from each window's fitted
// distribution for every seed.
type ServeGenRun struct {
	RunOptions
	// Dir holds <model>_windows.csv; Models are those read (default all).
	Dir    string
	Models []string
	// Cold are the models' replica sizes and load times.
	Cold                       map[string]ColdStart
	PriceMicros, PenaltyMicros int64
	Seeds                      []uint64
	MaxP95                     time.Duration
}

// Run writes scale-to-zero.csv, a KEDA object for every endpoint of the
// first seed that should scale to zero, and a table per model to w.
func (o ServeGenRun) Run(ctx context.Context, w io.Writer) error {
	names := o.Models
	if len(names) == 0 {
		files, _ := filepath.Glob(filepath.Join(o.Dir, "*_windows.csv"))
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), "_windows.csv"))
		}
		if len(names) == 0 {
			return fmt.Errorf("no <model>_windows.csv in %s; pass -servegen with ServeGen's folder", o.Dir)
		}
	}
	slices.Sort(names)
	for _, m := range names {
		if _, ok := o.Cold[m]; !ok {
			return fmt.Errorf("model %s has no -coldStart entry (GPUs:load); add one such as %s=1:60s", m, m)
		}
	}
	out, err := o.openOutputs("scale-to-zero.csv", "endpoint,seed,requests,always_on_gpu_hours,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,p95_extra_latency_s,net_saving,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_p95_extra_latency_s,keda_default_net_saving")
	if err != nil {
		return err
	}
	defer out.close()
	seeds := make([]string, len(o.Seeds))
	for i, s := range o.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	fmt.Fprintf(w, "%s\n\nGPU-hour %s, %s a cold start; seeds %s (figures: mean [min-max] over them)\n\n", o.Command,
		ledger.FormatCents(o.PriceMicros), ledger.FormatCents(o.PenaltyMicros), strings.Join(seeds, ","))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tendpoints\tGPUs×load\talways-on GPU-h/day\tKEDA 300 s: saved GPU-h/day\tcold starts/day\tp95 extra\tgpuledger: saved GPU-h/day\tcold starts/day\tp95 extra\tscale to 0\tnet saving/month\t")
	began := time.Now()
	for _, model := range names {
		cs := o.Cold[model]
		file := filepath.Join(o.Dir, model+"_windows.csv")
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		eps, err := ParseServeGen(f, model)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		var perSeed []ModelFigures
		for _, seed := range o.Seeds {
			recs := RecommendAll(ctx, eps, seed, cs, o.PriceMicros, o.MaxP95)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			perSeed = append(perSeed, Summarise(recs))
			for i, r := range recs {
				fmt.Fprintf(out.csv, "%s,%d,%.0f,%.2f,%d,%.0f,%s,%.2f,%.2f,%.0f,%s,%.2f,%.2f,%.0f,%s\n", r.Endpoint, seed, r.Best.Requests, r.Best.AlwaysOnGPUHours,
					r.MinReplicas, r.Best.Policy.Cooldown.Seconds(), PrewarmText(r.Best.Policy.PreWarm), r.Best.SavedGPUHours, r.Best.ColdStartsPerDay,
					r.Best.P95ExtraLatency.Seconds(), ledger.FormatCents(r.Best.NetSavingMicros), r.Default.SavedGPUHours, r.Default.ColdStartsPerDay,
					r.Default.P95ExtraLatency.Seconds(), ledger.FormatCents(r.Default.NetSavingMicros))
				if seed == o.Seeds[0] && r.MinReplicas == 0 {
					t := o.KEDA.For(o.Namespace, KEDAName(eps[i].Name))
					if err := out.writeKEDA(t.Name, r, t); err != nil {
						return err
					}
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%g×%s\t%s\n", model, len(eps), cs.GPUsPerReplica, cs.Load, SpreadFigures(perSeed))
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "scale-to-zero: %s done, %s\n", model, time.Since(began).Round(time.Second))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return out.finish(w, "saved and cold starts: sums over the endpoints per day; p95 extra: the median endpoint's p95 of what requests wait for a load; net saving: a 30-day month of saved GPU time at the price less the cold starts' penalties, gpuledger's choice.")
}

// LiveRun recommends from the ledger: every endpoint with vLLM's series
// gets its gaps replayed; serving workloads without them are listed with
// what DCGM says they held idle.
type LiveRun struct {
	RunOptions
	Store     ledger.Store
	Cluster   string
	From, To  time.Time
	Endpoints EndpointOptions
}

// ErrNoEndpoints is LiveRun's answer for a ledger without serving
// workloads in the range.
var ErrNoEndpoints = errors.New("the ledger has no serving workload")

// Run writes scale-to-zero-<month>.csv, the KEDA objects and a table to w.
func (o LiveRun) Run(ctx context.Context, w io.Writer) error {
	advice, other, err := EvaluateEndpoints(ctx, o.Store, o.Cluster, o.From, o.To, o.Endpoints)
	if err != nil {
		return err
	}
	if len(advice) == 0 && len(other) == 0 {
		return fmt.Errorf("%w from %s to %s: pass -month with a month gpuledger serve or ingest wrote, with vLLM's series for the endpoints",
			ErrNoEndpoints, o.From.Format("2006-01-02"), o.To.Format("2006-01-02"))
	}
	out, err := o.openOutputs("scale-to-zero-"+o.From.Format("2006-01")+".csv", "cluster,namespace,model,workload,sla_class,gpus_per_replica,price_per_gpu_hour,reported_hours,busy_hours,requests,idle_gaps,always_on_gpu_hours,idle_gpu_hours_dcgm,idle_cost_dcgm,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,p95_extra_latency_s,net_saving,waiting_requests_max,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_p95_extra_latency_s,keda_default_waiting_requests_max,keda_default_net_saving,days_reported")
	if err != nil {
		return err
	}
	defer out.close()
	days := o.To.Sub(o.From).Hours() / 24
	source := "vLLM's series, and a gateway's arrivals where it counts them; else the GPUs' activity"
	if o.Endpoints.GPUActivity {
		source = "every serving workload's GPUs' activity, as -gpuActivity asks"
	}
	fmt.Fprintf(w, "gpuledger scale-to-zero, %s to %s (%.0f days), from the ledger's endpoint hours (%s)\n\n", o.From.Format("2006-01-02"), o.To.Format("2006-01-02"), days, source)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f×%s\t%d\t%s\t%.1f\t%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%s\t\n", e.ID(), workloadName(e.Kind, e.Name), dash(class),
			cs.GPUsPerReplica, cs.Load, e.Days, busy, e.IdleGPUSeconds/3600, ledger.FormatCents(e.IdleCostMicros), long,
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, waitShare(rec.Default), rec.Default.P95ExtraLatency, cooldownText(rec), dash(PrewarmText(rec.Best.Policy.PreWarm)),
			rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, waitShare(rec.Best), rec.Best.P95ExtraLatency, rec.MinReplicas, ledger.FormatCents(rec.Best.NetSavingMicros))
		fmt.Fprintf(out.csv, "%s,%s,%s,%s,%s,%.4f,%s,%.2f,%.2f,%.0f,%d,%.2f,%.2f,%s,%d,%.0f,%s,%.2f,%.2f,%.0f,%s,%.0f,%.2f,%.2f,%.0f,%.0f,%s,%d\n", e.Cluster, e.Namespace, e.Model,
			workloadName(e.Kind, e.Name), class, cs.GPUsPerReplica, ledger.FormatCents(price), e.ReportedSeconds/3600, e.BusySeconds/3600, e.Requests, long,
			rec.Best.AlwaysOnGPUHours, e.IdleGPUSeconds/3600, ledger.FormatCents(e.IdleCostMicros), rec.MinReplicas, rec.Best.Policy.Cooldown.Seconds(),
			PrewarmText(rec.Best.Policy.PreWarm), rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, rec.Best.P95ExtraLatency.Seconds(),
			ledger.FormatCents(rec.Best.NetSavingMicros), rec.Best.AffectedRequests, rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay,
			rec.Default.P95ExtraLatency.Seconds(), rec.Default.AffectedRequests, ledger.FormatCents(rec.Default.NetSavingMicros), e.Days)
		totalDefault += rec.Default.SavedGPUHours
		if rec.MinReplicas == 0 {
			totalSaved += rec.Best.SavedGPUHours
			totalNet += rec.Best.NetSavingMicros
			t := o.KEDA.ForWorkload(e.Namespace, e.Kind, e.Name, e.Model)
			if err := out.writeKEDA(t.Namespace+"-"+t.Name, rec, t); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d endpoints; scaling to zero as recommended saves %.1f GPU-hours (KEDA's default on all: %.1f), %s net of the cold starts.\n",
		len(advice), totalSaved, totalDefault, ledger.FormatCents(totalNet))
	if len(other) > 0 {
		fmt.Fprintf(w, "\nServing workloads without vLLM's series (idle from DCGM's activity only; scrape their /metrics for a cooldown):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "namespace\tworkload\tGPU-h\tidle GPU-h\tidle cost\t")
		for _, wl := range other {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%s\t\n", wl.Namespace, workloadName(wl.Kind, wl.Name), wl.GPUSeconds/3600, wl.IdleGPUSeconds()/3600, ledger.FormatCents(wl.IdleCostMicros))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return out.finish(w, "days: the days the endpoint reported (per-day figures are over them); gaps >5m: idle gaps longer than KEDA's default cooldown; saved over the window, less two loads a cold start (the load, and the work it delays); wait (≤): at most this share of the requests waits for a load (those the ledger counted within the load after each gap's end, at scrape resolution: the gateway's arrivals where it counted them, else vLLM's finished and in-flight requests; all of them where a gap the cooldown may exceed has no count, such as one across a time at zero replicas without a gateway); p95 (≤): the 95th percentile request waits at most this (0 when at most 5%% wait, else the load); net saving: the saved GPU time at the workload's price in the ledger less -penalty per cold start.")
}

// RequestsRun recommends from a per-request log (a gateway's access log:
// timestamp,endpoint,service_seconds), each endpoint's requests replayed
// exactly, before any series is deployed.
type RequestsRun struct {
	RunOptions
	File string
	// Cold are load times by endpoint, or by its last path element;
	// Default is for an endpoint without an entry.
	Cold        map[string]ColdStart
	Default     ColdStart
	PriceMicros int64
	MaxP95      time.Duration
}

// Run writes scale-to-zero-requests.csv, the KEDA objects and a table to w.
func (o RequestsRun) Run(w io.Writer) error {
	f, err := os.Open(o.File)
	if err != nil {
		return fmt.Errorf("-requests: %w; pass a CSV with the header timestamp,endpoint,service_seconds", err)
	}
	log, err := ParseRequests(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w; fix the file (a line per request: timestamp,endpoint,service_seconds)", o.File, err)
	}
	out, err := o.openOutputs("scale-to-zero-requests.csv", "endpoint,requests,days,gpus_per_replica,load_s,always_on_gpu_hours,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,waiting_requests,p95_extra_latency_s,net_saving,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_waiting_requests,keda_default_p95_extra_latency_s,keda_default_net_saving")
	if err != nil {
		return err
	}
	defer out.close()
	fmt.Fprintf(w, "%s\n\n%s to %s (%.0f days), %d endpoints, from the requests themselves (exact replay); GPU-hour %s, %s a cold start\n\n", o.Command,
		log.Start.Format("2006-01-02"), log.Start.Add(log.Span).Format("2006-01-02"), log.Span.Hours()/24, len(log.Endpoints),
		ledger.FormatCents(o.PriceMicros), ledger.FormatCents(o.Default.PenaltyMicros))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\trequests\tGPUs×load\tKEDA 300 s: saved GPU-h\tcold/day\twait\tp95\tgpuledger: cooldown\tpre-warm\tsaved GPU-h\tcold/day\twait\tp95\tmin replicas\tnet saving\t")
	var saved, savedDefault float64
	var net int64
	for _, name := range slices.Sorted(maps.Keys(log.Endpoints)) {
		reqs := log.Endpoints[name]
		cs, ok := o.Cold[name]
		if !ok {
			cs, ok = o.Cold[path.Base(name)]
		}
		if !ok {
			cs = o.Default
		}
		rec := RecommendRequests(name, reqs, log.Span, cs, o.PriceMicros, o.MaxP95)
		fmt.Fprintf(tw, "%s\t%d\t%g×%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%s\t\n", name, len(reqs), cs.GPUsPerReplica, cs.Load,
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, waitShare(rec.Default), rec.Default.P95ExtraLatency.Round(time.Second), cooldownText(rec),
			dash(PrewarmText(rec.Best.Policy.PreWarm)), rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, waitShare(rec.Best), rec.Best.P95ExtraLatency.Round(time.Second),
			rec.MinReplicas, ledger.FormatCents(rec.Best.NetSavingMicros))
		fmt.Fprintf(out.csv, "%s,%d,%.0f,%g,%.0f,%.2f,%d,%.0f,%s,%.2f,%.2f,%.0f,%.0f,%s,%.2f,%.2f,%.0f,%.0f,%s\n", name, len(reqs), rec.Best.Days, cs.GPUsPerReplica,
			cs.Load.Seconds(), rec.Best.AlwaysOnGPUHours, rec.MinReplicas, rec.Best.Policy.Cooldown.Seconds(), PrewarmText(rec.Best.Policy.PreWarm),
			rec.Best.SavedGPUHours, rec.Best.ColdStartsPerDay, rec.Best.AffectedRequests, rec.Best.P95ExtraLatency.Seconds(), ledger.FormatCents(rec.Best.NetSavingMicros),
			rec.Default.SavedGPUHours, rec.Default.ColdStartsPerDay, rec.Default.AffectedRequests, rec.Default.P95ExtraLatency.Seconds(),
			ledger.FormatCents(rec.Default.NetSavingMicros))
		savedDefault += rec.Default.SavedGPUHours
		if rec.MinReplicas == 0 {
			saved += rec.Best.SavedGPUHours
			net += rec.Best.NetSavingMicros
			t := o.KEDA.For(o.Namespace, KEDAName(name))
			if err := out.writeKEDA(t.Name, rec, t); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return out.finish(w, "Scaling to zero as recommended saves %.1f GPU-hours (KEDA's default on all: %.1f), %s net of the cold starts.\n"+
		"A request that comes a cooldown or more after the last one ended waits for the load, as do those during it; each then runs its service time, so the work a load delays ends later. wait: the share of requests that waited; p95: what the 95th percentile request waited; per-day figures over the log's days.",
		saved, savedDefault, ledger.FormatCents(net))
}

// waitShare is the share of the requests that wait for a load, an upper
// bound, as a percentage.
func waitShare(o Outcome) string {
	if o.Requests <= 0 {
		if o.ColdStarts > 0 {
			return "all"
		}
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*o.AffectedRequests/o.Requests)
}

// cooldownText is the recommended cooldown, "-" for an endpoint that
// keeps a replica.
func cooldownText(rec ScaleToZero) string {
	if rec.MinReplicas == 1 {
		return "-"
	}
	return rec.Best.Policy.Cooldown.String()
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
