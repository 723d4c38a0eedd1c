package attribution

import (
	"bytes"
	"cmp"
	"encoding/gob"
	"fmt"
	"maps"
	"slices"

	"github.com/gpuledger/gpuledger/ledger"
)

// stateVersion is the version of the snapshot encoding.
const stateVersion = 1

// Snapshot encodes everything the Attributor knows, so that Restore makes
// an Attributor that goes on exactly as this one would: open observations,
// open hours, pods, rows not yet taken, counters. It is what a live
// pipeline saves so that a restart loses nothing and changes nothing.
func (a *Attributor) Snapshot() ([]byte, error) {
	st := state{Version: stateVersion, StartMs: a.startMs, EmittedUntilMs: a.emittedUntilMs, MaxMs: a.maxMs,
		RequestsFromMs: a.requestsFromMs, OutRows: a.outRows, OutWls: a.outWls, OutLines: a.outLines, Queues: a.queues,
		Accepted: a.stats.Accepted, Rejected: a.stats.Rejected, CounterResets: a.stats.CounterResets, UnplacedMs: a.stats.UnplacedMs,
		PodsForgotten: a.stats.PodsForgotten}
	for _, in := range a.insts {
		st.Insts = append(st.Insts, instState{
			ID: a.instID(in), Profile: in.profile, BoundID: in.boundID,
			LastMs: in.lastMs, LastEnergy: in.lastEnergy, HasLastEnergy: in.hasLastEnergy,
			Pending: in.pending, T: in.t, Holders: toHolderStates(in.holders), Fields: in.fields, Extra: slices.Clone(in.extra),
			GR: in.gr, Util: in.util, Power: in.power, Counter: in.counter, Closed: in.closed, EnergyDelta: in.energyDelta,
			BookedUntil: in.bookedUntil, BookedMJ: in.bookedMJ, Prev: toHolderStates(in.prev),
		})
	}
	for _, k := range slices.SortedFunc(maps.Keys(a.pods), comparePodKeys) {
		p := a.pods[k]
		ps := podStateS{Namespace: k.namespace, Pod: k.pod, KSMMs: p.ksmMs, LastMs: p.lastMs,
			Obs: podObsS{Pending: p.obs.pending, T: p.obs.t, Running: p.obs.running, LastMs: p.obs.lastMs, BookedUntil: p.obs.bookedUntil}}
		for _, e := range p.queue {
			ps.Queue = append(ps.Queue, timedS{Ms: e.ms, V: e.v})
		}
		for _, e := range p.node {
			ps.Node = append(ps.Node, timedS{Ms: e.ms, V: e.v})
		}
		for _, e := range p.owner {
			ps.Owner = append(ps.Owner, timedOwnerS{Ms: e.ms, Kind: e.v.kind, Name: e.v.name})
		}
		for _, c := range slices.Sorted(maps.Keys(p.requests)) {
			rs := containerS{Container: c}
			for _, e := range *p.requests[c] {
				rs.History = append(rs.History, timedRequestS{Ms: e.ms, Kind: e.v.kind, Milli: e.v.milli})
			}
			ps.Requests = append(ps.Requests, rs)
		}
		st.Pods = append(st.Pods, ps)
	}
	for _, k := range slices.SortedFunc(maps.Keys(a.exporters), comparePodKeys) {
		e := a.exporters[k]
		st.Exporters = append(st.Exporters, exporterS{Namespace: k.namespace, Pod: k.pod, FirstMs: e.firstMs, LastMs: e.lastMs})
	}
	st.RelabelJobs = maps.Clone(a.relabelJobs)
	for _, h := range slices.Sorted(maps.Keys(a.hours)) {
		hs := a.hours[h]
		hst := hourS{Hour: h}
		for i := range hs.inst {
			ih := &hs.inst[i]
			if ih.coveredMs == 0 && ih.nobodyMJ == 0 && len(ih.parts) == 0 {
				continue
			}
			is := instHourS{Inst: i, CoveredMs: ih.coveredMs, NobodyMJ: ih.nobodyMJ}
			for _, u := range ih.parts {
				is.Parts = append(is.Parts, usageS{Holder: toHolderState(u.h), HeldW: u.heldW, ActiveW: u.activeW,
					UnmeasuredW: u.unmeasuredW, EnergyMJ: u.energyMJ})
			}
			hst.Insts = append(hst.Insts, is)
		}
		for k, v := range hs.alloc {
			hst.Alloc = append(hst.Alloc, allocS{Node: k.node, Namespace: k.namespace, Pod: k.pod, Kind: k.kind, Amount: v})
		}
		slices.SortFunc(hst.Alloc, func(x, y allocS) int {
			return cmp.Or(cmp.Compare(x.Node, y.Node), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Pod, y.Pod), cmp.Compare(x.Kind, y.Kind))
		})
		st.Hours = append(st.Hours, hst)
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&st); err != nil {
		return nil, fmt.Errorf("encode attribution state: %w", err)
	}
	return b.Bytes(), nil
}

