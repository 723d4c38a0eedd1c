package capacity

import (
	"context"
	"errors"
	"flag"
	"io"
	"maps"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
)

// DefaultColdStarts are the models' replica sizes and load times:
// published load times run from ~15 s (an 8B model, streamed weights) to
// over 10 minutes (a 70B model on 8 GPUs).
const DefaultColdStarts = "m-small=1:30s,m-mid=2:120s,m-large=8:600s,deepseek-r1=8:900s,mm-image=1:60s"

// ScaleToZeroFlags are `gpuledger scale-to-zero`'s flags: which endpoints
// to replay (ServeGen's traces, a request log or the ledger's month), the
// prices of GPU time and of cold starts, the SLA and the KEDA objects.
type ScaleToZeroFlags struct {
	Run                                     RunOptions
	Dir, Requests, Cluster                  string
	Models                                  []string
	Seeds                                   []uint64
	Month                                   time.Time
	ColdStarts, ColdDefault, Price, Penalty string
	MaxP95                                  time.Duration
	GPUActivity                             bool
}

// Register registers the flags, each setting a field of f.
func (f *ScaleToZeroFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Dir, "servegen", "../shared/data/traces/inference-servegen", "folder of ServeGen's <model>_windows.csv")
	flagutil.ListVar(fs, &f.Models, "models", "", "models to read (default: every <model>_windows.csv)")
	fs.StringVar(&f.ColdStarts, "coldStart", DefaultColdStarts, "per model: GPUs of a replica and the model's load time, model=GPUs:load,…")
	fs.StringVar(&f.Price, "pricePerGPUHour", "6.88", "price of a GPU-hour (default: an on-demand H100)")
	fs.StringVar(&f.Penalty, "penalty", "0.50", "cost of one cold start's latency (the SLA's price of a slow first answer)")
	flagutil.SeedsVar(fs, &f.Seeds, "seeds", "1,2,3", "seeds of the drawn arrivals")
	fs.DurationVar(&f.MaxP95, "sla.maxP95Extra", 0, "the endpoints' SLA: what the 95th percentile request may wait for a model to load (0: at most 5% of requests wait; negative: no limit)")
	fs.StringVar(&f.Run.Out, "out", "gpuledger-capacity", "folder for scale-to-zero.csv and keda/")
	fs.StringVar(&f.Run.Namespace, "keda.namespace", "inference", "namespace of the endpoints' Deployments")
	fs.StringVar(&f.Run.KEDA.Prometheus, "keda.prometheus", "http://vmsingle:8428", "Prometheus-compatible server of -keda.query")
	fs.StringVar(&f.Run.KEDA.Query, "keda.query", "", "request rate of an endpoint measured in front of it, %s standing for the endpoint's name, such as sum(rate(gateway_requests_total{service=\"%s\"}[1m])); empty: HTTPScaledObjects")
	flagutil.MonthVar(fs, &f.Month, "month", "", "read the endpoints of this month, YYYY-MM, from the ledger (vLLM's series, and their workloads' GPU time and cost) instead of ServeGen's traces")
	fs.StringVar(&f.ColdDefault, "coldStart.default", "1:120s", "with -month or -requests: load time of a model without a -coldStart entry, as GPUs:load (with -month the GPUs are the ledger's, measured per replica)")
	fs.StringVar(&f.Cluster, "cluster", "", "with -month: the cluster to read (empty: every cluster)")
	fs.StringVar(&f.Requests, "requests", "", "replay this per-request log (CSV: timestamp,endpoint,service_seconds) instead of ServeGen's traces")
	fs.BoolVar(&f.GPUActivity, "gpuActivity", false, "with -month: replay every serving workload's timeline from its GPUs' activity (busy at 5% or more), also where vLLM's series exist, to compare the two")
}

// Execute runs what the flags ask for and writes the table to w. set says
// which flags were given: with -month they override cfg's capacity
// section (capacity's defaults when cfg is nil); open opens the ledger.
func (f *ScaleToZeroFlags) Execute(ctx context.Context, w io.Writer, set func(name string) bool, cfg *config.Config,
	open func(context.Context) (ledger.Store, error)) error {
	price, err := ledger.ParseMicros(f.Price)
	if err != nil || price <= 0 {
		return flagutil.Usagef("-pricePerGPUHour=%q: want a positive amount such as 6.88", f.Price)
	}
	penalty, err := ledger.ParseMicros(f.Penalty)
	if err != nil || penalty < 0 {
		return flagutil.Usagef("-penalty=%q: want an amount such as 0.50", f.Penalty)
	}
	cold, err := ParseColdStarts(f.ColdStarts, penalty)
	if err != nil {
		return flagutil.Usagef("-coldStart: %v", err)
	}
	def, err := ParseColdStarts("default="+f.ColdDefault, penalty)
	if err != nil {
		return flagutil.Usagef("-coldStart.default=%q: want GPUs:load such as 1:120s", f.ColdDefault)
	}
	ro := f.Run
	ro.KEDA.Threshold, ro.KEDA.Port, ro.KEDA.MaxReplicas = 1, 8000, 4
	switch {
	case f.Requests != "" && !f.Month.IsZero():
		return flagutil.Usagef("-requests and -month: pass one (a per-request log, or the ledger's month)")
	case f.Requests != "":
		return RequestsRun{RunOptions: ro, File: f.Requests, Cold: cold, Default: def["default"], PriceMicros: price, MaxP95: f.MaxP95}.Run(w)
	case f.Month.IsZero():
		return ServeGenRun{RunOptions: ro, Dir: f.Dir, Models: f.Models, Cold: cold, PriceMicros: price, PenaltyMicros: penalty,
			Seeds: f.Seeds, MaxP95: f.MaxP95}.Run(ctx, w)
	}
	eo := DefaultEndpointOptions
	if cfg != nil {
		eo = SettingsOf(cfg, "").Endpoints
	}
	eo.Loads = maps.Clone(eo.Loads)
	if eo.Loads == nil {
		eo.Loads = map[string]time.Duration{}
	}
	// The flags given override the configuration's defaults.
	if set("coldStart.default") {
		eo.Default = def["default"].Load
	}
	if set("penalty") {
		eo.PenaltyMicros = penalty
	}
	if set("pricePerGPUHour") {
		eo.PriceMicros = price
	}
	if set("sla.maxP95Extra") {
		eo.MaxP95 = f.MaxP95
	}
	if set("coldStart") {
		for m, cs := range cold {
			eo.Loads[m] = cs.Load
		}
	}
	eo.GPUActivity = f.GPUActivity
	store, err := open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	err = LiveRun{RunOptions: ro, Store: store, Cluster: f.Cluster, From: f.Month, To: f.Month.AddDate(0, 1, 0), Endpoints: eo}.Run(ctx, w)
	if errors.Is(err, ErrNoEndpoints) {
		return flagutil.UsageError{Msg: err.Error()}
	}
	return err
}
