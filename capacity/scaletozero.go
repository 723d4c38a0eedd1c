package capacity

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scale-to-zero: an inference endpoint that holds GPUs all night with no
// traffic can scale to zero replicas and load its model again when a
// request comes (a cold start: the request waits for the load, and the
// GPUs are held while loading). Whether that pays, and how long to keep a
// replica after the last request (KEDA's cooldownPeriod), follows from the
// endpoint's own gaps between requests, replayed against the cold-start
// cost.

// Window is one window of an endpoint's traffic: its request count and the
// distribution fitted to its inter-arrival times (ServeGen's 600 s
// windows: Gamma or Weibull, by shape and scale).
type Window struct {
	Start        time.Duration
	Requests     int
	Pattern      byte // 'G' (Gamma) or 'W' (Weibull)
	Shape, Scale float64
}

// Endpoint is one inference endpoint's traffic over Span.
type Endpoint struct {
	Name    string
	Windows []Window
	Span    time.Duration
}

// ServeGenWindow is the length of ServeGen's windows.
const ServeGenWindow = 600 * time.Second

// ParseServeGen reads ServeGen's per-client windows (the header
// client_id,window_start_s,requests,cv,pattern,shape,scale; a window absent
// had no request) as one endpoint per client, named model/client. Every
// endpoint spans whole days, up to the last window of the file.
func ParseServeGen(r io.Reader, model string) ([]Endpoint, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	byClient := map[string]*Endpoint{}
	var order []string
	var last time.Duration
	const header = "client_id,window_start_s,requests,cv,pattern,shape,scale"
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if text != header {
				return nil, fmt.Errorf("line 1: header %q; want %q", text, header)
			}
			continue
		}
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: %d fields; want 7 (%s)", line, len(f), header)
		}
		start, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || start < 0 || start%int64(ServeGenWindow/time.Second) != 0 {
			return nil, fmt.Errorf("line %d: window_start_s %q; want a non-negative multiple of 600", line, f[1])
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("line %d: requests %q; want a non-negative integer", line, f[2])
		}
		if f[4] != "G" && f[4] != "W" {
			return nil, fmt.Errorf("line %d: pattern %q; want G (Gamma) or W (Weibull)", line, f[4])
		}
		shape, err := strconv.ParseFloat(f[5], 64)
		if err != nil || !(shape > 0) || math.IsInf(shape, 0) {
			return nil, fmt.Errorf("line %d: shape %q; want a positive number", line, f[5])
		}
		scale, err := strconv.ParseFloat(f[6], 64)
		if err != nil || !(scale > 0) || math.IsInf(scale, 0) {
			return nil, fmt.Errorf("line %d: scale %q; want a positive number", line, f[6])
		}
		if f[0] == "" {
			return nil, fmt.Errorf("line %d: client_id is empty", line)
		}
		ep := byClient[f[0]]
		if ep == nil {
			ep = &Endpoint{Name: model + "/" + f[0]}
			byClient[f[0]] = ep
			order = append(order, f[0])
		}
		w := Window{Start: time.Duration(start) * time.Second, Requests: n, Pattern: f[4][0], Shape: shape, Scale: scale}
		if k := len(ep.Windows); k > 0 && ep.Windows[k-1].Start >= w.Start {
			return nil, fmt.Errorf("line %d: window_start_s %d of client %s is not after its previous window", line, start, f[0])
		}
		ep.Windows = append(ep.Windows, w)
		last = max(last, w.Start)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("empty: want the header %q and windows", header)
	}
	span := (last + ServeGenWindow + 24*time.Hour - 1).Truncate(24 * time.Hour)
	out := make([]Endpoint, 0, len(order))
	for _, c := range order {
		ep := byClient[c]
		ep.Span = span
		out = append(out, *ep)
	}
	return out, nil
}

// Arrival is one request time, or, in a window too busy to draw request by
// request, a point standing for Weight requests.
type Arrival struct {
	At     time.Duration
	Weight float64
}

// denseWindow: a window with more requests than this (a mean gap under
// 0.3 s) is drawn as densePoints evenly spaced points (10 s apart), each
// standing for its share of the requests: no gap inside it can reach a
// cooldown, and a wait for a load is known to 10 s.
const (
	denseWindow = 2000
	densePoints = 60
)