// RestoreReport says what of a snapshot did not fit the model it was
// restored into: devices no longer in the inventory (or whose MIG layout
// changed), with what was booked to them.
type RestoreReport struct {
	DroppedDevices []string
}

// Restore returns an Attributor for model and opts in the state a Snapshot
// encoded. Devices are matched by node, GPU and slot; a device the model no
// longer has (or whose MIG layout changed) is dropped with what was booked
// to it, and listed in the report. opts.StartMs is ignored: the state has
// its own.
func Restore(model *Model, opts Options, snapshot []byte) (*Attributor, RestoreReport, error) {
	var rep RestoreReport
	var st state
	if err := gob.NewDecoder(bytes.NewReader(snapshot)).Decode(&st); err != nil {
		return nil, rep, fmt.Errorf("decode attribution state: %w", err)
	}
	if st.Version != stateVersion {
		return nil, rep, fmt.Errorf("attribution state version %d; this binary reads %d", st.Version, stateVersion)
	}
	opts.StartMs = 0
	a, err := New(model, opts)
	if err != nil {
		return nil, rep, err
	}
	a.startMs, a.emittedUntilMs, a.maxMs, a.requestsFromMs = st.StartMs, st.EmittedUntilMs, st.MaxMs, st.RequestsFromMs
	a.outRows, a.outWls, a.outLines, a.queues = st.OutRows, st.OutWls, st.OutLines, st.Queues
	a.stats = Stats{Accepted: st.Accepted, Rejected: st.Rejected, CounterResets: st.CounterResets, UnplacedMs: st.UnplacedMs, PodsForgotten: st.PodsForgotten}
	if a.stats.Rejected == nil {
		a.stats.Rejected = make(map[Reason]uint64)
	}
	byID := make(map[string]*instance, len(a.insts))
	for _, in := range a.insts {
		byID[a.instID(in)] = in
	}
	// old index → restored instance
	mapped := make([]*instance, len(st.Insts))
	for i, s := range st.Insts {
		in := byID[s.ID]
		if in == nil || in.profile != s.Profile {
			rep.DroppedDevices = append(rep.DroppedDevices, s.ID)
			continue
		}
		mapped[i] = in
		in.boundID = s.BoundID
		if s.BoundID != "" {
			u := in.u
			a.bound[instanceKey{u.gpu.Node, u.gpu.Index, in.profile, in.boundID}] = in
		}
		in.lastMs, in.lastEnergy, in.hasLastEnergy = s.LastMs, s.LastEnergy, s.HasLastEnergy
		in.pending, in.t, in.holders, in.fields, in.extra = s.Pending, s.T, fromHolderStates(s.Holders), s.Fields, s.Extra
		in.gr, in.util, in.power, in.counter, in.closed, in.energyDelta = s.GR, s.Util, s.Power, s.Counter, s.Closed, s.EnergyDelta
		in.bookedUntil, in.bookedMJ, in.prev = s.BookedUntil, s.BookedMJ, fromHolderStates(s.Prev)
	}
	for _, ps := range st.Pods {
		p := &podState{key: podKey{ps.Namespace, ps.Pod}, ksmMs: ps.KSMMs, lastMs: ps.LastMs,
			obs: podObs{pending: ps.Obs.Pending, t: ps.Obs.T, running: ps.Obs.Running, lastMs: ps.Obs.LastMs, bookedUntil: ps.Obs.BookedUntil}}
		for _, e := range ps.Queue {
			p.queue = append(p.queue, timed[string]{e.Ms, e.V})
		}
		for _, e := range ps.Node {
			p.node = append(p.node, timed[string]{e.Ms, e.V})
		}
		for _, e := range ps.Owner {
			p.owner = append(p.owner, timed[owner]{e.Ms, owner{e.Kind, e.Name}})
		}
		for _, c := range ps.Requests {
			if p.requests == nil {
				p.requests = make(map[string]*history[request], len(ps.Requests))
			}
			h := &history[request]{}
			for _, e := range c.History {
				*h = append(*h, timed[request]{e.Ms, request{e.Kind, e.Milli}})
			}
			p.requests[c.Container] = h
		}
		a.pods[p.key] = p
	}
	for _, e := range st.Exporters {
		a.exporters[podKey{e.Namespace, e.Pod}] = &exporterSeen{e.FirstMs, e.LastMs}
	}
	maps.Copy(a.relabelJobs, st.RelabelJobs)
	for _, hst := range st.Hours {
		hs := a.hour(hst.Hour)
		for _, is := range hst.Insts {
			if is.Inst < 0 || is.Inst >= len(mapped) || mapped[is.Inst] == nil {
				continue
			}
			ih := &hs.inst[mapped[is.Inst].idx]
			ih.coveredMs, ih.nobodyMJ = is.CoveredMs, is.NobodyMJ
			for _, u := range is.Parts {
				ih.parts = append(ih.parts, usage{h: fromHolderState(u.Holder), heldW: u.HeldW, activeW: u.ActiveW,
					unmeasuredW: u.UnmeasuredW, energyMJ: u.EnergyMJ})
			}
		}
		for _, al := range hst.Alloc {
			if a.nodes[al.Node] == nil {
				continue
			}
			if hs.alloc == nil {
				hs.alloc = make(map[allocKey]int64)
			}
			hs.alloc[allocKey{al.Node, al.Namespace, al.Pod, al.Kind}] = al.Amount
		}
	}
	a.podsVer++
	return a, rep, nil
}

