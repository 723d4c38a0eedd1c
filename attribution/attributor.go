package attribution

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

const hourMs = 3_600_000

// Options tunes an Attributor. The zero value is usable.
type Options struct {
	// ScrapeIntervalMs is how long the last sample of a series counts for when
	// no later sample follows it. Default 15 s, dcgm-exporter's usual
	// interval.
	ScrapeIntervalMs int64
	// StalenessMs is the longest gap between two samples of a device that is
	// still bridged: a sample counts until the next one if that comes within
	// StalenessMs, else for ScrapeIntervalMs only and the rest of the gap is
	// unobserved (charged as unallocated). Default 5 minutes.
	StalenessMs int64
	// StartMs is the first hour to emit rows for, in Unix milliseconds. Zero
	// means the hour of the first accepted sample.
	StartMs int64
}

// Attributor turns samples into hourly ledger rows for one cluster.
//
// Feed it samples in roughly increasing time (each device's samples in
// order), then call Emit with a watermark to get the rows of every hour that
// ended before it. An Attributor is not safe for concurrent use.
type Attributor struct {
	model *Model
	opts  Options

	units     []unit
	byGPU     map[gpuKey]*unit
	instances map[instanceKey]*instance
	pods      map[podKey]string
	hours     map[int64][]map[holder]*usage // hour start (ms) → per unit index

	startMs        int64
	emittedUntilMs int64
	stats          Stats
}

// Stats counts what an Attributor did with its input.
type Stats struct {
	Accepted uint64
	Rejected map[Reason]uint64
}

type gpuKey struct{ node, index string }

type instanceKey struct{ node, gpu, profile, instance string }

type podKey struct{ namespace, pod string }

type holder struct{ namespace, pod, queue string }

type unit struct {
	idx      int
	gpu      *GPU
	slices   int64 // the denominator of a share: 7 for a MIG GPU, 1 otherwise
	profiles map[string]*profileSlots
}

type profileSlots struct {
	size  int64 // compute slices of one instance
	count int   // instances configured
	seen  int   // instances registered so far
}

type instance struct {
	u    *unit
	size int64 // compute slices (1 for a whole GPU)

	lastMs int64 // time of the last finalized observation
	// The observation being collected: every field of one scrape of the
	// device shares its timestamp.
	pending bool
	t       int64
	holder  holder
	fields  uint8
	gr      float64
	util    float64
	power   float64
}

type usage struct {
	heldW, activeW int64 // slice-milliseconds
	energyJ        float64
}