// Arrivals draws the endpoint's request times, in order: in each window,
// inter-arrival gaps from its fitted distribution, rescaled so that its
// requests fall inside it (the shape, and so the burstiness, is kept).
func Arrivals(ep Endpoint, seed uint64) []Arrival {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Arrival
	for _, w := range ep.Windows {
		n := w.Requests
		if n == 0 {
			continue
		}
		if n > denseWindow {
			for i := range densePoints {
				out = append(out, Arrival{At: w.Start + time.Duration((float64(i)+0.5)/densePoints*float64(ServeGenWindow)), Weight: float64(n) / densePoints})
			}
			continue
		}
		gaps := make([]float64, n+1)
		var sum float64
		for i := range gaps {
			gaps[i] = draw(rng, w.Pattern, w.Shape)
			sum += gaps[i]
		}
		var c float64
		for i := range n {
			c += gaps[i]
			out = append(out, Arrival{At: w.Start + time.Duration(c/sum*float64(ServeGenWindow)), Weight: 1})
		}
	}
	return out
}

// draw is a gap from Gamma(shape, 1) or Weibull(shape, 1); the scale does
// not matter once the gaps are rescaled to the window.
func draw(rng *rand.Rand, pattern byte, shape float64) float64 {
	if pattern == 'W' {
		return math.Pow(-math.Log(1-rng.Float64()), 1/shape)
	}
	return gamma(rng, shape)
}

