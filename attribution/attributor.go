package attribution

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

const hourMs = 3_600_000

// ShareUnits is the denominator of a pod's share of a shared GPU: 720,720 is
// divisible by every count from 1 to 16, so even splits among up to 16 pods
// are exact. Time weights are milliseconds × compute slices × share units.
const ShareUnits = 720_720

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
	pods      map[podKey]*podState
	podsVer   uint64
	hours     map[int64][]map[holder]*usage // hour start (ms) → per unit index

	startMs        int64
	emittedUntilMs int64
	stats          Stats
}

// Stats counts what an Attributor did with its input.
type Stats struct {
	Accepted uint64
	Rejected map[Reason]uint64
	// CounterResets counts energy counters seen going down: the sample is
	// used, its value counted from zero.
	CounterResets uint64
}

type gpuKey struct{ node, index string }

type instanceKey struct{ node, gpu, profile, instance string }

type podKey struct{ namespace, pod string }

// podState is what kube-state-metrics said of a pod.
type podState struct {
	queue                string
	ownerKind, ownerName string
	requests             map[string]int64 // container → request × 1000
}

func (p *podState) requestMilli() int64 {
	var sum int64
	for _, r := range p.requests {
		sum += r
	}
	return sum
}

// holder is a pod holding a device; the zero holder is nobody.
type holder struct{ namespace, pod, queue string }

type unit struct {
	idx      int
	gpu      *GPU
	slices   int64 // compute slices: 7 for a MIG GPU (4 on an A30), 1 otherwise
	profiles map[string]*profileSlots
	replicas int64 // advertised replicas of a shared GPU; 1 when exclusive
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
	// The energy counter's last value, in mJ, and whether there is one.
	lastEnergy    float64
	hasLastEnergy bool

	// The observation being collected: every series of one scrape of the
	// device shares its timestamp. A shared GPU is reported once per pod.
	pending     bool
	t           int64
	holders     []holder
	fields      uint8   // fields seen for the first holder's series
	extra       []uint8 // fields seen for each further holder's series
	gr          float64
	util        float64
	power       float64
	energyDelta float64 // mJ since the previous counter value; <0 unknown

	// prev holds the last finalized observation's holders.
	prev []holder
	// Shares of the holders, cached until the holders or the pods change.
	shareFor []holder
	shareVer uint64
	shares   []int64
}

type usage struct {
	heldW, activeW int64 // ms × compute slices × share units
	energyMJ       int64
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
		pods:      make(map[podKey]*podState),
		hours:     make(map[int64][]map[holder]*usage),
		stats:     Stats{Rejected: make(map[Reason]uint64)},
	}
	if opts.StartMs != 0 {
		a.startMs = floorHour(opts.StartMs)
		a.emittedUntilMs = a.startMs
	}
	var errs []error
	if model.EnergyPriceMicrosPerKWh < 0 || model.PUEMicros < 0 {
		errs = append(errs, fmt.Errorf("energy price %d and PUE %d must not be negative", model.EnergyPriceMicrosPerKWh, model.PUEMicros))
	}
	for i := range model.GPUs {
		g := &model.GPUs[i]
		u := &a.units[i]
		u.idx, u.gpu, u.slices, u.replicas = i, g, 1, 1
		k := gpuKey{g.Node, g.Index}
		if _, dup := a.byGPU[k]; dup {
			errs = append(errs, fmt.Errorf("gpu %s/%s: listed twice", g.Node, g.Index))
			continue
		}
		a.byGPU[k] = u
		if g.RateMicrosPerHour < 0 {
			errs = append(errs, fmt.Errorf("gpu %s/%s: rate %d is negative", g.Node, g.Index, g.RateMicrosPerHour))
		}
		if g.Replicas > 1 {
			u.replicas = int64(g.Replicas)
		}
		if g.Replicas < 0 {
			errs = append(errs, fmt.Errorf("gpu %s/%s: replicas %d is negative", g.Node, g.Index, g.Replicas))
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
	s := Stats{Accepted: a.stats.Accepted, CounterResets: a.stats.CounterResets, Rejected: make(map[Reason]uint64, len(a.stats.Rejected))}
	for k, v := range a.stats.Rejected {
		s.Rejected[k] = v
	}
	return s
}

func (a *Attributor) reject(r Reason) { a.stats.Rejected[r]++ }

// AddPod records what kube-state-metrics says of a pod: its LocalQueue, its
// owner, a container's GPU request. Fields left empty keep what was known.
// It applies to every hour not yet emitted.
func (a *Attributor) AddPod(p PodInfo) {
	k := podKey{p.Namespace, p.Pod}
	st := a.pods[k]
	if st == nil {
		st = &podState{}
		a.pods[podKey{strings.Clone(p.Namespace), strings.Clone(p.Pod)}] = st
	}
	if p.Queue != "" && p.Queue != st.queue {
		st.queue = strings.Clone(p.Queue)
	}
	if p.OwnerName != "" && (p.OwnerName != st.ownerName || p.OwnerKind != st.ownerKind) {
		st.ownerKind, st.ownerName = strings.Clone(p.OwnerKind), strings.Clone(p.OwnerName)
	}
	if p.RequestMilli > 0 && st.requests[p.Container] != p.RequestMilli {
		if st.requests == nil {
			st.requests = make(map[string]int64, 1)
		}
		st.requests[strings.Clone(p.Container)] = p.RequestMilli
		a.podsVer++
	}
}

// Prime takes a sample from before the first hour to emit, only to restore
// what a continuous run would know at that point: the device's last sample
// time and energy counter. It books nothing. A backfill resumed at a
// checkpoint primes with the last minutes before it, so that its ledger is
// the one an uninterrupted run would have written.
func (a *Attributor) Prime(s *Sample) {
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) || s.Field == FieldUnknown {
		return
	}
	if a.startMs != 0 && s.TimeMs >= a.startMs {
		return
	}
	inst := a.instance(s)
	if inst == nil || s.TimeMs < inst.lastMs {
		return
	}
	inst.lastMs = s.TimeMs
	if s.Field == FieldTotalEnergy {
		inst.lastEnergy, inst.hasLastEnergy = s.Value, true
	}
}

