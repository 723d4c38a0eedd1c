package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
)

// defaultColdStarts are the models' replica sizes and load times:
// published load times run from ~15 s (an 8B model, streamed weights) to
// over 10 minutes (a 70B model on 8 GPUs).
const defaultColdStarts = "m-small=1:30s,m-mid=2:120s,m-large=8:600s,deepseek-r1=8:900s,mm-image=1:60s"

func runScaleToZero(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("scale-to-zero", stdout)
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
	def, err := parseColdStarts("default="+*coldDefault, penalty)
	if err != nil {
		return usageError{fmt.Sprintf("-coldStart.default=%q: want GPUs:load such as 1:120s", *coldDefault)}
	}
	ro := capacity.RunOptions{Out: *out, Namespace: *namespace, Command: "gpuledger scale-to-zero " + strings.Join(args, " "), Progress: os.Stderr,
		KEDA: capacity.KEDATarget{Prometheus: *prom, Threshold: 1, Port: 8000, MaxReplicas: 4, Query: *query}}
	switch {
	case *requests != "" && *monthFlag != "":
		return usageError{"-requests and -month: pass one (a per-request log, or the ledger's month)"}
	case *requests != "":
		return capacity.RequestsRun{RunOptions: ro, File: *requests, Cold: cold, Default: def["default"], PriceMicros: price, MaxP95: *maxP95}.Run(stdout)
	case *monthFlag != "":
		month, err := time.Parse("2006-01", *monthFlag)
		if err != nil {
			return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
		}
		eo, err := scaleToZeroOptions(*cfgPath)
		if err != nil {
			return err
		}
		// The flags given override the configuration's defaults.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "coldStart.default":
				eo.Default = def["default"].Load
			case "penalty":
				eo.PenaltyMicros = penalty
			case "pricePerGPUHour":
				eo.PriceMicros = price
			case "sla.maxP95Extra":
				eo.MaxP95 = *maxP95
			case "coldStart":
				for m, cs := range cold {
					eo.Loads[m] = cs.Load
				}
			}
		})
		eo.GPUActivity = *gpuActivity
		store, err := openStore(ctx, newLogger())
		if err != nil {
			return err
		}
		defer store.Close()
		err = capacity.LiveRun{RunOptions: ro, Store: store, Cluster: *cluster, From: month, To: month.AddDate(0, 1, 0), Endpoints: eo}.Run(ctx, stdout)
		if errors.Is(err, capacity.ErrNoEndpoints) {
			return usageError{err.Error()}
		}
		return err
	}
	seedNums, err := seedList(*seeds)
	if err != nil {
		return err
	}
	return capacity.ServeGenRun{RunOptions: ro, Dir: *dir, Models: splitList(*models), Cold: cold, PriceMicros: price, PenaltyMicros: penalty,
		Seeds: seedNums, MaxP95: *maxP95}.Run(ctx, stdout)
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