// gamma draws Gamma(a, 1) by Marsaglia and Tsang's method (for a < 1,
// Gamma(a+1) × U^(1/a)).
func gamma(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		u := 1 - rng.Float64()
		return gamma(rng, a+1) * math.Pow(u, 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// ColdStart is what a cold start costs an endpoint: the seconds its model
// takes to load (the first request waits that long, and the GPUs are held
// meanwhile) and a penalty per cold start for the latency (by SLA class).
type ColdStart struct {
	Load          time.Duration
	PenaltyMicros int64
	// GPUsPerReplica is in whole-GPU equivalents: 3/7 for a 3g.40gb
	// MIG slice.
	GPUsPerReplica float64
}

// Policy is a scale-to-zero setting: keep the replica Cooldown after the
// last request (KEDA's cooldownPeriod), and warm through PreWarm (daily
// windows, time of day).
type Policy struct {
	Cooldown time.Duration
	PreWarm  []DailyWindow
}

// DailyWindow is a span of the day, [From, To), UTC.
type DailyWindow struct{ From, To time.Duration }

// String writes the window as 08:00-18:00.
func (w DailyWindow) String() string {
	return fmt.Sprintf("%02d:00-%02d:00", int(w.From.Hours()), int(w.To.Hours()))
}

// Outcome is what a policy gives an endpoint over its span.
type Outcome struct {
	Policy Policy
	// AlwaysOnGPUHours is one replica held all the span; HeldGPUHours
	// what the policy holds (loads included); Saved the difference.
	AlwaysOnGPUHours, HeldGPUHours, SavedGPUHours float64
	ColdStarts                                    int
	ColdStartsPerDay                              float64
	// Days is the span's length in days.
	Days float64
	// P95ExtraLatency is the 95th percentile of what the requests wait
	// for a model to load; AffectedRequests how many waited at all.
	P95ExtraLatency  time.Duration
	AffectedRequests float64
	Requests         float64
	// LatencyBound says the two figures above are upper bounds (the
	// replay on the ledger's gaps), not the replay's own count (on
	// request times).
	LatencyBound bool
	// NetSavingMicros is the GPU time saved at the price, less the
	// cold starts' penalties.
	NetSavingMicros int64
}

type interval struct{ from, to time.Duration }

// Replay plays the arrivals against a policy.
func Replay(arr []Arrival, span time.Duration, p Policy, cs ColdStart, priceMicrosPerGPUHour int64) Outcome {
	o := Outcome{Policy: p, AlwaysOnGPUHours: span.Hours() * cs.GPUsPerReplica, Days: span.Hours() / 24}
	pre := preWarmIntervals(p.PreWarm, span, cs.Load)
	// What the requests hold comes in order of start: merged as it comes.
	var held []interval
	hold := func(iv interval) {
		if iv.to <= iv.from {
			return
		}
		if k := len(held) - 1; k >= 0 && iv.from <= held[k].to {
			held[k].to = max(held[k].to, iv.to)
			return
		}
		held = append(held, iv)
	}
	var delays []Arrival // extra latency in At, with weights
	readyAt := time.Duration(-1)
	warmUntil := time.Duration(-1) // the replica is up until then
	for _, a := range arr {
		o.Requests += a.Weight
		if a.At >= warmUntil {
			if ok, ready := inWindows(pre, a.At, cs.Load); ok {
				readyAt = max(readyAt, ready)
			} else {
				o.ColdStarts++
				readyAt = a.At + cs.Load
				hold(interval{a.At, min(readyAt, span)})
			}
		}
		if a.At < readyAt {
			delays = append(delays, Arrival{At: readyAt - a.At, Weight: a.Weight})
			o.AffectedRequests += a.Weight
		}
		start := max(a.At, readyAt)
		hold(interval{start, min(start+p.Cooldown, span)})
		warmUntil = max(warmUntil, start+p.Cooldown)
	}
	o.finish(append(held, pre...), delays, cs, priceMicrosPerGPUHour)
	return o
}

// finish sets what follows from the time held (the union of held) and
// the requests' waits: the GPU-hours held and saved, the cold starts a
// day, the p95 wait and the net saving.
func (o *Outcome) finish(held []interval, delays []Arrival, cs ColdStart, priceMicrosPerGPUHour int64) {
	o.HeldGPUHours = union(held).Hours() * cs.GPUsPerReplica
	o.SavedGPUHours = o.AlwaysOnGPUHours - o.HeldGPUHours
	o.ColdStartsPerDay = float64(o.ColdStarts) / o.Days
	o.P95ExtraLatency = weightedQuantile(delays, o.Requests, 0.95)
	o.NetSavingMicros = int64(math.Round(o.SavedGPUHours*float64(priceMicrosPerGPUHour))) - int64(o.ColdStarts)*cs.PenaltyMicros
}

// union is the length of the union of the intervals.
func union(iv []interval) time.Duration {
	slices.SortFunc(iv, func(a, b interval) int { return int(a.from - b.from) })
	var total time.Duration
	cur := interval{-1, -1}
	for _, x := range iv {
		if x.to <= x.from {
			continue
		}
		if x.from > cur.to {
			total += cur.to - cur.from
			cur = x
			continue
		}
		cur.to = max(cur.to, x.to)
	}
	return total + cur.to - cur.from
}

// weightedQuantile is the q-quantile of values given for some of total
// weight, the rest being 0.
func weightedQuantile(vals []Arrival, total, q float64) time.Duration {
	sort.Slice(vals, func(i, j int) bool { return vals[i].At > vals[j].At })
	above := (1 - q) * total // the weight above the quantile
	var acc float64
	for _, v := range vals {
		acc += v.Weight
		if acc > above {
			return v.At
		}
	}
	return 0
}

// Cooldowns are the cooldowns the recommendation chooses among.
var Cooldowns = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour}

// KEDADefaultCooldown is KEDA's default cooldownPeriod.
const KEDADefaultCooldown = 300 * time.Second

// ScaleToZero is the recommendation for one endpoint.
type ScaleToZero struct {
	Endpoint string
	// MinReplicas is 0 when scaling to zero pays after the cold starts,
	// else 1; Best is the chosen policy's outcome, Default KEDA's default
	// (300 s, no pre-warm) for comparison.
	MinReplicas   int
	Best, Default Outcome
	// Periodic says whether the traffic has busy hours every day (the
	// pre-warm schedule in Best.Policy.PreWarm).
	Periodic bool
	// ColdStart is what a cold start costs the endpoint.
	ColdStart ColdStart
}

// Recommend replays the endpoint's arrivals under every cooldown, with and
// without a pre-warm schedule when its traffic is periodic, and picks the
// largest net saving among the policies whose p95 extra latency is at most
// maxP95 (the endpoint's SLA; negative: any). When none saves money within
// it, the endpoint keeps a replica (MinReplicas 1).
func Recommend(ep Endpoint, arr []Arrival, cs ColdStart, priceMicrosPerGPUHour int64, maxP95 time.Duration) ScaleToZero {
	rec := ScaleToZero{Endpoint: ep.Name, ColdStart: cs, Default: Replay(arr, ep.Span, Policy{Cooldown: KEDADefaultCooldown}, cs, priceMicrosPerGPUHour)}
	pre := preWarm(arr, ep.Span)
	rec.Periodic = len(pre) > 0
	rec.choose(Cooldowns, pre, ep.Span, maxP95, func(p Policy) Outcome { return Replay(arr, ep.Span, p, cs, priceMicrosPerGPUHour) })
	return rec
}

// choose replays every cooldown, with and without the pre-warm windows
// when there are any, and keeps the largest net saving among the policies
// whose p95 extra latency is at most maxP95 (negative: any). When none
// saves money the endpoint keeps a replica all of span: nothing saved,
// nothing waits.
func (rec *ScaleToZero) choose(cooldowns []time.Duration, pre []DailyWindow, span, maxP95 time.Duration, replay func(Policy) Outcome) {
	best := Outcome{NetSavingMicros: math.MinInt64}
	for _, c := range cooldowns {
		policies := []Policy{{Cooldown: c}}
		if len(pre) > 0 {
			policies = append(policies, Policy{Cooldown: c, PreWarm: pre})
		}
		for _, p := range policies {
			o := replay(p)
			if maxP95 >= 0 && o.P95ExtraLatency > maxP95 {
				continue
			}
			if o.NetSavingMicros > best.NetSavingMicros {
				best = o
			}
		}
	}
	rec.Best = best
	if best.NetSavingMicros <= 0 {
		rec.MinReplicas = 1
		rec.Best = Outcome{Policy: Policy{Cooldown: span}, AlwaysOnGPUHours: rec.Default.AlwaysOnGPUHours, HeldGPUHours: rec.Default.AlwaysOnGPUHours,
			Days: rec.Default.Days, Requests: rec.Default.Requests}
	}
}

// preWarm finds the hours of the day in which the endpoint had requests on
// at least 90% of the days, when some other hour had them on at most half:
// traffic with a daily rhythm. It returns them as daily windows (empty
// when the traffic has no rhythm, or under 7 days of it).
func preWarm(arr []Arrival, span time.Duration) []DailyWindow {
	days := int(span / (24 * time.Hour))
	if days < 7 {
		return nil
	}
	active := make([]map[int]bool, 24)
	for h := range active {
		active[h] = map[int]bool{}
	}
	for _, a := range arr {
		active[int(a.At%(24*time.Hour)/time.Hour)][int(a.At/(24*time.Hour))] = true
	}
	var busy [24]bool
	quiet := false
	for h := range 24 {
		f := float64(len(active[h])) / float64(days)
		busy[h] = f >= 0.9
		quiet = quiet || f <= 0.5
	}
	if !quiet {
		return nil
	}
	return dailyWindows(busy)
}

// Request is one request of a per-request log: when it came (from the
// log's start), and how long the model server took to answer it.
type Request struct {
	At, Service time.Duration
}

// RequestLog is a per-request log (a gateway's access log) by endpoint,
// each endpoint's requests in order of arrival, over [Start, Start+Span).
type RequestLog struct {
	Start     time.Time
	Span      time.Duration
	Endpoints map[string][]Request
}

// requestLogHeader is the CSV header ParseRequests reads.
const requestLogHeader = "timestamp,endpoint,service_seconds"

// ParseRequests reads a per-request log as CSV with the header
// timestamp,endpoint,service_seconds: the arrival as RFC 3339 or Unix
// seconds (fractions allowed), the endpoint's name, and the seconds the
// server took to answer. Lines may come in any order. The log spans whole
// days from the first request's UTC midnight.
func ParseRequests(r io.Reader) (RequestLog, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	type raw struct {
		at      time.Time
		service time.Duration
	}
	byEp := map[string][]raw{}
	var first, last time.Time
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if text != requestLogHeader {
				return RequestLog{}, fmt.Errorf("line 1: header %q; want %q", text, requestLogHeader)
			}
			continue
		}
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != 3 {
			return RequestLog{}, fmt.Errorf("line %d: %d fields; want 3 (%s)", line, len(f), requestLogHeader)
		}
		at, err := parseTimestamp(f[0])
		if err != nil {
			return RequestLog{}, fmt.Errorf("line %d: timestamp %q: %w", line, f[0], err)
		}
		if f[1] == "" {
			return RequestLog{}, fmt.Errorf("line %d: endpoint is empty; want the endpoint's name", line)
		}
		sec, err := strconv.ParseFloat(f[2], 64)
		if err != nil || !(sec >= 0) || sec > 7*86400 {
			return RequestLog{}, fmt.Errorf("line %d: service_seconds %q; want seconds from 0 to a week", line, f[2])
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		byEp[f[1]] = append(byEp[f[1]], raw{at, time.Duration(sec * float64(time.Second))})
	}
	if err := sc.Err(); err != nil {
		return RequestLog{}, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(byEp) == 0 {
		return RequestLog{}, fmt.Errorf("no request: want the header %q and a line per request", requestLogHeader)
	}
	start := first.UTC().Truncate(24 * time.Hour)
	log := RequestLog{Start: start, Span: last.Sub(start).Truncate(24*time.Hour) + 24*time.Hour, Endpoints: map[string][]Request{}}
	for ep, rs := range byEp {
		slices.SortStableFunc(rs, func(a, b raw) int { return a.at.Compare(b.at) })
		out := make([]Request, len(rs))
		for i, r := range rs {
			out[i] = Request{At: r.at.Sub(start), Service: r.service}
		}
		log.Endpoints[ep] = out
	}
	return log, nil
}

// parseTimestamp reads RFC 3339 or Unix seconds, with a fraction or not,
// from 2000 to 2100.
func parseTimestamp(s string) (time.Time, error) {
	var t time.Time
	if strings.ContainsAny(s, "-T:") {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}, fmt.Errorf("want RFC 3339 such as 2026-10-01T08:00:00.25Z, or Unix seconds")
		}
	} else {
		sec, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(sec) {
			return time.Time{}, fmt.Errorf("want Unix seconds such as 1790000000.25, or RFC 3339")
		}
		if sec < 946684800 || sec > 4102444800 {
			return time.Time{}, fmt.Errorf("want a time from 2000 to 2100")
		}
		whole := math.Floor(sec)
		t = time.Unix(int64(whole), int64((sec-whole)*1e9))
	}
	if t.Year() < 2000 || t.Year() >= 2100 {
		return time.Time{}, fmt.Errorf("want a time from 2000 to 2100")
	}
	return t.UTC(), nil
}

