package attribution

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gpuledger/gpuledger/ledger"
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
	// StalenessMs is the longest gap between two samples of a device (or two
	// phase reports of a pod) that is still bridged: a sample counts until
	// the next one if that comes within StalenessMs, else for
	// ScrapeIntervalMs only and the rest of the gap is unobserved. Default 5
	// minutes.
	StalenessMs int64
	// StartMs is the first hour to emit rows for, in Unix milliseconds. Zero
	// means the hour of the first accepted sample.
	StartMs int64
	// CloseAfterMs is how far past an hour's end a sample must be to close
	// the hour. Default, and at least, StalenessMs: by then every
	// observation that could extend into the hour has been followed by a
	// later one. A live pipeline waits longer, for late requests.
	CloseAfterMs int64
	// PodRetentionMs is how long a pod that kube-state-metrics stopped
	// reporting is remembered (its queue, owner and requests). Default 1 h.
	PodRetentionMs int64
	// MaxPods bounds the pods remembered: a new pod past it makes room by
	// forgetting a sixteenth of them, those with no GPU request and the
	// least recently reported first (Stats.PodsForgotten). Default
	// 500,000; serve sets it from -ingest.memoryLimit (PodBytes each).
	MaxPods int
	// MaxHolders bounds the pods one device may report in one scrape; a
	// device-hour keeps at most 16 × MaxHolders. Default 64.
	MaxHolders int
	// Lines keeps each emitted hour's lines (ledger.Line: per GPU and
	// holder, the rows' explanation) for Lines to take; off, none are
	// kept.
	Lines bool
}

func (o Options) withDefaults() Options {
	if o.ScrapeIntervalMs <= 0 {
		o.ScrapeIntervalMs = 15_000
	}
	if o.StalenessMs <= 0 {
		o.StalenessMs = 300_000
	}
	if o.CloseAfterMs < o.StalenessMs {
		o.CloseAfterMs = o.StalenessMs
	}
	if o.PodRetentionMs <= 0 {
		o.PodRetentionMs = hourMs
	}
	if o.MaxPods <= 0 {
		o.MaxPods = 500_000
	}
	if o.MaxHolders <= 0 {
		o.MaxHolders = 64
	}
	return o
}

// PrimeWindowMs is how much telemetry before StartMs a run resumed there
// must Prime with to continue exactly as an uninterrupted run would: the
// pods it remembers and the observations open at StartMs.
func (o Options) PrimeWindowMs() int64 {
	o = o.withDefaults()
	return o.PodRetentionMs + 2*o.StalenessMs
}

// SettleDelayMs is how long after an hour ends its data can still change
// it: the next sample of a device that reported just before the end may
// come up to StalenessMs later. An Attributor fed in time order closes an
// hour by itself once a sample past that arrives.
func (o Options) SettleDelayMs() int64 {
	return o.withDefaults().StalenessMs
}

// Attributor turns samples into hourly ledger rows for one cluster.
//
// Who held a device comes from two facts: the pod dcgm-exporter reports on
// the device's series, and what kube-state-metrics reports of pods (Running
// on a node, with GPU requests). Time a running pod's requests cover that
// DCGM does not show it on any device of its node (an exporter restart, a
// dropped device, a device plugin that stopped reporting pods) is charged
// to the pod on the node's devices DCGM shows unheld, as unmeasured: the pod
// pays, and the ledger says how much of its bill no telemetry measured.
//
// Feed it samples and pod facts in time order (each device's samples in
// order; samples of one instant in any order). An hour closes by itself once
// a sample more than Options.StalenessMs past its end arrives, so the rows
// depend only on the data, not on how it was cut into requests or chunks;
// Ready returns the closed hours' rows. Emit closes hours whatever the data
// (the end of a finite stream, or a settled hour of a live one). An
// Attributor is not safe for concurrent use.
type Attributor struct {
	model *Model
	opts  Options

	units []unit
	insts []*instance
	byGPU map[gpuKey]*unit
	bound map[instanceKey]*instance
	// instMemo remembers bound's answers by a cheap hash of the sample's
	// names (instance).
	instMemo  [instMemoSize]*instance
	nodes     map[string]*node
	pods      map[podKey]*podState
	podsVer   uint64
	exporters map[podKey]*exporterSeen
	// relabelJobs are the scrape jobs whose series named the exporter
	// apart from the holder (honorLabels false), and since when.
	relabelJobs map[string]int64
	// requestsFromMs is the earliest time a GPU request was reported (0:
	// never): from then on, a pod known to kube-state-metrics without GPU
	// requests is not a holder.
	requestsFromMs int64
	hours          map[int64]*hourState
	kindBuf        []request // scratch for bookAlloc
	// keyBuf is scratch for the queue and endpoint maps' keys: a lookup
	// m[string(keyBuf)] does not allocate; a key stored is copied.
	keyBuf []byte

	// priming is set while Prime or PrimePod runs: nothing is counted.
	priming bool

	startMs        int64
	emittedUntilMs int64
	maxMs          int64
	outRows        []ledger.Row
	outWls         []ledger.WorkloadRow
	outLines       []ledger.Line
	// queues is the queues' hours (queue.go).
	queues queueBook
	stats  Stats
}