// instID names a device by node, GPU and its slot on the GPU.
func (a *Attributor) instID(in *instance) string {
	return fmt.Sprintf("%s/%s/%d", in.u.gpu.Node, in.u.gpu.Index, slices.Index(in.u.insts, in))
}

func comparePodKeys(x, y podKey) int {
	return cmp.Or(cmp.Compare(x.namespace, y.namespace), cmp.Compare(x.pod, y.pod))
}

func toHolderState(h holder) holderS {
	return holderS{Namespace: h.namespace, Pod: h.pod, Queue: h.queue, DRA: h.dra, Job: h.job}
}

func toHolderStates(hs []holder) []holderS {
	out := make([]holderS, len(hs))
	for i, h := range hs {
		out[i] = toHolderState(h)
	}
	return out
}

func fromHolderState(h holderS) holder { return holder{h.Namespace, h.Pod, h.Queue, h.DRA, h.Job} }

func fromHolderStates(hs []holderS) []holder {
	out := make([]holder, len(hs))
	for i, h := range hs {
		out[i] = fromHolderState(h)
	}
	return out
}

// The snapshot's encoding: exported mirrors of the Attributor's state.
type (
	state struct {
		Version                                        int
		StartMs, EmittedUntilMs, MaxMs, RequestsFromMs int64
		Insts                                          []instState
		Pods                                           []podStateS
		Exporters                                      []exporterS
		// RelabelJobs is empty in the snapshots of older binaries: the
		// jobs are learnt again from the next held device's series.
		RelabelJobs   map[string]int64
		Hours         []hourS
		OutRows       []ledger.Row
		OutWls        []ledger.WorkloadRow
		OutLines      []ledger.Line
		Queues        queueBook
		Accepted      uint64
		Rejected      map[Reason]uint64
		CounterResets uint64
		UnplacedMs    int64
		PodsForgotten uint64
	}
	instState struct {
		ID, Profile, BoundID           string
		LastMs                         int64
		LastEnergy                     float64
		HasLastEnergy, Pending, Closed bool
		T                              int64
		Holders, Prev                  []holderS
		Fields                         uint8
		Extra                          []uint8
		GR, Util, Power, Counter       float64
		EnergyDelta                    float64
		BookedUntil, BookedMJ          int64
	}
	holderS struct {
		Namespace, Pod, Queue string
		DRA                   bool
		Job                   string // empty in older snapshots
	}
	timedS struct {
		Ms int64
		V  string
	}
	timedOwnerS struct {
		Ms         int64
		Kind, Name string
	}
	timedRequestS struct {
		Ms    int64
		Kind  string
		Milli int64
	}
	containerS struct {
		Container string
		History   []timedRequestS
	}
	podObsS struct {
		Pending, Running       bool
		T, LastMs, BookedUntil int64
	}
	podStateS struct {
		Namespace, Pod string
		Queue, Node    []timedS
		Owner          []timedOwnerS
		Requests       []containerS
		KSMMs, LastMs  int64
		Obs            podObsS
	}
	exporterS struct {
		Namespace, Pod  string
		FirstMs, LastMs int64
	}
	usageS struct {
		Holder                                holderS
		HeldW, ActiveW, UnmeasuredW, EnergyMJ int64
	}
	instHourS struct {
		Inst                int
		CoveredMs, NobodyMJ int64
		Parts               []usageS
	}
	allocS struct {
		Node, Namespace, Pod, Kind string
		Amount                     int64
	}
	hourS struct {
		Hour  int64
		Insts []instHourS
		Alloc []allocS
	}
)