// ReplayRequests plays a policy on an endpoint's requests exactly: the
// replica is up at the start; a request that comes Cooldown or more after
// the last one ended (the server idle since, as KEDA's HTTP add-on and an
// in-flight trigger see it), outside a pre-warm window, is a cold start:
// it and those that come during the load wait for it, the GPUs held from
// its arrival. Each request runs when the model is up, for its service
// time, so the work a load delays ends that much later and the cooldown
// runs from there.
func ReplayRequests(reqs []Request, span time.Duration, p Policy, cs ColdStart, priceMicrosPerGPUHour int64) Outcome {
	o := Outcome{Policy: p, AlwaysOnGPUHours: span.Hours() * cs.GPUsPerReplica, Days: span.Hours() / 24, Requests: float64(len(reqs))}
	pre := preWarmIntervals(p.PreWarm, span, cs.Load)
	var held []interval
	var delays []Arrival
	upFrom, readyAt, lastEnd := time.Duration(0), time.Duration(0), time.Duration(0)
	for _, r := range reqs {
		if r.At >= lastEnd+p.Cooldown && r.At >= readyAt {
			// Down since lastEnd + Cooldown: up again by a pre-warm
			// window's load, else by this request's.
			held = append(held, interval{upFrom, min(lastEnd+p.Cooldown, span)})
			if ok, ready := inWindows(pre, r.At, cs.Load); ok {
				upFrom, readyAt = r.At, ready
			} else {
				o.ColdStarts++
				upFrom, readyAt = r.At, r.At+cs.Load
			}
		}
		start := max(r.At, readyAt)
		if start > r.At {
			o.AffectedRequests++
			delays = append(delays, Arrival{At: start - r.At, Weight: 1})
		}
		lastEnd = max(lastEnd, start+r.Service)
	}
	held = append(held, interval{upFrom, min(lastEnd+p.Cooldown, span)})
	o.finish(append(held, pre...), delays, cs, priceMicrosPerGPUHour)
	return o
}

