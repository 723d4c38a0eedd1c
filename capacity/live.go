package capacity

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Scale-to-zero on an endpoint's live series: the ledger's endpoint rows
// (from vLLM's metrics) give its idle gaps in buckets at the cooldowns
// with their seconds, so a cooldown's replay on them is exact per bucket:
// a cooldown C scales the replica down in every gap longer than C, for
// the gap less C, and each such gap ends in a cold start. The endpoint's
// workload rows (by its pods' owner) give the GPU time and cost it held.

// LiveEndpoint is one inference endpoint over a window, as the ledger has
// it.
type LiveEndpoint struct {
	Cluster, Namespace, Model string
	// Kind and Name are its pods' owner (the workload whose rows hold its
	// GPU time); empty when unknown.
	Kind, Name string
	From, To   time.Time
	// ReportedSeconds is how long it reported, BusySeconds the part with
	// requests running or waiting (or tokens generated); PodSeconds its
	// pods' reported time (ReportedSeconds × pods, hour by hour).
	ReportedSeconds, BusySeconds, PodSeconds float64
	Requests, Tokens                         float64
	// GapsByHour are the idle gaps by the UTC hour of the day they ended
	// in; OpenGap the seconds of the gap still open at the window's end
	// (no request came to end it).
	GapsByHour [24]ledger.Gaps
	OpenGap    float64
	// ActiveDays counts, per UTC hour of the day, the days with busy time
	// in it; Days the days the endpoint reported on.
	ActiveDays [24]int
	Days       int
	// From the workload's rows: the GPU time held, the part idle by DCGM's
	// activity, and their cost.
	GPUSeconds, IdleGPUSeconds float64
	CostMicros, IdleCostMicros int64
}

// ID names the endpoint as namespace/model, or, known from GPU activity
// alone, namespace/kind/name.
func (e *LiveEndpoint) ID() string {
	if e.FromGPUActivity() {
		return e.Namespace + "/" + e.Kind + "/" + e.Name
	}
	return e.Namespace + "/" + e.Model
}

// FromGPUActivity says whether the endpoint's timeline is its GPUs'
// activity (a serving workload without vLLM's series): busy when DCGM's
// activity was at least 5%, with no request counts.
func (e *LiveEndpoint) FromGPUActivity() bool { return e.Model == "" }

// Gaps returns every idle gap of the window.
func (e *LiveEndpoint) Gaps() ledger.Gaps {
	var g ledger.Gaps
	for h := range e.GapsByHour {
		g.Merge(e.GapsByHour[h])
	}
	return g
}

// GPUsPerReplica is the GPUs one of its pods held on average (from the
// workload rows); 0 when unknown.
func (e *LiveEndpoint) GPUsPerReplica() float64 {
	if e.PodSeconds <= 0 || e.GPUSeconds <= 0 {
		return 0
	}
	return e.GPUSeconds / e.PodSeconds
}

// PriceMicrosPerGPUHour is what its GPU time cost an hour (from the
// workload rows); 0 when unknown.
func (e *LiveEndpoint) PriceMicrosPerGPUHour() int64 {
	if e.GPUSeconds <= 0 {
		return 0
	}
	return int64(math.Round(float64(e.CostMicros) / e.GPUSeconds * 3600))
}

