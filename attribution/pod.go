package attribution

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
)

type podKey struct{ namespace, pod string }

// timed is a value known from a time on.
type timed[T comparable] struct {
	ms int64
	v  T
}

// history is a value over time, oldest first: each entry holds from its
// time until the next. Reading it as of a time makes what a pod was at an
// instant independent of the order in which its series arrived.
type history[T comparable] []timed[T]

// set records v as seen at ms; false when that changes nothing.
func (h *history[T]) set(ms int64, v T) bool {
	i := sort.Search(len(*h), func(i int) bool { return (*h)[i].ms > ms })
	if i > 0 && (*h)[i-1].v == v {
		return false
	}
	if i < len(*h) && (*h)[i].v == v {
		(*h)[i].ms = ms // seen earlier than thought
		return true
	}
	*h = append(*h, timed[T]{})
	copy((*h)[i+1:], (*h)[i:])
	(*h)[i] = timed[T]{ms, v}
	return true
}

// at returns the value in effect at ms, and the time of the next change
// (math.MaxInt64 when none).
func (h history[T]) at(ms int64) (v T, ok bool, next int64) {
	i := sort.Search(len(h), func(i int) bool { return h[i].ms > ms })
	next = math.MaxInt64
	if i < len(h) {
		next = h[i].ms
	}
	if i == 0 {
		return v, false, next
	}
	return h[i-1].v, true, next
}

// trim drops entries superseded before ms.
func (h *history[T]) trim(ms int64) {
	i := sort.Search(len(*h), func(i int) bool { return (*h)[i].ms > ms })
	if i > 1 {
		*h = append((*h)[:0], (*h)[i-1:]...)
	}
}

type owner struct{ kind, name string }

type request struct {
	kind  string
	milli int64
}

// podState is what kube-state-metrics said of a pod over time.
type podState struct {
	key      podKey // the pod's name, owned by the Attributor
	queue    history[string]
	owner    history[owner]
	node     history[string]
	requests map[string]*history[request] // by container
	// ksmMs is when kube-state-metrics first reported the pod's phase: from
	// then on it is known to Kubernetes, and a pod known without GPU
	// requests is not a holder.
	ksmMs  int64
	lastMs int64
	obs    podObs
}

// podObs is a pod's open phase observation: Running or not at t, until the
// next report (or, past the staleness bound, one scrape interval).
type podObs struct {
	pending     bool
	t           int64
	running     bool
	lastMs      int64
	bookedUntil int64
}

// exporterSeen is when a pod was seen as an exporter's own.
type exporterSeen struct{ firstMs, lastMs int64 }

// requestMilli sums the pod's containers' requests of kind in effect at ms,
// and returns when the next recorded change takes effect.
func (p *podState) requestMilli(kind string, ms int64) (sum, until int64) {
	until = math.MaxInt64
	for _, h := range p.requests {
		r, ok, next := h.at(ms)
		until = min(until, next)
		if ok && r.kind == kind {
			sum += r.milli
		}
	}
	return sum, until
}

// requestsAt sums the pod's requests per kind in effect at ms.
func (p *podState) requestsAt(ms int64, dst map[string]int64) {
	clear(dst)
	for _, h := range p.requests {
		if r, ok, _ := h.at(ms); ok && r.milli > 0 {
			dst[r.kind] += r.milli
		}
	}
}

// AddPod records what kube-state-metrics says of a pod at p.TimeMs: its
// LocalQueue, owner, node, a container's GPU request, its phase. Fields
// left empty say nothing. Facts are kept with their time and read as of
// the instant they apply to. A phase report past the staleness bound after
// the oldest open hour closes it first, as Add does.
func (a *Attributor) AddPod(p PodInfo) { a.addPod(p, false) }

// PrimePod is AddPod for a fact from before the first hour to emit; see
// Prime.
func (a *Attributor) PrimePod(p PodInfo) { a.addPod(p, true) }

