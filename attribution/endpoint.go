package attribution

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Inference endpoints: the pods of a namespace serving one model, read
// from vLLM's own metrics. An endpoint is busy at a report when one of its
// pods has a request running or waiting, or generated tokens (or finished
// requests) since its previous report; idle when none of its pods does.
// An idle gap runs from one busy report to the next with only idle reports
// between: its length is what a scale-to-zero cooldown is replayed on.

// endpointBook is what the Attributor keeps of the endpoints. Fields are
// exported for the snapshot's encoding.
type endpointBook struct {
	Eps   map[string]*EndpointState          // namespace \x00 model
	Hours map[int64]map[string]*EndpointHour // hour → endpoint
	Out   []ledger.EndpointRow
}

// EndpointState is an endpoint's timeline so far.
type EndpointState struct {
	Pods map[string]*EndpointPod
	// LastMs is the endpoint's latest report, Busy whether it was busy
	// then (so far: the instant's other series may still come).
	LastMs int64
	Busy   bool
	// LastBusyMs is its last activity (its first report before any);
	// IdleFromMs its first idle report after that, 0 when none.
	LastBusyMs, IdleFromMs int64
}

// EndpointPod is one pod's latest report and its counters' last values.
type EndpointPod struct {
	Ms       int64
	Busy     bool
	Counters map[string]QueueLast // metric and series
}

// EndpointHour is one hour of one endpoint in the making.
type EndpointHour struct {
	// Namespace and Model name a vLLM endpoint; Kind and Name, with an
	// empty Model, one known from GPU activity alone.
	Namespace, Model string
	Kind, Name       string
	Pods             map[string]bool
	Reported, Busy   float64 // seconds
	Requests, Tokens float64
	Gaps             ledger.Gaps
	// IdleSinceMs is, at the hour's latest report, the start of the idle
	// gap the endpoint was in; 0 when it was busy.
	IdleSinceMs int64
}

const endpointStaleMs = int64(ledger.EndpointStale / time.Millisecond)

func (a *Attributor) addEndpoint(q *QueueSample, prime bool) {
	if math.IsNaN(q.Value) || math.IsInf(q.Value, 0) || q.Value < 0 || q.Namespace == "" || q.Pod == "" || q.Model == "" {
		if !prime {
			a.reject(ReasonBadValue)
		}
		return
	}
	if !prime && a.startMs != 0 && q.TimeMs < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	key := q.Namespace + "\x00" + q.Model
	e, pod := a.endpointState(key, q.Pod, q.TimeMs)
	// A counter's increase since its last sample (0 for its first).
	var inc float64
	if q.Metric == EndpointTokens || q.Metric == EndpointRequests {
		if pod.Counters == nil {
			pod.Counters = map[string]QueueLast{}
		}
		k := string(rune('0'+q.Metric)) + "\x00" + q.Series
		last, seen := pod.Counters[k]
		switch {
		case seen && q.TimeMs < last.Ms:
			if !prime {
				a.reject(ReasonOutOfOrder)
			}
			return
		case seen && q.TimeMs == last.Ms:
			if !prime {
				a.reject(ReasonDuplicate)
			}
			return
		case !seen:
		case q.Value >= last.V:
			inc = q.Value - last.V
		default:
			// A reset (the server restarted): it counted q.Value since.
			a.stats.CounterResets++
			inc = q.Value
		}
		pod.Counters[k] = QueueLast{Ms: q.TimeMs, V: q.Value}
	}
	if prime {
		// Before the first hour to emit only the counters' last values
		// matter: the timeline starts at the first hour's first report.
		return
	}
	id := endpointID{namespace: q.Namespace, model: q.Model}
	h := a.endpointHour(q.TimeMs, key, id)
	switch q.Metric {
	case EndpointTokens:
		h.Tokens += inc
	case EndpointRequests:
		h.Requests += inc
	}
	a.stats.Accepted++
	busy := false
	switch q.Metric {
	case EndpointRunning, EndpointWaiting:
		busy = q.Value > 0
	default:
		busy = inc > 0
	}
	a.endpointReport(e, key, id, pod, q.Pod, q.TimeMs, busy, h)
}