// Stats counts what an Attributor did with its input.
type Stats struct {
	Accepted uint64
	Rejected map[Reason]uint64
	// CounterResets counts energy counters seen going down: the sample is
	// used, its value counted from zero.
	CounterResets uint64
	// UnplacedMs is device-milliseconds (× the request, for several
	// devices) that kube-state-metrics allocated to running pods but that
	// found no unheld device of their kind on the node: more allocated than
	// the node has, as reported.
	UnplacedMs int64
	// PodsForgotten counts pods forgotten to keep at most MaxPods.
	PodsForgotten uint64
}

// PodBytes is about what a pod remembered costs (its names, its queue,
// owner, node and request histories, its map entry): what MaxPods is
// worked out from where memory is the bound.
const PodBytes = 1024

type gpuKey struct{ node, index string }

type instanceKey struct{ node, gpu, profile, instance string }

// holder is a pod holding a device; the zero holder is nobody.
type holder struct {
	namespace, pod, queue string
	dra                   bool
	// job is the scrape job of a series that named the pod with no
	// exported_* labels: when that job renames holders to exported_*
	// (relabelledJob), the pod is the exporter's own and the device free.
	// Judged when the time is booked, as notHolder judges, so that the
	// order of one instant's series does not matter.
	job string
}

type unit struct {
	idx      int
	gpu      *GPU
	slices   int64 // compute slices: 7 for a MIG GPU (4 on an A30), 1 otherwise
	replicas int64 // advertised replicas of a shared GPU; 1 when exclusive
	insts    []*instance
	// profiles lists a MIG GPU's slots per profile, in layout order.
	profiles map[string][]*instance
}

// node groups the devices of one node for the gap fill: which devices
// serve requests of each kind.
type node struct {
	name  string
	units []*unit
	// pools lists, per request kind, the devices that serve it, in order.
	pools map[string][]*instance
}

// instance is one device: a whole GPU, or one MIG slot of a GPU's layout.
// A MIG slot is bound to the first GPU_I_ID of its profile seen.
type instance struct {
	idx     int
	u       *unit
	size    int64 // compute slices (1 for a whole GPU)
	profile string
	kind    string // the request kind it serves: KindGPU or MIGKind(profile)
	boundID string

	lastMs int64 // time of the last finalized observation
	// The energy counter's last value, in mJ, and whether there is one.
	lastEnergy    float64
	hasLastEnergy bool

	// The observation being collected: every series of one scrape of the
	// device shares its timestamp. A shared GPU is reported once per pod.
	pending bool
	t       int64
	holders []holder
	fields  uint8   // fields seen for the first holder's series
	extra   []uint8 // fields seen for each further holder's series
	// Values of the scrape: DCGM reports one device value on every pod's
	// series, so the largest is taken, whatever order they came in.
	gr, util, power float64
	counter         float64 // the energy counter, mJ
	// closed is set once the scrape's series are all in (its first
	// booking): holders are put in order and energyDelta is known.
	closed      bool
	energyDelta float64 // mJ since the previous counter value; <0 unknown
	// A forced close (Emit) books the open observation up to the hour's
	// end and keeps it open: bookedUntil and bookedMJ say how far and how
	// much energy, so the rest is booked when the next sample says how long
	// it lasted.
	bookedUntil int64
	bookedMJ    int64

	// prev holds the last finalized observation's holders.
	prev []holder
	// Shares of the holders, cached until the holders or the pods change,
	// or a request recorded for a later time takes effect.
	shareFor   []holder
	shareVer   uint64
	shareUntil int64
	shares     []int64
}

