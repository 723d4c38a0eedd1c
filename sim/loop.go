package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ledger"
)

// Ingester takes the replay's exposition, scrape by scrape, and writes
// the hours that are complete to the ledger: ingest.Pipeline does. (sim
// does not import ingest, whose tests render telemetry with sim.)
type Ingester interface {
	Scrape(body []byte, scrapeMs int64) error
	FlushUntil(ctx context.Context, until time.Time) error
}

// IngesterFactory makes the closed loop's Ingester for the replayed cluster's
// cost model, writing to the replay's Store; now is the replay's clock.
type IngesterFactory func(model *attribution.Model, opts attribution.Options, now func() time.Time) (Ingester, error)

// ReplayGPUModel is the GPU the replayed cluster's nodes report.
const ReplayGPUModel = "NVIDIA H100 80GB HBM3"

// farFuture ends a hold whose end is not known yet.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// loop is the replay's closed loop: the GPUs of the modelled cluster emit
// dcgm-exporter and kube-state-metrics exposition as the replay runs (the
// Telemetry renderer over the holds the recorder keeps), the exposition
// goes through ingest's pipeline into attribution and the ledger Store,
// and the cost-weighted policy reads the teams' spend back from the Store.
type loop struct {
	tel   *Telemetry
	pl    Ingester
	store ledger.Store
	epoch time.Time
	body  []byte
	// written is the end of the hours in the Store.
	written time.Time
	scrapes int
	now     time.Time // the replay's clock, for the pipeline
}

func newLoop(store ledger.Store, epoch time.Time, m *Model, opts ReplayOptions) (*loop, error) {
	if opts.Ingest == nil {
		return nil, fmt.Errorf("the closed loop needs ReplayOptions.Ingest (an ingest pipeline onto the Store)")
	}
	l := &loop{store: store, epoch: epoch, written: epoch, now: epoch}
	l.tel = NewTelemetry(m.Cluster, epoch, farFuture, opts.ScrapeInterval)
	var err error
	l.pl, err = opts.Ingest(m.Attribution, attribution.Options{ScrapeIntervalMs: opts.ScrapeInterval.Milliseconds(), StartMs: epoch.UnixMilli()},
		func() time.Time { return l.now })
	if err != nil {
		return nil, err
	}
	return l, nil
}

// recorder records which pods hold which devices of the model's cluster
// as the replay runs, for the telemetry.
type recorder struct {
	m       *Model
	epoch   time.Time
	nextJob int
}

// podHold is where one pod's hold sits, to end it later.
type podHold struct {
	dev *Device
	idx int
}

// hold records that a pod of j runs (or, waiting, only holds) perPod units
// of the admission core's node from now on: devices of its node and MIG
// profile that are free.
func (rc *recorder) hold(j *replayJob, node, perPod int, now time.Duration, waiting bool) []podHold {
	if j.simJob == nil {
		j.simJob = j.Job
		if j.simJob == nil {
			rc.nextJob++
			j.simJob = &Job{ID: rc.nextJob, Name: j.ID + "-worker", Kind: KindTraining, Namespace: j.Queue, Queue: j.Queue, Resource: j.Resource, Count: j.GPUs}
		}
	}
	at := rc.epoch.Add(now)
	ref := rc.m.ref[node]
	pod := j.simJob.Name + "-" + strconv.Itoa(j.pods)
	j.pods++
	var out []podHold
	for _, d := range rc.m.Cluster.Nodes[ref.node].Devices {
		if len(out) == perPod {
			break
		}
		// A device is busy while its last hold has not ended.
		if n := len(d.Holds); d.Profile != ref.profile || n > 0 && d.Holds[n-1].End.After(at) {
			continue
		}
		d.Holds = append(d.Holds, Hold{Start: at, End: farFuture, Job: j.simJob, Pod: pod, Container: containerName(j.simJob.Kind),
			PodDevices: perPod, Waiting: waiting})
		out = append(out, podHold{dev: d, idx: len(d.Holds) - 1})
	}
	return out
}

// release ends holds at now.
func (rc *recorder) release(hs []podHold, now time.Duration) {
	at := rc.epoch.Add(now)
	for _, h := range hs {
		h.dev.Holds[h.idx].End = at
	}
}

// advance renders and ingests every scrape before now, and writes the
// hours that are complete to the Store. It reports whether it wrote any.
func (l *loop) advance(ctx context.Context, now time.Duration) (bool, error) {
	until := l.epoch.Add(now)
	l.now = until
	for l.tel.next.Before(until) {
		at, body, _ := l.tel.Next(l.body[:0])
		l.body = body
		if err := l.pl.Scrape(body, at.UnixMilli()); err != nil {
			return false, fmt.Errorf("ingest the scrape at %s: %w", at.Format(time.RFC3339), err)
		}
		l.scrapes++
		l.trim()
	}
	hour := until.Truncate(time.Hour)
	if !hour.After(l.written) {
		return false, nil
	}
	if err := l.pl.FlushUntil(ctx, hour); err != nil {
		return false, err
	}
	l.written = hour
	return true, nil
}

// trim drops holds that ended before the next scrape, every few hundred
// scrapes, so a long replay's memory stays what is running. The renderer
// has moved past them.
func (l *loop) trim() {
	if l.scrapes%256 != 0 {
		return
	}
	for i := range l.tel.devs {
		ds := &l.tel.devs[i]
		if ds.holdIdx == 0 {
			continue
		}
		// Holds before holdIdx have ended; the replay refers to the others
		// by index, so only a device whose holds have all ended is trimmed.
		if ds.holdIdx == len(ds.d.Holds) {
			ds.d.Holds = ds.d.Holds[:0]
			ds.holdIdx = 0
			ds.hold = nil
			l.tel.podsStale = true
		}
	}
}

// shares reads each team's decayed spend from the Store (admission's
// LedgerSpend, as a controller reads it); the caller divides by weights.
func (l *loop) shares(ctx context.Context, now time.Duration, halfLife time.Duration) (map[string]float64, error) {
	src := admission.LedgerSpend{Store: l.store, Cluster: "replay", HalfLife: halfLife, Epoch: l.epoch}
	return src.Spend(ctx, l.epoch.Add(now), l.written)
}