// endpointState returns the timeline of the endpoint key and the state of
// its pod podName, made when new (a new timeline starts at ms). The key
// is the caller's own string; podName may alias a parse buffer and is
// copied where kept.
func (a *Attributor) endpointState(key, podName string, ms int64) (*EndpointState, *EndpointPod) {
	b := &a.queues.Endpoints
	if b.Eps == nil {
		b.Eps = make(map[string]*EndpointState)
	}
	e := b.Eps[key]
	if e == nil {
		e = &EndpointState{LastBusyMs: ms}
		b.Eps[key] = e
	}
	// A snapshot's decoding leaves empty maps nil.
	if e.Pods == nil {
		e.Pods = map[string]*EndpointPod{}
	}
	pod := e.Pods[podName]
	if pod == nil {
		pod = &EndpointPod{}
		e.Pods[strings.Clone(podName)] = pod
	}
	return e, pod
}

// endpointID names an endpoint: a namespace's vLLM servers of one model,
// or, with an empty model, a serving workload known from GPU activity.
type endpointID struct{ namespace, model, kind, name string }

// endpointReport moves an endpoint's timeline to a report of one of its
// pods at t, busy or not, h being t's hour: the span since its previous
// report is booked (busy when it was busy then), the pod's state is set,
// and an idle gap that this activity ends is counted.
func (a *Attributor) endpointReport(e *EndpointState, key string, id endpointID, pod *EndpointPod, podName string, t int64, busy bool, h *EndpointHour) {
	if !h.Pods[podName] {
		h.Pods[strings.Clone(podName)] = true
	}
	if t < e.LastMs {
		// Another pod has reported later: the timeline has moved on.
		return
	}
	if t > e.LastMs {
		if t-e.LastMs <= endpointStaleMs {
			a.bookEndpointSpan(key, id, e.LastMs, t, e.Busy)
		} else {
			// Gone a while (scaled to zero, or not scraped): the time
			// away is neither reported nor a gap; an idle stretch
			// before it is a gap that ended when it went.
			if e.IdleFromMs != 0 && e.LastMs > e.LastBusyMs {
				h.Gaps.Add(float64(e.LastMs-e.LastBusyMs) / 1000)
			}
			e.LastBusyMs, e.IdleFromMs = t, 0
			for name, p := range e.Pods {
				if p.Ms < t-endpointStaleMs && p != pod {
					delete(e.Pods, name)
				}
			}
		}
		e.LastMs = t
	}
	if t > pod.Ms {
		pod.Ms, pod.Busy = t, busy
	} else if t == pod.Ms {
		pod.Busy = pod.Busy || busy
	}
	// A pod is as it last reported until it reports again: the endpoint
	// is busy when one of its pods is, and its activity is the latest of
	// theirs.
	e.Busy = false
	busyAt := int64(0)
	for _, p := range e.Pods {
		if p.Busy && p.Ms >= t-endpointStaleMs {
			e.Busy, busyAt = true, max(busyAt, p.Ms)
		}
	}
	switch {
	case e.Busy && e.IdleFromMs != 0 && e.IdleFromMs < busyAt:
		h.Gaps.Add(float64(busyAt-e.LastBusyMs) / 1000)
		e.LastBusyMs, e.IdleFromMs = busyAt, 0
	case e.Busy:
		e.LastBusyMs, e.IdleFromMs = max(e.LastBusyMs, busyAt), 0
	case e.IdleFromMs == 0:
		e.IdleFromMs = t
	}
	h.IdleSinceMs = 0
	if !e.Busy {
		h.IdleSinceMs = e.LastBusyMs
	}
}

// DCGMBusyActivity is the device activity (DCGM's GR engine active, or
// utilisation) at or above which a serving workload's GPU counts as busy
// when the workload has no vLLM series: an idle model server's GPU sits
// near 0.
const DCGMBusyActivity = 0.05

// servingActivity reports an observation of a device to the timelines of
// the serving workloads (a Deployment's ReplicaSet, a LeaderWorkerSet)
// whose pods held it: busy when its activity was at least
// DCGMBusyActivity. Unmeasured observations report nothing.
func (a *Attributor) servingActivity(in *instance) {
	if len(in.holders) == 0 || in.t < a.emittedUntilMs {
		return
	}
	act, measured := in.activity()
	if !measured {
		return
	}
	for _, hd := range in.holders {
		st := a.pods[podKey{hd.namespace, hd.pod}]
		if st == nil {
			continue
		}
		o, ok, _ := st.owner.at(in.t)
		if !ok || !ledger.IsServingKind(o.kind) {
			continue
		}
		id := endpointID{namespace: hd.namespace, kind: o.kind, name: o.name}
		key := hd.namespace + "\x00\x00" + o.kind + "/" + o.name
		e, pod := a.endpointState(key, hd.pod, in.t)
		a.endpointReport(e, key, id, pod, hd.pod, in.t, act >= DCGMBusyActivity, a.endpointHour(in.t, key, id))
	}
}

