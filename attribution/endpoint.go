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
//
// Where the cluster counts the endpoint's requests in front of its model
// servers (EndpointArrivals, a gateway's counter), that counter is one
// more member of the endpoint, arrivalsPod: busy when requests came since
// its last report, reporting while the endpoint has no pod (scaled to
// zero: the gap goes on, and the request that ends it is seen), and the
// source of a gap's wake counts wherever it reported past the window.

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
	// LastBusyPrevMs is the report before LastBusyMs of the pod busy
	// then: its last request may have ended right after it.
	LastBusyPrevMs int64
	// Wakes are the gaps that ended less than the longest of
	// ledger.WakeBounds ago (by the pods' reports), whose requests are
	// still being counted; CheckedMs the report at which they were last
	// checked for their end.
	Wakes     []*Wake
	CheckedMs int64

	// key is its key in the book's Eps (not kept in a snapshot: set again
	// at its first sample after one).
	key string
}

// Wake counts the requests that came as an idle gap ended: from the
// endpoint's last idle report to each of ledger.WakeBounds after the
// gap's end, an upper bound at scrape resolution. Each pod counts the
// requests it finished (vllm:request_success_total's increase) in reports
// up to its first report at or past the bound, and those running or
// waiting at that report: a request that arrived in the window either
// finished by then or was still there. The gap's hour is held until every
// pod still reporting has reported past the longest bound.
type Wake struct {
	// HourMs is the hour whose row counted the gap, Bucket the bucket of
	// its longest possible length, EndMs its end.
	HourMs, EndMs int64
	Bucket        int
	// Requests are the counts so far, one per bound, from the pods;
	// Arrivals the gateway's (EndpointArrivals), nil when it has sent
	// none.
	Requests []float64
	Arrivals []float64
	// PassMs is, per pod, its first report at or past each bound's end;
	// 0 until then.
	PassMs map[string][]int64
}

// EndpointPod is one pod's latest report and its counters' last values.
type EndpointPod struct {
	// Ms is its latest report, PrevMs the one before.
	Ms, PrevMs int64
	Busy       bool
	Counters   map[string]*QueueLast // metric and series
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
	// OpenWakes counts the gaps of the hour whose requests are still
	// being counted: the hour's rows wait for them.
	OpenWakes int
}

const endpointStaleMs = int64(ledger.EndpointStale / time.Millisecond)

// arrivalsPod is the gateway's place among an endpoint's pods: a name no
// pod can have.
const arrivalsPod = "\x00arrivals"

func (a *Attributor) addEndpoint(q *QueueSample, prime bool) {
	podName := q.Pod
	if q.Metric == EndpointArrivals {
		podName = arrivalsPod
	}
	if math.IsNaN(q.Value) || math.IsInf(q.Value, 0) || q.Value < 0 || q.Namespace == "" || podName == "" || q.Model == "" {
		if !prime {
			a.reject(ReasonBadValue)
		}
		return
	}
	if !prime && a.startMs != 0 && q.TimeMs < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	a.keyBuf = append(append(append(a.keyBuf[:0], q.Namespace...), 0), q.Model...)
	key, e, pod := a.endpointState(a.keyBuf, podName, q.TimeMs)
	// A counter's increase since its last sample (0 for its first).
	var inc float64
	if q.Metric == EndpointTokens || q.Metric == EndpointRequests || q.Metric == EndpointArrivals {
		if pod.Counters == nil {
			pod.Counters = map[string]*QueueLast{}
		}
		k := append(append(a.keyBuf[:0], byte('0'+q.Metric), 0), q.Series...)
		a.keyBuf = k
		last := pod.Counters[string(k)]
		seen := last != nil
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
		if seen {
			*last = QueueLast{Ms: q.TimeMs, V: q.Value}
		} else {
			pod.Counters[string(k)] = &QueueLast{Ms: q.TimeMs, V: q.Value}
		}
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
	case EndpointArrivals:
		// Requests that came while no server was up wait for one: the
		// endpoint is busy (loading) until a server reports.
		busy = inc > 0 || pod.Busy && !e.serving(q.TimeMs)
	default:
		busy = inc > 0
	}
	longest, end := a.endpointReport(e, key, id, pod, podName, q.TimeMs, busy, h)
	if b := ledger.Bucket(longest); longest > 0 && b > 0 {
		// A gap no cooldown can scale down in (the shortest is the first
		// bucket's bound) has no requests to count.
		e.Wakes = append(e.Wakes, &Wake{HourMs: floorHour(q.TimeMs), EndMs: end, Bucket: b,
			Requests: make([]float64, len(ledger.WakeBounds)), PassMs: map[string][]int64{}})
		h.OpenWakes++
	}
	if len(e.Wakes) > 0 {
		a.countWakes(key, e, q, podName, inc)
	}
}