// LiveEndpoints gathers the endpoints of [from, to) from the ledger's
// endpoint rows and the workloads' rows summed over the same window.
func LiveEndpoints(rows []ledger.EndpointRow, workloads []ledger.WorkloadRow, from, to time.Time) []LiveEndpoint {
	type wkey struct{ cluster, namespace, kind, name string }
	wl := map[wkey]ledger.WorkloadRow{}
	for _, w := range workloads {
		k := wkey{w.Cluster, w.Namespace, w.Kind, w.Name}
		s := wl[k]
		s.GPUSeconds += w.GPUSeconds
		s.ActiveGPUSeconds += w.ActiveGPUSeconds
		s.UnmeasuredGPUSeconds += w.UnmeasuredGPUSeconds
		s.CostMicros += w.CostMicros
		s.IdleCostMicros += w.IdleCostMicros
		wl[k] = s
	}
	type ekey struct{ cluster, namespace, model, workload string }
	eps := map[ekey]*LiveEndpoint{}
	days := map[ekey]map[int64]bool{}
	last := map[ekey]ledger.EndpointRow{}
	for _, r := range rows {
		if r.Hour.Before(from) || !r.Hour.Before(to) {
			continue
		}
		k := ekey{r.Cluster, r.Namespace, r.Model, ""}
		if r.Model == "" {
			k.workload = r.Kind + "/" + r.Name
		}
		e := eps[k]
		if e == nil {
			e = &LiveEndpoint{Cluster: r.Cluster, Namespace: r.Namespace, Model: r.Model, Kind: r.Kind, Name: r.Name, From: from, To: to}
			eps[k], days[k] = e, map[int64]bool{}
		}
		if r.Name != "" {
			e.Kind, e.Name = r.Kind, r.Name
		}
		e.ReportedSeconds += r.ReportedSeconds
		e.BusySeconds += r.BusySeconds
		e.PodSeconds += r.ReportedSeconds * float64(r.Pods)
		e.Requests += r.Requests
		e.Tokens += r.GenerationTokens
		e.GapsByHour[r.Hour.Hour()].Merge(r.Gaps)
		day := r.Hour.Unix() / 86400
		days[k][day] = true
		if r.BusySeconds > 0 {
			e.ActiveDays[r.Hour.Hour()]++
		}
		if l, ok := last[k]; !ok || r.Hour.After(l.Hour) {
			last[k] = r
		}
	}
	// vLLM's series when present: a workload's timeline from its GPUs'
	// activity is dropped where its vLLM endpoint is known.
	served := map[[4]string]bool{}
	for _, e := range eps {
		if !e.FromGPUActivity() && e.Name != "" {
			served[[4]string{e.Cluster, e.Namespace, e.Kind, e.Name}] = true
		}
	}
	out := make([]LiveEndpoint, 0, len(eps))
	for k, e := range eps {
		if e.FromGPUActivity() && served[[4]string{e.Cluster, e.Namespace, e.Kind, e.Name}] {
			continue
		}
		e.Days = len(days[k])
		if l := last[k]; !l.IdleSince.IsZero() {
			end, start := l.Hour.Add(time.Hour), l.IdleSince
			if end.After(to) {
				end = to
			}
			if start.Before(from) {
				start = from
			}
			e.OpenGap = max(end.Sub(start).Seconds(), 0)
		}
		if w, ok := wl[wkey{e.Cluster, e.Namespace, e.Kind, e.Name}]; ok && e.Name != "" {
			e.GPUSeconds, e.IdleGPUSeconds = w.GPUSeconds, w.IdleGPUSeconds()
			e.CostMicros, e.IdleCostMicros = w.CostMicros, w.IdleCostMicros
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b LiveEndpoint) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// ReplayGaps plays a policy on the endpoint's gaps: with cooldown C (one
// of ledger.GapBounds) the replica is down for every gap's part beyond C,
// less twice the model's load after each such gap: once for the load
// itself (the GPUs are held while it loads), once for the work it delays,
// which runs a load later and so shortens the idle gap after it by up to
// that much (counted in full: the saving is never more than the replay
// gives). A gap whose end falls in an hour of a pre-warm window ends
// warm, with no cold start: it is down from C after its start until the
// pre-warm began (a lower bound: its end is known to the hour), and each
// day's pre-warm loads the model once. The open gap at the window's end is
// down beyond C with no cold start.
//
// The latency figures are upper bounds: the requests that wait for a load
// are, per cold start, those the ledger counted from the endpoint's last
// idle report before the gap's end to the smallest of ledger.WakeBounds at
// or past the load after it (vLLM's finished requests and those in
// flight, at scrape resolution). The p95 extra latency is 0 when they are
// at most 5% of the requests, else the load. Where a cold start's gap has
// no count (rows from before the ledger kept them, an endpoint that
// stopped reporting, a load longer than the longest bound, or an endpoint
// known from GPU activity alone, with no request counts) every request is
// counted as waiting. So is every request where a gap that may have been
// longer than the cooldown has no count (an endpoint back after being
// away, whose gap is known only by its longest length): it may have made
// a request wait, though its cold start is not in the count.
//
// Per-day figures are over the days the endpoint reported.
func ReplayGaps(e *LiveEndpoint, p Policy, cs ColdStart, priceMicrosPerGPUHour int64) Outcome {
	gpus := cs.GPUsPerReplica
	o := Outcome{Policy: p, AlwaysOnGPUHours: e.ReportedSeconds / 3600 * gpus, Days: float64(max(e.Days, 1)), Requests: e.Requests}
	// warmFrom[h] is, for an hour of the day in a pre-warm window, when
	// the window starts (seconds into the day); -1 outside them.
	var warmFrom [24]float64
	for h := range warmFrom {
		warmFrom[h] = -1
	}
	for _, w := range p.PreWarm {
		for h := w.From / time.Hour; h < (w.To+time.Hour-1)/time.Hour && h < 24; h++ {
			warmFrom[h] = w.From.Seconds()
		}
	}
	c := p.Cooldown.Seconds()
	load := cs.Load.Seconds()
	wake, bounded := ledger.WakeIndex(load)
	bounded = bounded && !e.FromGPUActivity()
	var downSec, waiting float64
	// away: a gap that may have been longer than C has no count, and
	// no cold start of its own in the buckets: an endpoint back after
	// being away (scaled to zero: only its longest length is known).
	away := false
	for h := range e.GapsByHour {
		if warmFrom[h] < 0 {
			n, beyond := e.GapsByHour[h].Over(c)
			o.ColdStarts += int(n)
			downSec += beyond - 2*float64(n)*load
			if n > 0 && bounded {
				w, unmeasured := e.GapsByHour[h].WokenOver(c, wake)
				waiting += w
				bounded = unmeasured == 0
			} else if n == 0 {
				if _, unmeasured := e.GapsByHour[h].WokenOver(c, wake); unmeasured > 0 {
					away, bounded = true, false
				}
			}
			continue
		}
		// A gap that ended in a pre-warm window's hour h was down from C
		// after its start until the pre-warm's load began: at least
		// its length less C and less offset (its end at the latest at
		// h+1). At the smallest bucket bound B at or above C + offset,
		// each longer gap is down at least (g − B) + (B − C − offset);
		// shorter ones are counted as never down.
		offset := float64(h+1)*3600 - warmFrom[h] + load
		b := ledger.GapBounds[len(ledger.GapBounds)-1]
		for _, x := range ledger.GapBounds {
			if x >= c+offset {
				b = x
				break
			}
		}
		n, beyond := e.GapsByHour[h].Over(b)
		downSec += max(beyond+float64(n)*(b-c-offset), 0)
	}
	if len(p.PreWarm) > 0 {
		downSec -= float64(e.Days) * float64(len(p.PreWarm)) * load
	}
	downSec += max(e.OpenGap-c, 0)
	downSec = max(downSec, 0)
	o.SavedGPUHours = downSec / 3600 * gpus
	o.HeldGPUHours = o.AlwaysOnGPUHours - o.SavedGPUHours
	o.ColdStartsPerDay = float64(o.ColdStarts) / o.Days
	o.LatencyBound = true
	if o.ColdStarts > 0 || away {
		requests := e.Requests
		if !bounded || requests <= 0 {
			o.AffectedRequests = requests
			o.P95ExtraLatency = cs.Load
		} else {
			o.AffectedRequests = min(waiting, requests)
			if o.AffectedRequests > 0.05*requests {
				o.P95ExtraLatency = cs.Load
			}
		}
	}
	o.NetSavingMicros = int64(math.Round(o.SavedGPUHours*float64(priceMicrosPerGPUHour))) - int64(o.ColdStarts)*cs.PenaltyMicros
	return o
}

// RecommendLive is Recommend on an endpoint's live gaps: every cooldown,
// with and without a pre-warm schedule when its traffic has a daily
// rhythm, the largest net saving within maxP95 (negative: any latency); an
// endpoint where none saves money keeps a replica.
func RecommendLive(e *LiveEndpoint, cs ColdStart, priceMicrosPerGPUHour int64, maxP95 time.Duration) ScaleToZero {
	rec := ScaleToZero{Endpoint: e.ID(), ColdStart: cs, Default: ReplayGaps(e, Policy{Cooldown: KEDADefaultCooldown}, cs, priceMicrosPerGPUHour)}
	pre := liveRhythm(e)
	rec.Periodic = len(pre) > 0
	// Cooldowns are ledger.GapBounds (TestCooldownsAreGapBounds): the
	// replay on the buckets is exact at each.
	rec.choose(Cooldowns, pre, e.To.Sub(e.From), maxP95, func(p Policy) Outcome { return ReplayGaps(e, p, cs, priceMicrosPerGPUHour) })
	return rec
}

// liveRhythm is preWarm's rule on the ledger's hours: the hours of the day
// busy on at least 90% of the days, when another hour was busy on at most
// half of them, over at least 7 days.
func liveRhythm(e *LiveEndpoint) []DailyWindow {
	if e.Days < 7 {
		return nil
	}
	var busy [24]bool
	quiet := false
	for h := range 24 {
		f := float64(e.ActiveDays[h]) / float64(e.Days)
		busy[h] = f >= 0.9
		quiet = quiet || f <= 0.5
	}
	if !quiet {
		return nil
	}
	return dailyWindows(busy)
}

// dailyWindows turns busy hours of the day into windows.
func dailyWindows(busy [24]bool) []DailyWindow {
	var out []DailyWindow
	for h := 0; h < 24; h++ {
		if !busy[h] {
			continue
		}
		from := h
		for h < 24 && busy[h] {
			h++
		}
		out = append(out, DailyWindow{time.Duration(from) * time.Hour, time.Duration(h) * time.Hour})
	}
	return out
}

// SLAClass is what a cold start costs the endpoints of its namespaces:
// the penalty for one slow first answer, and the p95 extra latency they
// allow (negative: any).
type SLAClass struct {
	Name          string
	Namespaces    []string
	PenaltyMicros int64
	MaxP95        time.Duration
}

// EndpointOptions are what a cold start costs the live endpoints: a
// model's load time by its name (else Default's), the penalty per cold
// start and the SLA on the p95 extra latency (negative: none) of the
// endpoint's SLA class (by namespace; else PenaltyMicros and MaxP95), and
// the price of a GPU-hour where the ledger has none for the endpoint's
// workload.
type EndpointOptions struct {
	Classes       []SLAClass
	Loads         map[string]time.Duration
	Default       time.Duration
	PenaltyMicros int64
	PriceMicros   int64
	MaxP95        time.Duration
	// GPUActivity replays every serving workload's timeline from its
	// GPUs' activity, also where vLLM's series give a better one: to
	// compare the two.
	GPUActivity bool
}

// DefaultEndpointOptions: a 2-minute load, 0.50 a cold start, an
// on-demand H100's 6.88 a GPU-hour, no request at the p95 waiting.
var DefaultEndpointOptions = EndpointOptions{Default: 2 * time.Minute, PenaltyMicros: 500_000, PriceMicros: 6_880_000}

// EndpointAdvice is one live endpoint's recommendation.
type EndpointAdvice struct {
	LiveEndpoint
	Rec ScaleToZero
	// Class is the endpoint's SLA class; empty for the default.
	Class string
	// PriceMicros is the GPU-hour's price it was replayed at.
	PriceMicros int64
}

// EvaluateEndpoints recommends for every endpoint of [from, to) in the
// ledger (one cluster, or every one when empty). It also returns the
// serving workloads (Deployments' ReplicaSets, LeaderWorkerSets) that held
// GPUs without vLLM's series, summed over the window: what DCGM says they
// held idle, with no replay.
func EvaluateEndpoints(ctx context.Context, store ledger.Store, cluster string, from, to time.Time, o EndpointOptions) ([]EndpointAdvice, []ledger.WorkloadRow, error) {
	rows, err := store.EndpointHours(ctx, cluster, from, to)
	if err != nil {
		return nil, nil, err
	}
	wls, err := store.TopWorkloads(ctx, ledger.Query{From: from, To: to, Cluster: cluster}, 1_000_000)
	if err != nil {
		return nil, nil, err
	}
	matched := map[[4]string]bool{}
	var out []EndpointAdvice
	if o.GPUActivity {
		rows = slices.DeleteFunc(rows, func(r ledger.EndpointRow) bool { return r.Model != "" })
	}
	for _, e := range LiveEndpoints(rows, wls, from, to) {
		matched[[4]string{e.Cluster, e.Namespace, e.Kind, e.Name}] = true
		class, penalty, maxP95 := "", o.PenaltyMicros, o.MaxP95
		for _, c := range o.Classes {
			if slices.Contains(c.Namespaces, e.Namespace) {
				class, penalty, maxP95 = c.Name, c.PenaltyMicros, c.MaxP95
				break
			}
		}
		cs := ColdStart{Load: o.Default, PenaltyMicros: penalty, GPUsPerReplica: 1}
		if l, ok := o.Loads[e.Model]; ok {
			cs.Load = l
		}
		if g := e.GPUsPerReplica(); g > 0 {
			cs.GPUsPerReplica = g
		}
		price := e.PriceMicrosPerGPUHour()
		if price <= 0 {
			price = o.PriceMicros
		}
		out = append(out, EndpointAdvice{LiveEndpoint: e, Rec: RecommendLive(&e, cs, price, maxP95), PriceMicros: price, Class: class})
	}
	var other []ledger.WorkloadRow
	for _, w := range wls {
		if ledger.IsServingKind(w.Kind) && !matched[[4]string{w.Cluster, w.Namespace, w.Kind, w.Name}] {
			other = append(other, w)
		}
	}
	return out, other, nil
}