func (a *Attributor) addPod(p PodInfo, prime bool) {
	if p.Pod == "" {
		return
	}
	if !prime {
		a.advance(p.TimeMs)
	}
	st := a.pods[podKey{p.Namespace, p.Pod}]
	if st == nil {
		if len(a.pods) >= a.opts.MaxPods {
			a.forgetPods(a.opts.MaxPods/16 + 1)
		}
		// The key is the pod's own copy: p's strings may alias a parse
		// buffer that is about to be reused.
		st = &podState{key: podKey{strings.Clone(p.Namespace), strings.Clone(p.Pod)}}
		a.pods[st.key] = st
	}
	k := st.key
	t := p.TimeMs
	st.lastMs = max(st.lastMs, t)
	if p.Queue != "" {
		if v, ok, _ := st.queue.at(t); !ok || v != p.Queue {
			st.queue.set(t, strings.Clone(p.Queue))
		}
	}
	if p.OwnerName != "" {
		if v, ok, _ := st.owner.at(t); !ok || v != (owner{p.OwnerKind, p.OwnerName}) {
			st.owner.set(t, owner{strings.Clone(p.OwnerKind), strings.Clone(p.OwnerName)})
		}
	}
	if p.Node != "" {
		if v, ok, _ := st.node.at(t); !ok || v != p.Node {
			st.node.set(t, strings.Clone(p.Node))
		}
	}
	if p.RequestMilli > 0 {
		if a.requestsFromMs == 0 || t < a.requestsFromMs {
			a.requestsFromMs = t
		}
		if st.requests == nil {
			st.requests = make(map[string]*history[request], 1)
		}
		h := st.requests[p.Container]
		if h == nil {
			h = &history[request]{}
			st.requests[strings.Clone(p.Container)] = h
		}
		kind := p.Kind
		if kind == "" {
			kind = KindGPU
		}
		if v, ok, _ := h.at(t); !ok || v != (request{kind, p.RequestMilli}) {
			h.set(t, request{strings.Clone(kind), p.RequestMilli})
			a.podsVer++
		}
	}
	if p.Phase != PhaseUnknown {
		if st.ksmMs == 0 || t < st.ksmMs {
			st.ksmMs = t
		}
		a.observePhase(k, st, t, p.Phase == PhaseRunning, prime)
	}
}

// observePhase takes a phase report as the pod's observation at t.
func (a *Attributor) observePhase(k podKey, st *podState, t int64, running bool, prime bool) {
	o := &st.obs
	if o.pending {
		switch {
		case t < o.t:
			return // a report older than the open one: nothing to add
		case t == o.t:
			o.running = o.running || running
			return
		}
		cov := t - o.t
		if cov > a.opts.StalenessMs {
			cov = o.interval(a)
		}
		a.finalizePod(k, st, cov)
	}
	if t <= o.lastMs {
		return
	}
	if a.startMs == 0 {
		a.startMs = floorHour(t)
		a.emittedUntilMs = a.startMs
	}
	if !prime && t < a.emittedUntilMs {
		a.reject(ReasonLate)
		return
	}
	*o = podObs{pending: true, t: t, running: running, lastMs: o.lastMs}
}

// interval is how long the pod's last report counts when no next one
// follows within the staleness bound: kube-state-metrics' own interval, as
// the last two reports show it, else the scrape interval.
func (o *podObs) interval(a *Attributor) int64 {
	if d := o.t - o.lastMs; o.lastMs != 0 && d > 0 && d <= a.opts.StalenessMs {
		return d
	}
	return a.opts.ScrapeIntervalMs
}

// finalizePod books the open phase observation for covMs.
func (a *Attributor) finalizePod(k podKey, st *podState, covMs int64) {
	o := &st.obs
	o.pending = false
	o.lastMs = o.t
	a.bookAlloc(k, st, max(o.t, o.bookedUntil), o.t+covMs)
	o.bookedUntil = 0
}

// bookPodPartial is bookPartial for a pod's phase observation.
func (a *Attributor) bookPodPartial(k podKey, st *podState, end int64) {
	o := &st.obs
	a.bookAlloc(k, st, max(o.t, o.bookedUntil), min(o.t+o.interval(a), end))
	o.bookedUntil = max(o.bookedUntil, end)
}

// bookAlloc books [from, to) of a running pod's requests, on the node it
// was on at the observation's time, to the open hours.
func (a *Attributor) bookAlloc(k podKey, st *podState, from, to int64) {
	o := &st.obs
	if !o.running || to <= from {
		return
	}
	nodeName, ok, _ := st.node.at(o.t)
	if !ok || a.nodes[nodeName] == nil {
		return
	}
	kinds := a.kindBuf[:0]
	for _, h := range st.requests {
		if r, ok, _ := h.at(o.t); ok && r.milli > 0 {
			i := slices.IndexFunc(kinds, func(x request) bool { return x.kind == r.kind })
			if i < 0 {
				kinds = append(kinds, request{r.kind, 0})
				i = len(kinds) - 1
			}
			kinds[i].milli += r.milli
		}
	}
	a.kindBuf = kinds
	if len(kinds) == 0 {
		return
	}
	for start := from; start < to; {
		h := floorHour(start)
		pieceEnd := min(to, h+hourMs)
		if h >= a.emittedUntilMs {
			hs := a.hour(h)
			if hs.alloc == nil {
				hs.alloc = make(map[allocKey]int64)
			}
			for _, r := range kinds {
				hs.alloc[allocKey{nodeName, k.namespace, k.pod, r.kind}] += (pieceEnd - start) * r.milli
			}
		}
		start = pieceEnd
	}
}