// hourState is what is booked to one open hour.
type hourState struct {
	inst []instHour // by instance index
	// alloc is kube-state-metrics' allocation: ms × request (milli) per
	// node, pod and kind.
	alloc map[allocKey]int64
}

type allocKey struct{ node, namespace, pod, kind string }

// instHour is one device's hour.
type instHour struct {
	coveredMs int64 // time some observation covered, held or not
	nobodyMJ  int64 // energy booked to no holder
	parts     []usage
}

type usage struct {
	h holder
	// Weights in ms × compute slices × share units: time held, the part of
	// it busy, and the part whose activity no telemetry measured.
	heldW, activeW, unmeasuredW int64
	energyMJ                    int64
}

// New returns an Attributor for model, after checking that the model is
// consistent: each GPU once, rates not negative, MIG layouts that fit.
func New(model *Model, opts Options) (*Attributor, error) {
	opts = opts.withDefaults()
	a := &Attributor{
		model:       model,
		opts:        opts,
		units:       make([]unit, len(model.GPUs)),
		byGPU:       make(map[gpuKey]*unit, len(model.GPUs)),
		bound:       make(map[instanceKey]*instance, len(model.GPUs)),
		nodes:       make(map[string]*node),
		pods:        make(map[podKey]*podState),
		exporters:   make(map[podKey]*exporterSeen),
		relabelJobs: make(map[string]int64),
		hours:       make(map[int64]*hourState),
		stats:       Stats{Rejected: make(map[Reason]uint64)},
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
		n := a.nodes[g.Node]
		if n == nil {
			n = &node{name: g.Node, pools: make(map[string][]*instance)}
			a.nodes[g.Node] = n
		}
		n.units = append(n.units, u)
		if len(g.MIG) == 0 {
			in := a.newInstance(u, 1, "")
			a.bound[instanceKey{node: g.Node, gpu: g.Index}] = in
			continue
		}
		u.slices = int64(MIGComputeSlices(g.Model))
		u.profiles = make(map[string][]*instance)
		var used int64
		for _, p := range g.MIG {
			mp, err := ParseMIGProfile(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("gpu %s/%s: %w", g.Node, g.Index, err))
				continue
			}
			u.profiles[p] = append(u.profiles[p], a.newInstance(u, int64(mp.ComputeSlices), p))
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
	// Pools: whole GPUs serve nvidia.com/gpu; a MIG slot serves its
	// profile's resource, and nvidia.com/gpu on a node with no whole GPU
	// (the device plugin's single MIG strategy).
	for _, n := range a.nodes {
		var mig []*instance
		for _, u := range n.units {
			for _, in := range u.insts {
				n.pools[in.kind] = append(n.pools[in.kind], in)
				if in.profile != "" {
					mig = append(mig, in)
				}
			}
		}
		if len(n.pools[KindGPU]) == 0 {
			n.pools[KindGPU] = mig
		}
	}
	return a, nil
}

func (a *Attributor) newInstance(u *unit, size int64, profile string) *instance {
	in := &instance{idx: len(a.insts), u: u, size: size, profile: profile, kind: KindGPU}
	if profile != "" {
		in.kind = MIGKind(profile)
	}
	a.insts = append(a.insts, in)
	u.insts = append(u.insts, in)
	return in
}

// Stats returns a copy of the counters.
func (a *Attributor) Stats() Stats {
	s := a.stats
	s.Rejected = make(map[Reason]uint64, len(a.stats.Rejected))
	for k, v := range a.stats.Rejected {
		s.Rejected[k] = v
	}
	return s
}

// Rejections returns how many samples have been rejected for r.
func (a *Attributor) Rejections(r Reason) uint64 { return a.stats.Rejected[r] }

// Pods returns how many pods the Attributor remembers.
func (a *Attributor) Pods() int { return len(a.pods) }

// EmittedUntil returns the end of the hours closed so far, in Unix
// milliseconds; zero before the first sample.
func (a *Attributor) EmittedUntil() int64 { return a.emittedUntilMs }

func (a *Attributor) reject(r Reason) { a.stats.Rejected[r]++ }

// Add takes one sample. Samples of one device must come in time order; one
// older than the device's last, a field repeated for the same pod, a value
// that is NaN or infinite, or one for an hour already closed is rejected
// and counted. A sample more than StalenessMs past the end of the oldest
// open hour closes that hour first.
func (a *Attributor) Add(s *Sample) { a.add(s, false) }

// Prime takes a sample from before the first hour to emit, only to restore
// what a continuous run would know at that point: the device's open
// observation, its last sample time and energy counter. It books nothing
// before StartMs and closes no hour. A run resumed at a checkpoint primes
// with the PrimeWindowMs before it, so that its ledger is the one an
// uninterrupted run would have written.
func (a *Attributor) Prime(s *Sample) { a.add(s, true) }

func (a *Attributor) add(s *Sample, prime bool) {
	a.priming = prime
	defer func() { a.priming = false }()
	if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) || s.Field == FieldUnknown {
		if !prime {
			a.reject(ReasonBadValue)
		}
		return
	}
	if !prime {
		a.advance(s.TimeMs)
	}
	if s.ExporterPod != "" {
		a.learnExporter(s)
	}
	inst := a.instance(s, prime)
	if inst == nil {
		return
	}
	if inst.pending {
		switch {
		case s.TimeMs < inst.t:
			a.rejectUnlessPrime(ReasonOutOfOrder, prime)
			return
		case s.TimeMs == inst.t:
			if !a.addHolderField(inst, s, prime) {
				return
			}
			inst.set(s)
			a.acceptUnlessPrime(prime)
			return
		}
		a.finalize(inst, a.coverage(inst.t, s.TimeMs))
	}
	if s.TimeMs <= inst.lastMs {
		if s.TimeMs == inst.lastMs {
			a.rejectUnlessPrime(ReasonDuplicate, prime)
		} else {
			a.rejectUnlessPrime(ReasonOutOfOrder, prime)
		}
		return
	}
	if a.startMs == 0 {
		a.startMs = floorHour(s.TimeMs)
		a.emittedUntilMs = a.startMs
	}
	if !prime && s.TimeMs < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	if inst.lastMs != 0 && s.TimeMs-inst.lastMs > a.opts.StalenessMs {
		// The counter's increase over an unobserved gap belongs to no one we
		// saw: start afresh.
		inst.hasLastEnergy = false
	}
	inst.pending, inst.t, inst.fields, inst.extra = true, s.TimeMs, 0, inst.extra[:0]
	inst.gr, inst.util, inst.power, inst.counter = 0, 0, 0, 0
	inst.closed, inst.energyDelta = false, -1
	inst.bookedUntil, inst.bookedMJ = 0, 0
	inst.holders = inst.holders[:0]
	a.addHolderField(inst, s, prime)
	inst.set(s)
	a.acceptUnlessPrime(prime)
}

