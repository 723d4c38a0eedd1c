package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// defaultColdStarts are the models' replica sizes and load times:
// published load times run from ~15 s (an 8B model, streamed weights) to
// over 10 minutes (a 70B model on 8 GPUs).
const defaultColdStarts = "m-small=1:30s,m-mid=2:120s,m-large=8:600s,deepseek-r1=8:900s,mm-image=1:60s"

func runScaleToZero(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("scale-to-zero", `Recommends, per inference endpoint, whether to let it scale to zero replicas and
with which KEDA cooldownPeriod, by replaying the endpoint's own gaps between
requests against the cost of a cold start: the model's load time (the first
request waits for it, and the replica's GPUs are held meanwhile, at the GPU
price) and a penalty per cold start for the latency. Endpoints with a daily
rhythm (requests in some hours on 90% of the days, none in others on half) also
get a pre-warm schedule. The choice saves the most money whose p95 extra latency
stays within -sla.maxP95Extra; an endpoint where none does keeps a replica. It
compares each choice with KEDA's default (300 s).

With -month, the endpoints are the ledger's: each namespace's vLLM model
servers (vllm:num_requests_running/waiting, vllm:generation_tokens_total,
vllm:request_success_total, scraped by gpuledger serve or ingest), whose idle
gaps the ledger keeps in buckets at the cooldowns, with the GPU time and cost
their Deployment or LeaderWorkerSet held; serving workloads without vLLM's
series are listed with the idle time DCGM measured. Writes
scale-to-zero-<month>.csv and KEDA objects.

With -requests, the endpoints are a per-request log's (a gateway's access log
as CSV: timestamp,endpoint,service_seconds, the timestamp RFC 3339 or Unix
seconds), each replayed request by request, so that a team can decide before it
deploys vLLM's series: a request that comes a cooldown or more after the last
one ended waits for the load, as do those that come during it. Loads come from
-coldStart (by endpoint, or its name after the last /) or -coldStart.default.
Writes scale-to-zero-requests.csv and KEDA objects.

Otherwise, the traffic is ServeGen's production LLM API traces (one
endpoint per client, request counts per 600 s window with the fitted
inter-arrival distribution; arrivals are drawn from it for each -seeds). Writes
scale-to-zero.csv and, for
every endpoint that should scale to zero, a KEDA object under keda/: a
ScaledObject on -keda.query (a request rate measured in front of the model
server: at zero replicas vLLM's own metrics vanish), or, without one, an
HTTPScaledObject of KEDA's HTTP add-on.`, stdout)
	dir := fs.String("servegen", "../shared/data/traces/inference-servegen", "folder of ServeGen's <model>_windows.csv")
	models := fs.String("models", "", "models to read (default: every <model>_windows.csv)")
	classes := fs.String("coldStart", defaultColdStarts, "per model: GPUs of a replica and the model's load time, model=GPUs:load,…")
	priceFlag := fs.String("pricePerGPUHour", "6.88", "price of a GPU-hour (default: an on-demand H100)")
	penaltyFlag := fs.String("penalty", "0.50", "cost of one cold start's latency (the SLA's price of a slow first answer)")
	seeds := fs.String("seeds", "1,2,3", "seeds of the drawn arrivals")
	maxP95 := fs.Duration("sla.maxP95Extra", 0, "the endpoints' SLA: what the 95th percentile request may wait for a model to load (0: at most 5% of requests wait; negative: no limit)")
	out := fs.String("out", "gpuledger-capacity", "folder for scale-to-zero.csv and keda/")
	namespace := fs.String("keda.namespace", "inference", "namespace of the endpoints' Deployments")
	prom := fs.String("keda.prometheus", "http://vmsingle:8428", "Prometheus-compatible server of -keda.query")
	query := fs.String("keda.query", "", "request rate of an endpoint measured in front of it, %s standing for the endpoint's name, such as sum(rate(gateway_requests_total{service=\"%s\"}[1m])); empty: HTTPScaledObjects")
	newLogger := logFlags(fs)
	monthFlag := fs.String("month", "", "read the endpoints of this month, YYYY-MM, from the ledger (vLLM's series, and their workloads' GPU time and cost) instead of ServeGen's traces")
	coldDefault := fs.String("coldStart.default", "1:120s", "with -month or -requests: load time of a model without a -coldStart entry, as GPUs:load (with -month the GPUs are the ledger's, measured per replica)")
	cluster := fs.String("cluster", "", "with -month: the cluster to read (empty: every cluster)")
	cfgPath := configFlag(fs, "with -month: the configuration whose capacity section prices cold starts (coldStartSeconds, coldStartModels, coldStartPenalty, slaClasses) and whose flavors price GPU-hours the ledger has no workload rate for; the flags given explicitly override its defaults")
	requests := fs.String("requests", "", "replay this per-request log (CSV: timestamp,endpoint,service_seconds) instead of ServeGen's traces")
	gpuActivity := fs.Bool("gpuActivity", false, "with -month: replay every serving workload's timeline from its GPUs' activity (busy at 5% or more), also where vLLM's series exist, to compare the two")
	openStore := storeFlags(fs, defaultLedgerPath, storeRead)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	price, err := ledger.ParseMicros(*priceFlag)
	if err != nil || price <= 0 {
		return usageError{fmt.Sprintf("-pricePerGPUHour=%q: want a positive amount such as 6.88", *priceFlag)}
	}
	penalty, err := ledger.ParseMicros(*penaltyFlag)
	if err != nil || penalty < 0 {
		return usageError{fmt.Sprintf("-penalty=%q: want an amount such as 0.50", *penaltyFlag)}
	}
	cold, err := parseColdStarts(*classes, penalty)
	if err != nil {
		return err
	}
	if *requests != "" {
		if *monthFlag != "" {
			return usageError{"-requests and -month: pass one (a per-request log, or the ledger's month)"}
		}
		def, err := parseColdStarts("default="+*coldDefault, penalty)
		if err != nil {
			return usageError{fmt.Sprintf("-coldStart.default=%q: want GPUs:load such as 1:120s", *coldDefault)}
		}
		return scaleToZeroRequests(stdout, requestOptions{file: *requests, cold: cold, def: def["default"], price: price, maxP95: *maxP95, out: *out,
			keda: capacity.KEDATarget{Prometheus: *prom, Threshold: 1, Port: 8000, MaxReplicas: 4, Query: *query}, kedaNS: *namespace,
			command: "gpuledger scale-to-zero " + strings.Join(args, " ")})
	}
	if *monthFlag != "" {
		month, err := time.Parse("2006-01", *monthFlag)
		if err != nil {
			return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
		}
		def, err := parseColdStarts("default="+*coldDefault, penalty)
		if err != nil {
			return usageError{fmt.Sprintf("-coldStart.default=%q: want GPUs:load such as 1:120s", *coldDefault)}
		}
		store, err := openStore(ctx, newLogger())
		if err != nil {
			return err
		}
		defer store.Close()
		eo, err := scaleToZeroOptions(*cfgPath)
		if err != nil {
			return err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["coldStart.default"] {
			eo.Default = def["default"].Load
		}
		if set["penalty"] {
			eo.PenaltyMicros = penalty
		}
		if set["pricePerGPUHour"] {
			eo.PriceMicros = price
		}
		if set["sla.maxP95Extra"] {
			eo.MaxP95 = *maxP95
		}
		if set["coldStart"] {
			for m, cs := range cold {
				eo.Loads[m] = cs.Load
			}
		}
		eo.GPUActivity = *gpuActivity
		return scaleToZeroLive(ctx, stdout, liveOptions{store: store, cluster: *cluster, from: month, to: month.AddDate(0, 1, 0), eps: eo,
			out: *out, keda: capacity.KEDATarget{Prometheus: *prom, Threshold: 1, Port: 8000, MaxReplicas: 4, Query: *query}})
	}
	seedNums, err := seedList(*seeds)
	if err != nil {
		return err
	}
	names := splitList(*models)
	if len(names) == 0 {
		files, _ := filepath.Glob(filepath.Join(*dir, "*_windows.csv"))
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), "_windows.csv"))
		}
		if len(names) == 0 {
			return usageError{fmt.Sprintf("no <model>_windows.csv in %s; pass -servegen with ServeGen's folder", *dir)}
		}
	}
	sort.Strings(names)
	// The objects of an earlier run would mislead: this run writes its own.
	if err := os.RemoveAll(filepath.Join(*out, "keda")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(*out, "keda"), 0o755); err != nil {
		return err
	}
	csv, err := os.Create(filepath.Join(*out, "scale-to-zero.csv"))
	if err != nil {
		return err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "endpoint,seed,requests,always_on_gpu_hours,min_replicas,cooldown_s,prewarm,saved_gpu_hours,cold_starts_per_day,p95_extra_latency_s,net_saving,keda_default_saved_gpu_hours,keda_default_cold_starts_per_day,keda_default_p95_extra_latency_s,keda_default_net_saving")
	fmt.Fprintf(stdout, "gpuledger scale-to-zero %s\n\nGPU-hour %s, %s a cold start; seeds %s (figures: mean [min-max] over them)\n\n", strings.Join(args, " "),
		ledger.FormatCents(price), ledger.FormatCents(penalty), *seeds)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tendpoints\tGPUs×load\talways-on GPU-h/day\tKEDA 300 s: saved GPU-h/day\tcold starts/day\tp95 extra\tgpuledger: saved GPU-h/day\tcold starts/day\tp95 extra\tscale to 0\tnet saving/month\t")
	began := time.Now()
	for _, model := range names {
		cs, ok := cold[model]
		if !ok {
			return usageError{fmt.Sprintf("model %s has no -coldStart entry (GPUs:load); add one such as %s=1:60s", model, model)}
		}
		f, err := os.Open(filepath.Join(*dir, model+"_windows.csv"))
		if err != nil {
			return err
		}
		eps, err := capacity.ParseServeGen(f, model)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(*dir, model+"_windows.csv"), err)
		}
		var perSeed []capacity.ModelFigures
		for _, seed := range seedNums {
			recs := capacity.RecommendAll(ctx, eps, seed, cs, price, *maxP95)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			perSeed = append(perSeed, capacity.Summarise(recs))
			for i, r := range recs {
				fmt.Fprintf(csv, "%s,%d,%.0f,%.2f,%d,%.0f,%s,%.2f,%.2f,%.0f,%s,%.2f,%.2f,%.0f,%s\n", r.Endpoint, seed, r.Best.Requests, r.Best.AlwaysOnGPUHours,
					r.MinReplicas, r.Best.Policy.Cooldown.Seconds(), capacity.PrewarmText(r.Best.Policy.PreWarm), r.Best.SavedGPUHours, r.Best.ColdStartsPerDay,
					r.Best.P95ExtraLatency.Seconds(), ledger.FormatCents(r.Best.NetSavingMicros), r.Default.SavedGPUHours, r.Default.ColdStartsPerDay,
					r.Default.P95ExtraLatency.Seconds(), ledger.FormatCents(r.Default.NetSavingMicros))
				if seed == seedNums[0] && r.MinReplicas == 0 {
					name := capacity.KEDAName(eps[i].Name)
					t := capacity.KEDATarget{MaxReplicas: 4, Prometheus: *prom, Threshold: 1, Port: 8000, Query: *query}.For(*namespace, name)
					if err := os.WriteFile(filepath.Join(*out, "keda", name+".yaml"), []byte(capacity.KEDAObject(r, t)), 0o644); err != nil {
						return err
					}
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%g×%s\t%s\n", model, len(eps), cs.GPUsPerReplica, cs.Load, capacity.SpreadFigures(perSeed))
		fmt.Fprintf(os.Stderr, "scale-to-zero: %s done, %s\n", model, time.Since(began).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nsaved and cold starts: sums over the endpoints per day; p95 extra: the median endpoint's p95 of what requests wait for a load; net saving: a 30-day month of saved GPU time at the price less the cold starts' penalties, gpuledger's choice.\nPer endpoint: %s; KEDA objects: %s\n",
		filepath.Join(*out, "scale-to-zero.csv"), filepath.Join(*out, "keda"))
	return nil
}

// parseColdStarts is capacity.ParseColdStarts with -coldStart's name on
// its error.
func parseColdStarts(v string, penalty int64) (map[string]capacity.ColdStart, error) {
	out, err := capacity.ParseColdStarts(v, penalty)
	if err != nil {
		return nil, usageError{"-coldStart: " + err.Error()}
	}
	return out, nil
}

// scaleToZeroOptions are the live endpoints' cold-start prices from the
// configuration, or capacity's defaults when there is none to find and
// -config was not given.
func scaleToZeroOptions(cfgPath string) (capacity.EndpointOptions, error) {
	cfg, _, err := loadConfig(cfgPath)
	var none usageError
	if err != nil && cfgPath == "" && errors.As(err, &none) {
		o := capacity.DefaultEndpointOptions
		o.Loads = map[string]time.Duration{}
		return o, nil
	}
	if err != nil {
		return capacity.EndpointOptions{}, err
	}
	o := capacityOptions(cfg, "").Endpoints
	if o.Loads == nil {
		o.Loads = map[string]time.Duration{}
	}
	return o, nil
}