// learnExporter records that s names an exporter's own pod.
func (a *Attributor) learnExporter(s *Sample) {
	if s.Namespace != "" || s.Pod != "" {
		a.learnJob(s) // a holder's series with the exporter apart
	}
	k := podKey{s.ExporterNamespace, s.ExporterPod}
	if e := a.exporters[k]; e != nil {
		e.firstMs, e.lastMs = min(e.firstMs, s.TimeMs), max(e.lastMs, s.TimeMs)
		return
	}
	if len(a.exporters) >= a.opts.MaxPods {
		return
	}
	a.exporters[podKey{strings.Clone(k.namespace), strings.Clone(k.pod)}] = &exporterSeen{s.TimeMs, s.TimeMs}
}

// forgetPods forgets n pods to make room for new ones (a flood of pods
// that exist nowhere but in a sender's requests must not take the memory,
// nor keep the pods that are real from being known): those with no GPU
// request first (they can only have named a queue or an owner), then the
// ones whose last report is oldest, in the order of their names where
// that ties, so that what is forgotten is a function of what was
// reported. Counted in Stats.PodsForgotten.
func (a *Attributor) forgetPods(n int) {
	type cand struct {
		k        podKey
		requests bool
		lastMs   int64
	}
	cands := make([]cand, 0, len(a.pods))
	for k, st := range a.pods {
		cands = append(cands, cand{k, len(st.requests) > 0, st.lastMs})
	}
	slices.SortFunc(cands, func(x, y cand) int {
		if x.requests != y.requests {
			if !x.requests {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(x.lastMs, y.lastMs), comparePodKeys(x.k, y.k))
	})
	for _, c := range cands[:min(n, len(cands))] {
		delete(a.pods, c.k)
	}
	a.podsVer++
	a.stats.PodsForgotten += uint64(min(n, len(cands)))
}

// maxRelabelJobs bounds the scrape jobs remembered: a cluster has a few.
const maxRelabelJobs = 64

// relabelledJob says whether job renames holders to exported_* (a series
// of it did, by ms), learning it from s when s shows it. A job is known
// from any of its series, so that the exporters of nodes whose devices
// are all free (whose series never name a holder) are known too.
func (a *Attributor) relabelledJob(job string, ms int64) bool {
	if job == "" {
		return false
	}
	first, ok := a.relabelJobs[job]
	return ok && first <= ms
}

// learnJob records that s's job renames holders to exported_*.
func (a *Attributor) learnJob(s *Sample) {
	if s.Job == "" {
		return
	}
	if first, ok := a.relabelJobs[s.Job]; ok {
		a.relabelJobs[s.Job] = min(first, s.TimeMs)
		return
	}
	if len(a.relabelJobs) < maxRelabelJobs {
		a.relabelJobs[strings.Clone(s.Job)] = s.TimeMs
	}
}

// notHolder says whether the pod h names could not have held a device as
// of ms: it is an exporter's own pod (seen as such by then, or named with
// no exported_* labels by a job that renames holders), or
// kube-state-metrics knew it by then and it requested no GPU resource (and
// its device did not come through DRA). Its series are a free device's.
func (a *Attributor) notHolder(h holder, ms int64) bool {
	k := podKey{h.namespace, h.pod}
	if e := a.exporters[k]; e != nil && e.firstMs <= ms {
		return true
	}
	if a.relabelledJob(h.job, ms) {
		return true
	}
	if h.dra || a.requestsFromMs == 0 || a.requestsFromMs > ms {
		return false
	}
	st := a.pods[k]
	if st == nil || st.ksmMs == 0 || st.ksmMs > ms {
		return false
	}
	for _, rh := range st.requests {
		if r, ok, _ := rh.at(ms); ok && r.milli > 0 {
			return false
		}
	}
	return true
}

// prune forgets pods and exporters kube-state-metrics and DCGM stopped
// reporting PodRetentionMs before the closed hours' end, and history that
// no open observation can read any more.
func (a *Attributor) prune() {
	forget := a.emittedUntilMs - a.opts.PodRetentionMs
	keep := a.emittedUntilMs - a.opts.StalenessMs - a.opts.ScrapeIntervalMs
	for k, st := range a.pods {
		if st.lastMs < forget && !st.obs.pending {
			delete(a.pods, k)
			continue
		}
		st.queue.trim(keep)
		st.owner.trim(keep)
		st.node.trim(keep)
		for _, h := range st.requests {
			h.trim(keep)
		}
	}
	for k, e := range a.exporters {
		if e.lastMs < forget {
			delete(a.exporters, k)
		}
	}
}
