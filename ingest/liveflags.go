package ingest

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// LiveFlags are `gpuledger serve`'s flags of the live pipeline: remote
// write's limits, the scrape targets, the write-ahead log, settling, the
// reorder window and the memory budget.
type LiveFlags struct {
	Pipeline    PipelineOptions
	Targets     []string
	Interval    time.Duration
	MaxInflight int64
	MemoryLimit string
}

// Register registers the flags, each setting a field of f.
func (f *LiveFlags) Register(fs *flag.FlagSet) {
	p := &f.Pipeline
	fs.Int64Var(&f.MaxInflight, "remoteWrite.maxInflightBytes", 128<<20, "remote-write bytes handled at once; past it requests are answered 429")
	fs.IntVar(&p.Limits.MaxSeries, "remoteWrite.maxSeries", 200_000, "most series in one remote-write request")
	flagutil.ListVar(fs, &f.Targets, "scrape.targets", "", "comma-separated exporter URLs to scrape (dcgm-exporter, kube-state-metrics), e.g. http://node-1:9400/metrics")
	fs.DurationVar(&f.Interval, "scrape.interval", 15*time.Second, "scrape interval, and how long a last sample counts")
	fs.StringVar(&p.Dir, "ingest.dir", "gpuledger-data/pipeline", "directory of the write-ahead log and snapshots of the live pipeline; keep it on a persistent volume")
	fs.DurationVar(&p.SettleAfter, "ingest.settleAfter", 10*time.Minute, "how long after an hour ends it is settled: written, and closed to late samples")
	fs.DurationVar(&p.MaxAhead, "ingest.maxAhead", 2*time.Minute, "samples stamped further ahead of this server's clock are rejected (must be less than -ingest.settleAfter)")
	fs.DurationVar(&p.ReorderWindow, "ingest.reorderWindow", 2*time.Minute, "how long (of sample time) samples wait to be put in time order: requests from several vmagent queues arrive out of order, by seconds live and by an outage's length after one; at most -ingest.settleAfter less 5 minutes")
	fs.DurationVar(&p.CatchUpWindow, "ingest.catchUpWindow", 10*time.Minute, "the least reorder window while a backlog comes in (requests more than -ingest.reorderWindow behind the clock, and that long after the last): after an outage each vmagent queue retries the block it held at its own time, as old as the outage is long, so the window is as deep as the backlog when that is longer, within -ingest.maxBuffered; a negative value, or one no longer than -ingest.reorderWindow, keeps -ingest.reorderWindow")
	fs.IntVar(&p.MaxBuffered, "ingest.maxBuffered", 5_000_000, "most samples and pod facts waiting in the reorder window; past it (or past a quarter of -ingest.memoryLimit in bytes: 32 bytes an item and the labels it brought, a few hundred for a pod seen for the first time) the oldest are put in order early (gpuledger_ingest_shed_samples_total), and a held block of a backlog that deep can come out of order: 5,000,000 is about 23 minutes of 10,000 GPUs' kept series")
	fs.StringVar(&f.MemoryLimit, "ingest.memoryLimit", "", "memory serve may use in all, such as 4GiB: an eighth of it for the remote-write bytes in flight (as sent and as they decode; at most -remoteWrite.maxInflightBytes), a quarter for the reorder window (past it the oldest are put in order early), an eighth for the pods remembered (about 1 KiB each; past it those with no GPU request and the least recently reported are forgotten), and Go's garbage collector is told 80% of it unless GOMEMLIMIT is set; empty: the container's cgroup limit, else the machine's memory")
}

// Budget checks the flags, works out the memory budget (MemoryBudgetOf),
// tells Go's garbage collector its share unless GOMEMLIMIT is set, and
// sets the pipeline's and attribution's bounds from it. It returns the
// budget and where its limit came from.
func (f *LiveFlags) Budget(attr *attribution.Options) (MemoryBudget, string, error) {
	if f.Pipeline.MaxBuffered <= 0 {
		return MemoryBudget{}, "", fmt.Errorf("-ingest.maxBuffered=%d: want a positive number of samples, such as 5000000", f.Pipeline.MaxBuffered)
	}
	b, from, err := MemoryBudgetOf(f.MemoryLimit, f.MaxInflight)
	if err != nil {
		return b, from, fmt.Errorf("-ingest.memoryLimit: %w", err)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(b.GoLimit)
	}
	f.Pipeline.MaxBufferedBytes = b.Buffer
	attr.ScrapeIntervalMs, attr.MaxPods = f.Interval.Milliseconds(), b.Pods
	return b, from, nil
}