// Add takes one sample. Samples of one device must come in time order; one
// older than the device's last, a field repeated for the same pod, a value
// that is NaN or infinite, or one for an hour already emitted is rejected
// and counted.
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
			if !inst.addHolderField(s) {
				a.reject(ReasonDuplicate)
				return
			}
			inst.set(a, s)
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
	if inst.lastMs != 0 && s.TimeMs-inst.lastMs > a.opts.StalenessMs {
		// The counter's increase over an unobserved gap belongs to no one we
		// saw: start afresh.
		inst.hasLastEnergy = false
	}
	inst.pending, inst.t, inst.fields, inst.extra = true, s.TimeMs, 0, inst.extra[:0]
	inst.energyDelta = -1
	inst.holders = inst.holders[:0]
	inst.addHolderField(s)
	inst.set(a, s)
	a.stats.Accepted++
}

// addHolderField records that s's pod reported s's field in the pending
// scrape; false when it already had.
func (in *instance) addHolderField(s *Sample) bool {
	bit := uint8(1) << s.Field
	if s.Pod == "" {
		// A free device reports empty pod labels; a shared one reports each
		// holder instead. Either way the free series adds no holder.
		if len(in.holders) == 0 {
			if in.fields&bit != 0 {
				return false
			}
			in.fields |= bit
		}
		return true
	}
	for i := range in.holders {
		h := &in.holders[i]
		if h.namespace == s.Namespace && h.pod == s.Pod {
			f := &in.fields
			if i > 0 {
				f = &in.extra[i-1]
			}
			if *f&bit != 0 {
				return false
			}
			*f |= bit
			return true
		}
	}
	h := in.holderFor(s)
	if len(in.holders) == 0 {
		in.fields = bit
	} else {
		in.extra = append(in.extra, bit)
	}
	in.holders = append(in.holders, h)
	return true
}

// holderFor returns s's holder, reusing the strings of the last scrape's
// holders when they match, so that a steady holder costs no allocation.
func (in *instance) holderFor(s *Sample) holder {
	for _, old := range in.prev {
		if old.namespace == s.Namespace && old.pod == s.Pod && old.queue == s.Queue {
			return old
		}
	}
	return holder{strings.Clone(s.Namespace), strings.Clone(s.Pod), strings.Clone(s.Queue)}
}

// set records a field's value. DCGM reports the same device value to every
// pod of a shared GPU, so a value is taken once per scrape.
func (in *instance) set(a *Attributor, s *Sample) {
	switch s.Field {
	case FieldGREngineActive:
		in.gr = s.Value
	case FieldGPUUtil:
		in.util = s.Value
	case FieldPowerUsage:
		in.power = s.Value
	case FieldTotalEnergy:
		if in.energyDelta >= 0 {
			return // already taken from another pod's series
		}
		if in.hasLastEnergy {
			d := s.Value - in.lastEnergy
			if d < 0 {
				// The counter restarted (driver reload, node reboot):
				// what it shows now accrued since.
				d = s.Value
				a.stats.CounterResets++
			}
			in.energyDelta = d
		}
		in.lastEnergy, in.hasLastEnergy = s.Value, true
	}
}