// endpointHour returns the open hour of ms of the endpoint key, made when
// new with id's namespace and model (or workload).
func (a *Attributor) endpointHour(ms int64, key string, id endpointID) *EndpointHour {
	b := &a.queues.Endpoints
	if b.Hours == nil {
		b.Hours = make(map[int64]map[string]*EndpointHour)
	}
	hr := floorHour(ms)
	byEp := b.Hours[hr]
	if byEp == nil {
		byEp = make(map[string]*EndpointHour)
		b.Hours[hr] = byEp
	}
	h := byEp[key]
	if h == nil {
		h = &EndpointHour{Namespace: strings.Clone(id.namespace), Model: strings.Clone(id.model), Kind: strings.Clone(id.kind), Name: strings.Clone(id.name),
			Pods: map[string]bool{}}
		byEp[key] = h
	}
	if h.Pods == nil {
		h.Pods = map[string]bool{}
	}
	return h
}

// bookEndpointSpan books the span (from, to] between two reports of an
// endpoint as reported, and busy when it was busy at from, split at hour
// boundaries; the part in hours already emitted is dropped.
func (a *Attributor) bookEndpointSpan(key string, id endpointID, from, to int64, busy bool) {
	from = max(from, a.emittedUntilMs)
	for from < to {
		end := min(floorHour(from)+3_600_000, to)
		h := a.endpointHour(from, key, id)
		sec := float64(end-from) / 1000
		h.Reported += sec
		if busy {
			h.Busy += sec
		}
		from = end
	}
}

// appendEndpointHours emits the endpoint rows of hour h and of any open
// hour before it.
func (a *Attributor) appendEndpointHours(h int64) {
	b := &a.queues.Endpoints
	for _, hour := range slices.Sorted(maps.Keys(b.Hours)) {
		if hour > h {
			continue
		}
		byEp := b.Hours[hour]
		delete(b.Hours, hour)
		end := hour + 3_600_000
		for _, key := range slices.Sorted(maps.Keys(byEp)) {
			eh := byEp[key]
			r := ledger.EndpointRow{Hour: time.UnixMilli(hour).UTC(), Cluster: a.model.Cluster, Namespace: eh.Namespace, Model: eh.Model,
				Pods: len(eh.Pods), ReportedSeconds: min(eh.Reported, 3600), BusySeconds: min(eh.Busy, eh.Reported, 3600),
				Requests: eh.Requests, GenerationTokens: eh.Tokens, Gaps: eh.Gaps}
			r.Kind, r.Name = eh.Kind, eh.Name
			if r.Name == "" {
				r.Kind, r.Name = a.podsOwner(eh.Namespace, eh.Pods, end-1)
			}
			if eh.IdleSinceMs != 0 {
				r.IdleSince = time.UnixMilli(eh.IdleSinceMs).UTC()
			}
			b.Out = append(b.Out, r)
		}
	}
	// An endpoint gone for a day is forgotten: it comes back as new.
	for key, e := range b.Eps {
		if e.LastMs < h-24*3_600_000 {
			delete(b.Eps, key)
		}
	}
}

// podsOwner is the owner kube-state-metrics reported by ms for the first
// of the pods (in name order) it knows one of; empty when none.
func (a *Attributor) podsOwner(namespace string, pods map[string]bool, ms int64) (kind, name string) {
	for _, pod := range slices.Sorted(maps.Keys(pods)) {
		if st := a.pods[podKey{namespace, pod}]; st != nil {
			if o, ok, _ := st.owner.at(ms); ok && o.name != "" {
				return o.kind, o.name
			}
		}
	}
	return "", ""
}

// EndpointRows returns the endpoint rows of the hours emitted since the
// last call, and forgets them.
func (a *Attributor) EndpointRows() []ledger.EndpointRow {
	out := a.queues.Endpoints.Out
	a.queues.Endpoints.Out = nil
	return out
}