// preWarmIntervals are the daily windows over span, each begun a load
// earlier so that the replica is up at From, in order.
func preWarmIntervals(ws []DailyWindow, span, load time.Duration) []interval {
	var pre []interval
	for day := time.Duration(0); day < span; day += 24 * time.Hour {
		for _, w := range ws {
			pre = append(pre, interval{max(day+w.From-load, 0), min(day+w.To, span)})
		}
	}
	sort.Slice(pre, func(i, j int) bool { return pre[i].from < pre[j].from })
	return pre
}

// inWindows says whether t falls in one of the pre-warm intervals, and
// when its replica is up.
func inWindows(pre []interval, t, load time.Duration) (bool, time.Duration) {
	i := sort.Search(len(pre), func(i int) bool { return pre[i].to > t })
	if i < len(pre) && pre[i].from <= t {
		return true, pre[i].from + load
	}
	return false, 0
}

// RecommendRequests is Recommend on an endpoint's logged requests,
// replayed exactly.
func RecommendRequests(name string, reqs []Request, span time.Duration, cs ColdStart, priceMicrosPerGPUHour int64, maxP95 time.Duration) ScaleToZero {
	rec := ScaleToZero{Endpoint: name, ColdStart: cs, Default: ReplayRequests(reqs, span, Policy{Cooldown: KEDADefaultCooldown}, cs, priceMicrosPerGPUHour)}
	arr := make([]Arrival, len(reqs))
	for i, r := range reqs {
		arr[i] = Arrival{At: r.At, Weight: 1}
	}
	pre := preWarm(arr, span)
	rec.Periodic = len(pre) > 0
	rec.choose(Cooldowns, pre, span, maxP95, func(p Policy) Outcome { return ReplayRequests(reqs, span, p, cs, priceMicrosPerGPUHour) })
	return rec
}