func (in *instance) has(f Field) bool {
	all := in.fields
	for _, e := range in.extra {
		all |= e
	}
	return all&(1<<f) != 0
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
	case in.has(FieldGREngineActive):
		act = in.gr
	case in.has(FieldGPUUtil):
		act = in.util / 100
	}
	return min(max(act, 0), 1)
}

// shareNums returns each holder's share of the device in ShareUnits; they
// sum to ShareUnits, or less on a GPU split by request whose replicas were
// not all requested (the rest is unallocated).
func (a *Attributor) shareNums(in *instance) []int64 {
	if len(in.holders) == 1 && in.u.replicas == 1 {
		in.shares = append(in.shares[:0], ShareUnits)
		return in.shares
	}
	if in.shareVer == a.podsVer && sameHolders(in.shareFor, in.holders) {
		return in.shares
	}
	in.shareFor = append(in.shareFor[:0], in.holders...)
	in.shareVer = a.podsVer
	weights := make([]int64, len(in.holders), len(in.holders)+1)
	byRequest := in.u.gpu.SplitByRequest && in.u.replicas > 1
	if byRequest {
		capacity := in.u.replicas * 1000
		var sum int64
		for i, h := range in.holders {
			r := int64(0)
			if st := a.pods[podKey{h.namespace, h.pod}]; st != nil {
				r = st.requestMilli()
			}
			if r <= 0 {
				r = 1000 // one replica when the request is unknown
			}
			weights[i] = r
			sum += r
		}
		if sum < capacity {
			weights = append(weights, capacity-sum) // unrequested replicas
		}
	} else {
		for i := range weights {
			weights[i] = 1
		}
	}
	in.shares = splitLargestRemainder(ShareUnits, weights, in.shares)[:len(in.holders)]
	return in.shares
}

func sameHolders(a, b []holder) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// finalize books the pending observation for covMs milliseconds: time and
// energy to its holders by share, energy of a free device to nobody.
func (a *Attributor) finalize(in *instance, covMs int64) {
	in.pending = false
	in.lastMs = in.t
	in.prev = append(in.prev[:0], in.holders...)
	// Energy of the observation, in mJ, for this instance's compute share
	// of the GPU: the counter's increase where known (it is booked with the
	// scrape that reports it), else power × time.
	var energy float64
	switch {
	case in.energyDelta >= 0:
		energy = in.energyDelta
	case in.has(FieldPowerUsage) && in.power > 0:
		energy = in.power * float64(covMs)
	}
	energyMJ := int64(math.Round(energy * float64(in.size) / float64(in.u.slices)))
	var shares []int64
	if len(in.holders) > 0 {
		shares = a.shareNums(in)
	}
	act := in.activity()
	start, end := in.t, in.t+covMs
	bookedMJ := int64(0)
	for start < end {
		h := floorHour(start)
		pieceEnd := min(end, h+hourMs)
		ms := pieceEnd - start
		// The energy of the observation goes to its hour pieces by time;
		// the last piece takes what rounding left.
		pieceMJ := energyMJ * ms / covMs
		if pieceEnd == end {
			pieceMJ = energyMJ - bookedMJ
		}
		bookedMJ += pieceMJ
		if h >= a.emittedUntilMs {
			a.book(h, in, shares, ms, act, pieceMJ)
		}
		start = pieceEnd
	}
}

func (a *Attributor) book(hour int64, in *instance, shares []int64, ms int64, act float64, energyMJ int64) {
	if len(in.holders) == 0 {
		a.usage(hour, in.u.idx, holder{}).energyMJ += energyMJ
		return
	}
	var given int64
	for i, h := range in.holders {
		u := a.usage(hour, in.u.idx, h)
		w := ms * in.size * shares[i]
		u.heldW += w
		u.activeW += int64(math.Round(float64(w) * act))
		e := energyMJ * shares[i] / ShareUnits
		u.energyMJ += e
		given += e
	}
	// Rounding and unrequested replicas leave some energy to nobody.
	a.usage(hour, in.u.idx, holder{}).energyMJ += energyMJ - given
}

func (a *Attributor) usage(hour int64, unitIdx int, h holder) *usage {
	perUnit := a.hours[hour]
	if perUnit == nil {
		perUnit = make([]map[holder]*usage, len(a.units))
		a.hours[hour] = perUnit
	}
	m := perUnit[unitIdx]
	if m == nil {
		m = make(map[holder]*usage, 2)
		perUnit[unitIdx] = m
	}
	u := m[h]
	if u == nil {
		u = &usage{}
		m[h] = u
	}
	return u
}

func floorHour(ms int64) int64 {
	h := ms / hourMs * hourMs
	if h > ms {
		h -= hourMs
	}
	return h
}