func (a *Attributor) rejectUnlessPrime(r Reason, prime bool) {
	if !prime {
		a.reject(r)
	}
}

func (a *Attributor) acceptUnlessPrime(prime bool) {
	if !prime {
		a.stats.Accepted++
	}
}

// coverage is how long an observation at t counts when the next one of the
// same device or pod is at next: until then if within the staleness bound,
// else one scrape interval.
func (a *Attributor) coverage(t, next int64) int64 {
	if gap := next - t; gap <= a.opts.StalenessMs {
		return gap
	}
	return a.opts.ScrapeIntervalMs
}

// advance moves the watermark to t and closes every hour whose data is
// complete: one that ended more than CloseAfterMs (at least StalenessMs)
// before t, since every observation that could still extend into it has
// been followed by a later sample by then, or never will be within the
// staleness bound.
func (a *Attributor) advance(t int64) {
	if t > a.maxMs {
		a.maxMs = t
	}
	if a.startMs == 0 {
		return
	}
	for a.emittedUntilMs+hourMs+a.opts.CloseAfterMs < t {
		a.emitHour(a.emittedUntilMs, false)
	}
}

// addHolderField records that s's pod reported s's field in the pending
// scrape; false (counted) when it already had, or the device reports too
// many pods at once.
func (a *Attributor) addHolderField(in *instance, s *Sample, prime bool) bool {
	bit := uint8(1) << s.Field
	if s.Pod == "" {
		// A free device reports empty pod labels; a shared one reports each
		// holder instead. Either way the free series adds no holder.
		if len(in.holders) == 0 {
			if in.fields&bit != 0 {
				a.rejectUnlessPrime(ReasonDuplicate, prime)
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
				a.rejectUnlessPrime(ReasonDuplicate, prime)
				return false
			}
			*f |= bit
			return true
		}
	}
	if len(in.holders) >= a.opts.MaxHolders {
		a.rejectUnlessPrime(ReasonTooManyHolders, prime)
		return false
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