// countWakes counts a sample of an endpoint's pod podName (or gateway)
// into its open wakes, and closes those every pod still reporting has
// reported past.
func (a *Attributor) countWakes(key string, e *EndpointState, q *QueueSample, podName string, inc float64) {
	var v float64
	switch q.Metric {
	case EndpointRequests, EndpointArrivals:
		v = inc
	case EndpointRunning, EndpointWaiting:
		v = q.Value
	default:
		return
	}
	for _, w := range e.Wakes {
		pass := w.PassMs[podName]
		if pass == nil {
			pass = make([]int64, len(ledger.WakeBounds))
			w.PassMs[strings.Clone(podName)] = pass
		}
		if q.Metric == EndpointArrivals && w.Arrivals == nil {
			w.Arrivals = make([]float64, len(ledger.WakeBounds))
		}
		for j, b := range ledger.WakeBounds {
			if pass[j] == 0 && q.TimeMs >= w.EndMs+int64(b*1000) {
				pass[j] = q.TimeMs
			}
			switch {
			case pass[j] != 0 && q.TimeMs > pass[j]:
			case q.Metric == EndpointArrivals:
				// Counted as they came: those of the window, and those
				// of the scrape interval around its ends.
				w.Arrivals[j] += v
			case q.Metric == EndpointRequests:
				w.Requests[j] += v
			case pass[j] == q.TimeMs:
				// In flight at the pod's first report past the bound.
				w.Requests[j] += v
			}
		}
	}
	if q.TimeMs <= e.CheckedMs {
		return
	}
	e.CheckedMs = q.TimeMs
	closed := false
	e.Wakes = slices.DeleteFunc(e.Wakes, func(w *Wake) bool {
		if w.covered(e, q.TimeMs, false) < len(ledger.WakeBounds) {
			return false
		}
		a.closeWake(key, e, w, q.TimeMs, false)
		closed = true
		return true
	})
	if closed && a.emittedUntilMs > 0 {
		// An hour closed before its gaps' counts may be complete now.
		a.releaseEndpointHours(a.emittedUntilMs - hourMs)
	}
}

// covered is how many of the wake's windows (the shortest first) the
// endpoint's data has covered at nowMs: every pod still reporting has
// reported past the window's end (at it, with atEnd: the data has no
// more to give).
func (w *Wake) covered(e *EndpointState, nowMs int64, atEnd bool) int {
	n := len(ledger.WakeBounds)
	for name, p := range e.Pods {
		if p.Ms < nowMs-endpointStaleMs {
			continue // gone: it reports nothing more
		}
		pass := w.PassMs[name]
		for j := range n {
			if pass == nil || pass[j] == 0 || p.Ms < pass[j] || p.Ms == pass[j] && !atEnd {
				n = j
				break
			}
		}
	}
	return n
}

// closeWake books a wake's requests in the row of its gap, the windows the
// data covered by nowMs as measured (all of them at the data's end: the
// requests past it are in no window the ledger replays).
func (a *Attributor) closeWake(key string, e *EndpointState, w *Wake, nowMs int64, dataEnd bool) {
	h := a.queues.Endpoints.Hours[w.HourMs][key]
	if h == nil {
		return
	}
	complete := len(ledger.WakeBounds)
	if !dataEnd {
		complete = w.covered(e, nowMs, true)
	}
	if gw := w.PassMs[arrivalsPod]; gw != nil && w.Arrivals != nil {
		// The gateway's count is the window's wherever it reported past
		// the window's end (or the data ended): every request that came
		// in it, and no request counted twice, as the pods' counts may
		// (one finished by a pod and counted in flight by another) or
		// miss (one failed, or still waiting past the window).
		for j := range w.Requests {
			if gw[j] != 0 || dataEnd {
				w.Requests[j] = w.Arrivals[j]
			}
		}
	}
	for j := len(w.Requests) - 1; j >= 0; j-- {
		// A longer window's count bounds a shorter one's too (a request
		// in flight at one pass may have stopped without success by the
		// next), where the longer one is covered.
		if j+1 < complete {
			w.Requests[j] = min(w.Requests[j], w.Requests[j+1])
		}
	}
	for j := range w.Requests {
		// The activity that ended the gap was at least one request,
		// though vLLM may count none (tokens of one still running when it
		// went); a window not covered has at least a shorter one's.
		w.Requests[j] = max(w.Requests[j], 1)
		if j > 0 {
			w.Requests[j] = max(w.Requests[j], w.Requests[j-1])
		}
	}
	h.Gaps.AddWoken(w.Bucket, w.Requests, complete)
	h.OpenWakes--
}