// New returns an Attributor for model, after checking that the model is
// consistent: each GPU once, rates not negative, MIG layouts that fit.
func New(model *Model, opts Options) (*Attributor, error) {
	if opts.ScrapeIntervalMs <= 0 {
		opts.ScrapeIntervalMs = 15_000
	}
	if opts.StalenessMs <= 0 {
		opts.StalenessMs = 300_000
	}
	a := &Attributor{
		model:     model,
		opts:      opts,
		units:     make([]unit, len(model.GPUs)),
		byGPU:     make(map[gpuKey]*unit, len(model.GPUs)),
		instances: make(map[instanceKey]*instance),
		pods:      make(map[podKey]string),
		hours:     make(map[int64][]map[holder]*usage),
		stats:     Stats{Rejected: make(map[Reason]uint64)},
	}
	if opts.StartMs != 0 {
		a.startMs = floorHour(opts.StartMs)
		a.emittedUntilMs = a.startMs
	}
	var errs []error
	for i := range model.GPUs {
		g := &model.GPUs[i]
		u := &a.units[i]
		u.idx, u.gpu, u.slices = i, g, 1
		k := gpuKey{g.Node, g.Index}
		if _, dup := a.byGPU[k]; dup {
			errs = append(errs, fmt.Errorf("gpu %s/%s: listed twice", g.Node, g.Index))
			continue
		}
		a.byGPU[k] = u
		if g.RateMicrosPerHour < 0 {
			errs = append(errs, fmt.Errorf("gpu %s/%s: rate %d is negative", g.Node, g.Index, g.RateMicrosPerHour))
		}
		if len(g.MIG) == 0 {
			continue
		}
		u.slices = int64(MIGComputeSlices(g.Model))
		u.profiles = make(map[string]*profileSlots)
		var used int64
		for _, p := range g.MIG {
			mp, err := ParseMIGProfile(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("gpu %s/%s: %w", g.Node, g.Index, err))
				continue
			}
			ps := u.profiles[p]
			if ps == nil {
				ps = &profileSlots{size: int64(mp.ComputeSlices)}
				u.profiles[p] = ps
			}
			ps.count++
			used += int64(mp.ComputeSlices)
		}
		if used > u.slices {
			errs = append(errs, fmt.Errorf("gpu %s/%s: MIG layout %s uses %d compute slices; a %s has %d",
				g.Node, g.Index, strings.Join(g.MIG, ","), used, g.Model, u.slices))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// Stats returns a copy of the counters.
func (a *Attributor) Stats() Stats {
	s := Stats{Accepted: a.stats.Accepted, Rejected: make(map[Reason]uint64, len(a.stats.Rejected))}
	for k, v := range a.stats.Rejected {
		s.Rejected[k] = v
	}
	return s
}

func (a *Attributor) reject(r Reason) { a.stats.Rejected[r]++ }

// AddPod records the LocalQueue of a pod, as kube-state-metrics'
// kube_pod_labels reports it. It applies to every hour not yet emitted.
func (a *Attributor) AddPod(p PodInfo) {
	k := podKey{p.Namespace, p.Pod}
	if q, ok := a.pods[k]; ok && q == p.Queue {
		return
	}
	a.pods[podKey{strings.Clone(p.Namespace), strings.Clone(p.Pod)}] = strings.Clone(p.Queue)
}

// Add takes one sample. Samples of one device must come in time order; one
// older than the device's last, a repeated field, a value that is NaN or
// infinite, or one for an hour already emitted is rejected and counted.
func (a *Attributor) Add(s *Sample) {
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) || s.Field == FieldUnknown {
		a.reject(ReasonBadValue)
		return
	}
	inst := a.instance(s)
	if inst == nil {
		return
	}
	if inst.pending {
		switch {
		case s.TimeMs < inst.t:
			a.reject(ReasonOutOfOrder)
			return
		case s.TimeMs == inst.t:
			if inst.fields&(1<<s.Field) != 0 {
				a.reject(ReasonDuplicate)
				return
			}
			inst.set(s)
			a.stats.Accepted++
			return
		}
		gap := s.TimeMs - inst.t
		if gap > a.opts.StalenessMs {
			gap = a.opts.ScrapeIntervalMs
		}
		a.finalize(inst, gap)
	}
	if s.TimeMs <= inst.lastMs {
		if s.TimeMs == inst.lastMs {
			a.reject(ReasonDuplicate)
		} else {
			a.reject(ReasonOutOfOrder)
		}
		return
	}
	if a.startMs == 0 {
		a.startMs = floorHour(s.TimeMs)
		a.emittedUntilMs = a.startMs
	}
	if s.TimeMs < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	inst.pending, inst.t, inst.fields = true, s.TimeMs, 0
	if s.Pod == "" {
		inst.holder = holder{}
	} else if h := inst.holder; h.namespace != s.Namespace || h.pod != s.Pod || h.queue != s.Queue {
		inst.holder = holder{strings.Clone(s.Namespace), strings.Clone(s.Pod), strings.Clone(s.Queue)}
	}
	inst.set(s)
	a.stats.Accepted++
}

func (in *instance) set(s *Sample) {
	in.fields |= 1 << s.Field
	switch s.Field {
	case FieldGREngineActive:
		in.gr = s.Value
	case FieldGPUUtil:
		in.util = s.Value
	case FieldPowerUsage:
		in.power = s.Value
	}
}

func (a *Attributor) instance(s *Sample) *instance {
	k := instanceKey{s.Node, s.GPU, s.Profile, s.Instance}
	if in := a.instances[k]; in != nil {
		return in
	}
	u := a.byGPU[gpuKey{s.Node, s.GPU}]
	if u == nil {
		a.reject(ReasonUnknownGPU)
		return nil
	}
	in := &instance{u: u, size: 1}
	switch {
	case u.profiles == nil && s.Profile == "":
	case u.profiles == nil:
		a.reject(ReasonUnknownInstance)
		return nil
	default:
		ps := u.profiles[s.Profile]
		if ps == nil || ps.seen >= ps.count {
			a.reject(ReasonUnknownInstance)
			return nil
		}
		ps.seen++
		in.size = ps.size
	}
	k = instanceKey{strings.Clone(s.Node), strings.Clone(s.GPU), strings.Clone(s.Profile), strings.Clone(s.Instance)}
	a.instances[k] = in
	return in
}

// activity returns the device's busy fraction for the pending observation:
// GR engine activity where reported (always on MIG instances), else
// GPU_UTIL/100, else 0: a held GPU that reports no activity is charged idle.
func (in *instance) activity() float64 {
	var act float64
	switch {
	case in.fields&(1<<FieldGREngineActive) != 0:
		act = in.gr
	case in.fields&(1<<FieldGPUUtil) != 0:
		act = in.util / 100
	}
	return min(max(act, 0), 1)
}

// finalize books the pending observation for covMs milliseconds.
func (a *Attributor) finalize(in *instance, covMs int64) {
	in.pending = false
	in.lastMs = in.t
	if in.holder.pod == "" {
		return
	}
	act := in.activity()
	hasPower := in.fields&(1<<FieldPowerUsage) != 0 && in.power > 0
	start, end := in.t, in.t+covMs
	for start < end {
		h := floorHour(start)
		pieceEnd := min(end, h+hourMs)
		if h >= a.emittedUntilMs {
			ms := pieceEnd - start
			u := a.usage(h, in.u.idx, in.holder)
			w := ms * in.size
			u.heldW += w
			u.activeW += int64(math.Round(float64(w) * act))
			if hasPower {
				u.energyJ += in.power * float64(ms) / 1000 * float64(in.size) / float64(in.u.slices)
			}
		}
		start = pieceEnd
	}
}

func (a *Attributor) usage(hour int64, unitIdx int, h holder) *usage {
	perUnit := a.hours[hour]
	if perUnit == nil {
		perUnit = make([]map[holder]*usage, len(a.units))
		a.hours[hour] = perUnit
	}
	m := perUnit[unitIdx]
	if m == nil {
		m = make(map[holder]*usage, 1)
		perUnit[unitIdx] = m
	}
	u := m[h]
	if u == nil {
		u = &usage{}
		m[h] = u
	}
	return u
}

// Emit closes every hour that ends at or before untilMs (rounded down to an
// hour) and returns their rows: for each hour, one row per owner dimension
// combination plus unallocated rows, summing exactly to the inventory's
// hourly cost. Samples for closed hours are rejected as late afterwards.
// Rows come sorted by Key.
func (a *Attributor) Emit(untilMs int64) []ledger.Row {
	until := floorHour(untilMs)
	if a.startMs == 0 || until <= a.emittedUntilMs {
		return nil
	}
	for _, in := range a.instances {
		if in.pending && in.t < until {
			a.finalize(in, a.opts.ScrapeIntervalMs)
		}
	}
	var rows []ledger.Row
	for h := a.emittedUntilMs; h < until; h += hourMs {
		rows = a.appendHourRows(rows, h)
		delete(a.hours, h)
	}
	a.emittedUntilMs = until
	return rows
}

type part struct {
	h              holder
	active, idle   int64
	energyJ        float64
	heldW, activeW int64
}

func (a *Attributor) appendHourRows(dst []ledger.Row, hour int64) []ledger.Row {
	perUnit := a.hours[hour]
	byKey := make(map[ledger.Key]*ledger.Row)
	hourTime := msToTime(hour)
	var parts []part
	var weights, costs []int64
	for i := range a.units {
		u := &a.units[i]
		parts = parts[:0]
		if perUnit != nil {
			for h, us := range perUnit[i] {
				parts = append(parts, part{h: h, heldW: us.heldW, activeW: us.activeW, energyJ: us.energyJ})
			}
		}
		sort.Slice(parts, func(x, y int) bool {
			p, q := parts[x].h, parts[y].h
			if p.namespace != q.namespace {
				return p.namespace < q.namespace
			}
			if p.pod != q.pod {
				return p.pod < q.pod
			}
			return p.queue < q.queue
		})
		capacity := u.slices * hourMs
		unalloc := capacity
		weights = append(weights[:0], 0)
		for _, p := range parts {
			unalloc -= p.heldW
			weights = append(weights, p.activeW, p.heldW-p.activeW)
		}
		weights[0] = unalloc
		costs = splitLargestRemainder(u.gpu.RateMicrosPerHour, weights, costs)

		den := float64(u.slices) * 1000
		r := rowFor(byKey, ledger.Key{Hour: hourTime, Cluster: a.model.Cluster, Team: ledger.TeamUnallocated, Flavor: u.gpu.Flavor})
		r.GPUSeconds += float64(unalloc) / den
		r.CostMicros += costs[0]
		r.IdleCostMicros += costs[0]
		for j, p := range parts {
			r := rowFor(byKey, a.keyFor(hourTime, u.gpu.Flavor, p.h))
			r.GPUSeconds += float64(p.heldW) / den
			r.ActiveGPUSeconds += float64(p.activeW) / den
			r.CostMicros += costs[1+2*j] + costs[2+2*j]
			r.IdleCostMicros += costs[2+2*j]
			r.EnergyJoules += p.energyJ
		}
	}
	start := len(dst)
	for _, r := range byKey {
		dst = append(dst, *r)
	}
	SortRows(dst[start:])
	return dst
}

func rowFor(m map[ledger.Key]*ledger.Row, k ledger.Key) *ledger.Row {
	r := m[k]
	if r == nil {
		r = &ledger.Row{Key: k}
		m[k] = r
	}
	return r
}

// keyFor resolves a holder to its owner dimensions: the queue label on the
// DCGM series, else the one kube-state-metrics reported for the pod; the
// queue's ClusterQueue and its team; else the namespace's team; else
// TeamUnowned.
func (a *Attributor) keyFor(hour time.Time, flavor string, h holder) ledger.Key {
	k := ledger.Key{Hour: hour, Cluster: a.model.Cluster, Namespace: h.namespace, Flavor: flavor}
	q := h.queue
	if q == "" {
		q = a.pods[podKey{h.namespace, h.pod}]
	}
	if q != "" {
		k.LocalQueue = q
		k.ClusterQueue = a.model.LocalQueues[QueueRef{h.namespace, q}]
		if k.ClusterQueue != "" {
			k.Team = a.model.ClusterQueueTeams[k.ClusterQueue]
		}
	}
	if k.Team == "" {
		k.Team = a.model.NamespaceTeams[h.namespace]
	}
	if k.Team == "" {
		k.Team = ledger.TeamUnowned
	}
	return k
}

func floorHour(ms int64) int64 {
	h := ms / hourMs * hourMs
	if h > ms {
		h -= hourMs
	}
	return h
}

func msToTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// SortRows sorts rows by Key: hour, then cluster, team, namespace,
// LocalQueue, ClusterQueue and flavor.
func SortRows(rows []ledger.Row) {
	sort.Slice(rows, func(i, j int) bool { return keyLess(&rows[i].Key, &rows[j].Key) })
}

func keyLess(a, b *ledger.Key) bool {
	if !a.Hour.Equal(b.Hour) {
		return a.Hour.Before(b.Hour)
	}
	for _, p := range [...][2]string{
		{a.Cluster, b.Cluster}, {a.Team, b.Team}, {a.Namespace, b.Namespace},
		{a.LocalQueue, b.LocalQueue}, {a.ClusterQueue, b.ClusterQueue}, {a.Flavor, b.Flavor},
	} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	return false
}
