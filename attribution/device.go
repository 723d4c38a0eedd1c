package attribution

// A device's state: its latest fields, the holders it is shared by and
// its activity, from the samples of one observation.

import (
	"math"
	"sort"
	"strings"

	"github.com/gpuledger/gpuledger/ledger"
)

// holderFor returns s's holder, reusing the strings of the last scrape's
// holders when they match, so that a steady holder costs no allocation.
func (in *instance) holderFor(s *Sample) holder {
	job := ""
	if s.ExporterPod == "" {
		job = s.Job
	}
	for _, old := range in.prev {
		if old.namespace == s.Namespace && old.pod == s.Pod && old.queue == s.Queue && old.dra == s.DRA && old.job == job {
			return old
		}
	}
	return holder{strings.Clone(s.Namespace), strings.Clone(s.Pod), strings.Clone(s.Queue), s.DRA, strings.Clone(job)}
}

// set records a field's value. DCGM reports the same device value to every
// pod of a shared GPU, so a value is taken once per scrape: the largest.
func (in *instance) set(s *Sample) {
	v := max(s.Value, 0)
	switch s.Field {
	case FieldGREngineActive:
		in.gr = max(in.gr, v)
	case FieldGPUUtil:
		in.util = max(in.util, v)
	case FieldPowerUsage:
		in.power = max(in.power, v)
	case FieldTotalEnergy:
		in.counter = max(in.counter, v)
	}
}

// close ends the collection of the pending scrape, at its first booking:
// the holders go in a stable order (shares and rounding follow it) and the
// energy counter's increase is taken.
func (in *instance) close(a *Attributor) {
	if in.closed {
		return
	}
	in.closed = true
	if len(in.holders) > 1 {
		type hf struct {
			h holder
			f uint8
		}
		hs := make([]hf, len(in.holders))
		for i, h := range in.holders {
			f := in.fields
			if i > 0 {
				f = in.extra[i-1]
			}
			hs[i] = hf{h, f}
		}
		sort.Slice(hs, func(i, j int) bool { return holderLess(hs[i].h, hs[j].h) })
		for i := range hs {
			in.holders[i] = hs[i].h
			if i == 0 {
				in.fields = hs[i].f
			} else {
				in.extra[i-1] = hs[i].f
			}
		}
	}
	if !in.has(FieldTotalEnergy) {
		return
	}
	if in.hasLastEnergy {
		d := in.counter - in.lastEnergy
		if d < 0 {
			// The counter restarted (driver reload, node reboot): what it
			// shows now accrued since.
			d = in.counter
			if !a.priming {
				a.stats.CounterResets++
			}
		}
		in.energyDelta = d
	}
	in.lastEnergy, in.hasLastEnergy = in.counter, true
}

func (in *instance) has(f Field) bool {
	all := in.fields
	for _, e := range in.extra {
		all |= e
	}
	return all&(1<<f) != 0
}

// instance returns s's device, binding a MIG slot to s's GPU_I_ID on first
// sight; nil (counted) for a device not in the inventory.
func (a *Attributor) instance(s *Sample, prime bool) *instance {
	slot := &a.instMemo[instMemoSlot(s)]
	if in := *slot; in != nil && in.u.gpu.Node == s.Node && in.u.gpu.Index == s.GPU && in.profile == s.Profile && in.boundID == s.Instance {
		return in
	}
	k := instanceKey{s.Node, s.GPU, s.Profile, s.Instance}
	if in := a.bound[k]; in != nil {
		*slot = in
		return in
	}
	u := a.byGPU[gpuKey{s.Node, s.GPU}]
	if u == nil {
		a.rejectUnlessPrime(ReasonUnknownGPU, prime)
		return nil
	}
	var in *instance
	for _, slot := range u.profiles[s.Profile] {
		if slot.boundID == "" {
			in = slot
			break
		}
	}
	if in == nil || s.Profile == "" {
		a.rejectUnlessPrime(ReasonUnknownInstance, prime)
		return nil
	}
	in.boundID = strings.Clone(s.Instance)
	k = instanceKey{strings.Clone(s.Node), strings.Clone(s.GPU), strings.Clone(s.Profile), in.boundID}
	a.bound[k] = in
	*slot = in
	return in
}

// instMemoSize is the number of slots of the instance memo.
const instMemoSize = 1024

// instMemoSlot is a sample's slot in the instance memo: a few bytes of
// its device's names, cheaper than hashing them whole. A slot holds the
// instance last found for a sample that fell in it; bound never changes a
// key's instance, and the instance's own names are the key, so a slot is
// checked against them and a miss is only a lookup in bound.
func instMemoSlot(s *Sample) int {
	h := uint(len(s.Node))*31 + uint(len(s.Profile))
	for _, v := range [...]string{s.Node, s.GPU, s.Instance} {
		if n := len(v); n > 0 {
			h = h*131 + uint(v[n-1])
			if n > 1 {
				h = h*131 + uint(v[n-2])
			}
		}
	}
	return int(h % instMemoSize)
}

// activity returns the device's busy fraction for the pending observation:
// GR engine activity where reported (always on MIG instances), else
// GPU_UTIL/100; ok is false when neither was reported, and the holders'
// time is then unmeasured.
func (in *instance) activity() (act float64, ok bool) {
	switch {
	case in.has(FieldGREngineActive):
		act = in.gr
	case in.has(FieldGPUUtil):
		act = in.util / 100
	default:
		return 0, false
	}
	return min(max(act, 0), 1), true
}

// shareNums returns each holder's share of the device in ShareUnits; they
// sum to ShareUnits, or less on a GPU split by request whose replicas were
// not all requested (the rest is unallocated). Requests are those in
// effect at the observation's time.
func (a *Attributor) shareNums(in *instance) []int64 {
	if len(in.holders) == 1 && in.u.replicas == 1 {
		in.shares = append(in.shares[:0], ShareUnits)
		return in.shares
	}
	if in.shareVer == a.podsVer && in.t < in.shareUntil && sameHolders(in.shareFor, in.holders) {
		return in.shares
	}
	in.shareFor = append(in.shareFor[:0], in.holders...)
	in.shareVer = a.podsVer
	in.shareUntil = math.MaxInt64
	weights := make([]int64, len(in.holders), len(in.holders)+1)
	byRequest := in.u.gpu.SplitByRequest && in.u.replicas > 1
	if byRequest {
		capacity := in.u.replicas * 1000
		var sum int64
		for i, h := range in.holders {
			r := int64(0)
			if st := a.pods[podKey{h.namespace, h.pod}]; st != nil {
				var until int64
				r, until = st.requestMilli(KindGPU, in.t)
				in.shareUntil = min(in.shareUntil, until)
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
	in.shares = ledger.SplitLargestRemainder(ShareUnits, weights, in.shares)[:len(in.holders)]
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

// observationMJ is the energy of the pending observation, in mJ, for the
// instance's compute share of the GPU, were it to last covMs: the counter's
// increase where known (booked with the scrape that reports it), else
// power × time.
func (in *instance) observationMJ(covMs int64) int64 {
	var energy float64
	switch {
	case in.energyDelta >= 0:
		energy = in.energyDelta
	case in.has(FieldPowerUsage) && in.power > 0:
		energy = in.power * float64(covMs)
	}
	return int64(math.Round(energy * float64(in.size) / float64(in.u.slices)))
}