// lastBusyPrev is the report before the endpoint's last activity, where
// its idle time may have begun; the activity itself when that is not
// known (a snapshot from before it was kept).
func (e *EndpointState) lastBusyPrev() int64 {
	if e.LastBusyPrevMs == 0 || e.LastBusyPrevMs > e.LastBusyMs {
		return e.LastBusyMs
	}
	return e.LastBusyPrevMs
}

// serving says whether a model server (not the gateway) of the endpoint
// has reported within ledger.EndpointStale of ms.
func (e *EndpointState) serving(ms int64) bool {
	for name, p := range e.Pods {
		if name != arrivalsPod && p.Ms >= ms-endpointStaleMs {
			return true
		}
	}
	return false
}

// endpointState returns the key, the timeline of the endpoint named kb
// and the state of its pod podName, made when new (a new timeline starts
// at ms). kb is scratch (a.keyBuf): the key returned is the book's own
// string. podName may alias a parse buffer and is copied where kept.
func (a *Attributor) endpointState(kb []byte, podName string, ms int64) (string, *EndpointState, *EndpointPod) {
	b := &a.queues.Endpoints
	if b.Eps == nil {
		b.Eps = make(map[string]*EndpointState)
	}
	e := b.Eps[string(kb)]
	switch {
	case e == nil:
		e = &EndpointState{LastBusyMs: ms, key: string(kb)}
		b.Eps[e.key] = e
	case e.key == "":
		e.key = string(kb)
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
	return e.key, e, pod
}

// endpointID names an endpoint: a namespace's vLLM servers of one model,
// or, with an empty model, a serving workload known from GPU activity.
type endpointID struct{ namespace, model, kind, name string }

// endpointReport moves an endpoint's timeline to a report of one of its
// pods at t, busy or not, h being t's hour: the span since its previous
// report is booked (busy when it was busy then), the pod's state is set,
// and an idle gap that this activity ends is counted.
//
// It returns the longest length the gap counted may have had, if any (0
// else), and the activity that ended it, in ms.
func (a *Attributor) endpointReport(e *EndpointState, key string, id endpointID, pod *EndpointPod, podName string, t int64, busy bool, h *EndpointHour) (longest float64, endMs int64) {
	if podName != arrivalsPod && !h.Pods[podName] {
		h.Pods[strings.Clone(podName)] = true
	}
	if t < e.LastMs {
		// Another pod has reported later: the timeline has moved on.
		return 0, 0
	}
	if t > e.LastMs {
		if t-e.LastMs <= endpointStaleMs {
			a.bookEndpointSpan(key, id, e.LastMs, t, e.Busy)
		} else {
			// Gone a while (scaled to zero, or not scraped): the time
			// away is neither reported nor a gap; an idle stretch
			// before it is a gap that ended when it went.
			if e.IdleFromMs != 0 && e.LastMs > e.LastBusyMs {
				// Its requests came while it was away: not counted. The
				// gap's seconds are those it reported (the time away is
				// no GPU time to save); the request that brought it back
				// may have come as late as now, so the gap is marked by
				// that longest length: a cooldown shorter than it may
				// have made that request wait.
				gap := float64(e.LastMs-e.LastBusyMs) / 1000
				h.Gaps.Add(gap)
				if b := ledger.Bucket(float64(t-e.lastBusyPrev()) / 1000); b > 0 {
					h.Gaps.AddUnmeasured(b)
				}
			}
			e.LastBusyMs, e.LastBusyPrevMs, e.IdleFromMs = t, t, 0
			for name, p := range e.Pods {
				if p.Ms < t-endpointStaleMs && p != pod {
					delete(e.Pods, name)
				}
			}
		}
		e.LastMs = t
	}
	if t > pod.Ms {
		pod.PrevMs, pod.Ms, pod.Busy = pod.Ms, t, busy
	} else if t == pod.Ms {
		pod.Busy = pod.Busy || busy
	}
	// A pod is as it last reported until it reports again: the endpoint
	// is busy when one of its pods is, and its activity is the latest of
	// theirs.
	e.Busy = false
	busyAt, busyPrev := int64(0), int64(0)
	for _, p := range e.Pods {
		if p.Busy && p.Ms >= t-endpointStaleMs && p.Ms > busyAt {
			e.Busy, busyAt, busyPrev = true, p.Ms, p.PrevMs
		}
	}
	if busyPrev == 0 {
		busyPrev = busyAt
	}
	switch {
	case e.Busy && e.IdleFromMs != 0 && e.IdleFromMs < busyAt:
		h.Gaps.Add(float64(busyAt-e.LastBusyMs) / 1000)
		longest, endMs = float64(busyAt-e.lastBusyPrev())/1000, busyAt
		e.LastBusyMs, e.LastBusyPrevMs, e.IdleFromMs = busyAt, busyPrev, 0
	case e.Busy:
		if busyAt >= e.LastBusyMs {
			e.LastBusyMs, e.LastBusyPrevMs = busyAt, busyPrev
		}
		e.IdleFromMs = 0
	case e.IdleFromMs == 0:
		e.IdleFromMs = t
	}
	h.IdleSinceMs = 0
	if !e.Busy {
		h.IdleSinceMs = e.LastBusyMs
	}
	return longest, endMs
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
		kb := append(append(a.keyBuf[:0], hd.namespace...), 0, 0)
		a.keyBuf = append(append(append(kb, o.kind...), '/'), o.name...)
		key, e, pod := a.endpointState(a.keyBuf, hd.pod, in.t)
		h := a.endpointHour(in.t, key, id)
		if longest, _ := a.endpointReport(e, key, id, pod, hd.pod, in.t, act >= DCGMBusyActivity, h); longest > 0 {
			// No request counts: the gap's are not known.
			if b := ledger.Bucket(longest); b > 0 {
				h.Gaps.AddUnmeasured(b)
			}
		}
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
// hour before it. An hour whose gaps' requests are still being counted
// waits for them while the data closes hours (the next hour's close at
// most); when h is forced (settled by the clock, or the data's end), its
// counts are closed with what the data has, the windows it did not cover
// booked as such.
func (a *Attributor) appendEndpointHours(h int64, forced bool) {
	if forced {
		a.closeWakes(h)
	} else {
		a.closeWakes(h - hourMs)
	}
	a.releaseEndpointHours(h)
	// An endpoint gone for a day is forgotten: it comes back as new; so
	// is a pod gone for a day from an endpoint that goes on (a gateway
	// keeps one going across its pods' lives).
	for key, e := range a.queues.Endpoints.Eps {
		if e.LastMs < h-24*3_600_000 {
			for _, w := range e.Wakes {
				a.closeWake(key, e, w, e.LastMs, false)
			}
			delete(a.queues.Endpoints.Eps, key)
			continue
		}
		for name, p := range e.Pods {
			if p.Ms < h-24*3_600_000 {
				delete(e.Pods, name)
			}
		}
	}
}

// CloseEndpoints counts what the data has of every gap's requests, as
// covering every window (no request comes past the data's end), and emits
// every endpoint hour that is closed: at the end of a finite stream,
// before its last Emit (which would close them as the clock does, with
// the windows past the data not covered).
func (a *Attributor) CloseEndpoints() {
	for key, e := range a.queues.Endpoints.Eps {
		for _, w := range e.Wakes {
			a.closeWake(key, e, w, e.LastMs, true)
		}
		e.Wakes = nil
	}
	if a.emittedUntilMs > 0 {
		a.releaseEndpointHours(a.emittedUntilMs - hourMs)
	}
}

// releaseEndpointHours emits the rows of the endpoint hours up to h (the
// closed ones), in order, up to the first with a count still open.
func (a *Attributor) releaseEndpointHours(h int64) {
	b := &a.queues.Endpoints
	for _, hour := range slices.Sorted(maps.Keys(b.Hours)) {
		if hour > h {
			break
		}
		byEp := b.Hours[hour]
		open := false
		for _, eh := range byEp {
			open = open || eh.OpenWakes > 0
			if eh.Name == "" {
				// The owner as of the hour's end, while its pods are
				// remembered.
				eh.Kind, eh.Name = a.podsOwner(eh.Namespace, eh.Pods, hour+hourMs-1)
			}
		}
		if open {
			break
		}
		delete(b.Hours, hour)
		for _, key := range slices.Sorted(maps.Keys(byEp)) {
			eh := byEp[key]
			r := ledger.EndpointRow{Hour: time.UnixMilli(hour).UTC(), Cluster: a.model.Cluster, Namespace: eh.Namespace, Model: eh.Model,
				Pods: len(eh.Pods), ReportedSeconds: min(eh.Reported, 3600), BusySeconds: min(eh.Busy, eh.Reported, 3600),
				Requests: eh.Requests, GenerationTokens: eh.Tokens, Gaps: eh.Gaps}
			r.Kind, r.Name = eh.Kind, eh.Name
			if eh.IdleSinceMs != 0 {
				r.IdleSince = time.UnixMilli(eh.IdleSinceMs).UTC()
			}
			b.Out = append(b.Out, r)
		}
	}
}

// closeWakes closes the wakes of the gaps of hour and before with what
// the data has counted: the windows it has not covered are booked as
// such.
func (a *Attributor) closeWakes(hour int64) {
	for key, e := range a.queues.Endpoints.Eps {
		e.Wakes = slices.DeleteFunc(e.Wakes, func(w *Wake) bool {
			if w.HourMs > hour {
				return false
			}
			a.closeWake(key, e, w, e.LastMs, false)
			return true
		})
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
