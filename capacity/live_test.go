package capacity

import (
	"context"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// TestReplayGapsMatchesArrivals: on requests 1000, 1600 and 7400 s apart
// in a 12,000 s window, the replay on the ledger's gap buckets gives what
// the request-by-request replay gives, within the model's loads, with one
// cold start fewer (that replay starts with the replica down, so its
// first request is a cold start too).
func TestReplayGapsMatchesArrivals(t *testing.T) {
	cs := ColdStart{Load: 60 * time.Second, GPUsPerReplica: 2, PenaltyMicros: 100_000}
	const price = 4_000_000
	arr := []Arrival{{At: 0, Weight: 1}, {At: 1000 * time.Second, Weight: 1}, {At: 2600 * time.Second, Weight: 1}, {At: 10000 * time.Second, Weight: 1}}
	span := 12000 * time.Second
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	// The ledger's rows: busy at each request, idle between; the last
	// gap still open at the window's end.
	var rows []ledger.EndpointRow
	for h := 0; h < 4; h++ {
		r := ledger.EndpointRow{Hour: from.Add(time.Duration(h) * time.Hour), Cluster: "c1", Namespace: "serve", Model: "llama", Pods: 1,
			ReportedSeconds: 3600, BusySeconds: 30, Requests: 1}
		if h == 3 {
			r.ReportedSeconds = 1200
		}
		rows = append(rows, r)
	}
	// Each gap ended with one request, the only one within 10 minutes.
	gap := func(g *ledger.Gaps, sec float64) {
		g.Add(sec)
		g.AddWoken(ledger.Bucket(sec), []float64{1, 1, 1, 1, 1}, 5)
	}
	gap(&rows[0].Gaps, 1000)
	rows[0].BusySeconds, rows[0].Requests = 90, 3
	gap(&rows[0].Gaps, 1600)
	rows[0].IdleSince = from.Add(2600 * time.Second)
	rows[1].IdleSince, rows[1].BusySeconds, rows[1].Requests = from.Add(2600*time.Second), 0, 0
	gap(&rows[2].Gaps, 7400)
	rows[2].IdleSince = from.Add(10000 * time.Second)
	rows[3].IdleSince, rows[3].BusySeconds, rows[3].Requests = from.Add(10000*time.Second), 0, 0
	eps := LiveEndpoints(rows, nil, from, from.Add(span))
	if len(eps) != 1 {
		t.Fatalf("%d endpoints; want 1", len(eps))
	}
	e := &eps[0]
	if e.OpenGap != 2000 || e.ReportedSeconds != 12000 || e.Requests != 4 {
		t.Fatalf("open gap %g s, reported %g s, %g requests; want 2000, 12000, 4", e.OpenGap, e.ReportedSeconds, e.Requests)
	}
	for _, c := range []time.Duration{30 * time.Second, 300 * time.Second, 900 * time.Second, 3600 * time.Second} {
		p := Policy{Cooldown: c}
		live := ReplayGaps(e, p, cs, price)
		trace := Replay(arr, span, p, cs, price)
		if live.ColdStarts != trace.ColdStarts-1 {
			t.Errorf("cooldown %s: %d cold starts on the gaps, %d on the requests; want one fewer", c, live.ColdStarts, trace.ColdStarts)
		}
		// The load after a cold start delays what follows: the gaps count
		// it against every cold start, twice (the load, and the work it
		// delays), the requests only where a later gap absorbs it; and
		// the requests' replay starts down. The gaps never save more.
		loads := float64(live.ColdStarts + 2)
		if d := trace.SavedGPUHours - live.SavedGPUHours; d < -1e-9 || d > loads*60.0/3600*2+1e-9 {
			t.Errorf("cooldown %s: %.4f GPU-hours saved on the gaps, %.4f on the requests; want at most the requests' and within %g loads (2 GPUs × 60 s each)",
				c, live.SavedGPUHours, trace.SavedGPUHours, loads)
		}
	}
	// 300 s: 3 cold starts, down 700+1300+7100 − 3×2×60 + 1700 s.
	o := ReplayGaps(e, Policy{Cooldown: 300 * time.Second}, cs, price)
	if want := (9100.0 - 360 + 1700) / 3600 * 2; o.ColdStarts != 3 || o.SavedGPUHours != want {
		t.Errorf("300 s: %d cold starts, %g GPU-hours saved; want 3, %g", o.ColdStarts, o.SavedGPUHours, want)
	}
	// Every cold start delays one of 4 requests: p95 waits for the load.
	if o.P95ExtraLatency != 60*time.Second {
		t.Errorf("p95 extra latency %s; want the load, 1m0s", o.P95ExtraLatency)
	}
	rec := RecommendLive(e, cs, price, -1)
	if rec.MinReplicas != 0 || rec.Best.Policy.Cooldown != 30*time.Second {
		t.Errorf("recommended %d replicas, cooldown %s; want 0 and 30 s (the most saved, the latency allowed)", rec.MinReplicas, rec.Best.Policy.Cooldown)
	}
	// Within a p95 of 0 no cooldown scales down (every cold start is a
	// quarter of the requests): the endpoint keeps its replica.
	if rec := RecommendLive(e, cs, price, 0); rec.MinReplicas != 1 {
		t.Errorf("within a zero p95: %d replicas, %+v; want 1", rec.MinReplicas, rec.Best)
	}
}

// TestLiveRhythm: an endpoint busy 8:00-18:00 every day of two weeks gets
// that pre-warm window, and gaps that end in it neither save nor start
// cold under it.
func TestLiveRhythm(t *testing.T) {
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var rows []ledger.EndpointRow
	for d := 0; d < 14; d++ {
		for h := 0; h < 24; h++ {
			r := ledger.EndpointRow{Hour: from.Add(time.Duration(d*24+h) * time.Hour), Cluster: "c1", Namespace: "serve", Model: "m", Pods: 1, ReportedSeconds: 3600}
			if h >= 8 && h < 18 {
				r.BusySeconds, r.Requests = 1800, 100
				r.Gaps.Add(200)
			}
			if h == 8 {
				r.Gaps.Add(14 * 3600) // the night
			}
			rows = append(rows, r)
		}
	}
	eps := LiveEndpoints(rows, nil, from, from.Add(14*24*time.Hour))
	e := &eps[0]
	pre := liveRhythm(e)
	if len(pre) != 1 || pre[0].From != 8*time.Hour || pre[0].To != 18*time.Hour {
		t.Fatalf("pre-warm %v; want 8:00-18:00", pre)
	}
	cs := ColdStart{Load: 120 * time.Second, GPUsPerReplica: 1}
	plain := ReplayGaps(e, Policy{Cooldown: 300 * time.Second}, cs, 1_000_000)
	warm := ReplayGaps(e, Policy{Cooldown: 300 * time.Second, PreWarm: pre}, cs, 1_000_000)
	if plain.ColdStarts != 14 || warm.ColdStarts != 0 {
		t.Errorf("cold starts %d plain, %d pre-warmed; want 14 (one a morning) and 0", plain.ColdStarts, warm.ColdStarts)
	}
	// Plain: each night down 14 h less 300 s, less a load and the work
	// it delays. Pre-warmed:
	// each night down at least until 9:00 less the load and the cooldown
	// (the gap's end is known to its hour), less a pre-warm load a day.
	if want := 14 * (50400 - 300 - 2*120.0) / 3600; plain.SavedGPUHours != want {
		t.Errorf("plain: %g GPU-hours saved; want %g", plain.SavedGPUHours, want)
	}
	if want := (14*(50400-300-3600-120.0) - 14*120) / 3600; warm.SavedGPUHours != want {
		t.Errorf("pre-warmed: %g GPU-hours saved; want %g", warm.SavedGPUHours, want)
	}
}

// TestCooldownsAreGapBounds: the cooldowns chosen among are the ledger's
// gap buckets' bounds, where the replay on the buckets is exact.
func TestCooldownsAreGapBounds(t *testing.T) {
	if len(Cooldowns) != len(ledger.GapBounds) {
		t.Fatalf("%d cooldowns, %d gap bounds", len(Cooldowns), len(ledger.GapBounds))
	}
	for i, c := range Cooldowns {
		if c.Seconds() != ledger.GapBounds[i] {
			t.Errorf("cooldown %d is %s, gap bound %g s", i, c, ledger.GapBounds[i])
		}
	}
}

// TestEvaluateEndpointsPrefersVLLM: a workload with both vLLM's series and
// its GPUs' timeline is replayed on vLLM's (GPUActivity: on its GPUs');
// a serving workload with neither is listed with what DCGM says it held
// idle; a Job is not.
func TestEvaluateEndpointsPrefersVLLM(t *testing.T) {
	ctx := context.Background()
	s := embeddedtest.Open(t)
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var eps []ledger.EndpointRow
	var wls []ledger.WorkloadRow
	for h := 0; h < 24; h++ {
		hour := from.Add(time.Duration(h) * time.Hour)
		v := ledger.EndpointRow{Hour: hour, Cluster: "c1", Namespace: "serve", Model: "llama", Kind: "ReplicaSet", Name: "llama-7d9f8b6c5", Pods: 1,
			ReportedSeconds: 3600, BusySeconds: 600, Requests: 100}
		g := v
		g.Model, g.Requests, g.BusySeconds = "", 0, 3600
		if h == 8 {
			// The night's gap; 3 requests came within 2 minutes of its
			// end, 10 within 10.
			v.Gaps.Add(7 * 3600)
			v.Gaps.AddWoken(len(ledger.GapBounds), []float64{1, 2, 3, 5, 10}, 5)
		}
		eps = append(eps, v, g)
		for _, w := range []ledger.WorkloadRow{{Kind: "ReplicaSet", Name: "llama-7d9f8b6c5"}, {Kind: "LeaderWorkerSet", Name: "big"}, {Kind: "Job", Name: "train"}} {
			w.Hour, w.Cluster, w.Team, w.Namespace, w.GPUSeconds, w.ActiveGPUSeconds, w.CostMicros, w.IdleCostMicros = hour, "c1", "ml", "serve", 3600, 900, 6_880_000, 5_160_000
			wls = append(wls, w)
		}
	}
	if err := s.WriteHours(ctx, nil, wls); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteEndpointHours(ctx, eps); err != nil {
		t.Fatal(err)
	}
	advice, other, err := EvaluateEndpoints(ctx, s, "c1", from, from.AddDate(0, 1, 0), DefaultEndpointOptions)
	if err != nil {
		t.Fatal(err)
	}
	if len(advice) != 1 || advice[0].FromGPUActivity() || advice[0].Rec.MinReplicas != 0 || advice[0].PriceMicros != 6_880_000 || advice[0].Rec.ColdStart.GPUsPerReplica != 1 {
		t.Fatalf("advice %+v; want llama's vLLM endpoint scaled to zero at the workload's price", advice)
	}
	if len(other) != 1 || other[0].Name != "big" {
		t.Errorf("serving workloads without a timeline: %+v; want the LeaderWorkerSet only", other)
	}
	// An interactive class whose cold start costs 100.00: not worth it.
	o := DefaultEndpointOptions
	o.Classes = []SLAClass{{Name: "interactive", Namespaces: []string{"serve"}, PenaltyMicros: 100_000_000}}
	advice, _, err = EvaluateEndpoints(ctx, s, "c1", from, from.AddDate(0, 1, 0), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(advice) != 1 || advice[0].Class != "interactive" || advice[0].Rec.MinReplicas != 1 || advice[0].Rec.ColdStart.PenaltyMicros != 100_000_000 {
		t.Errorf("in the interactive class: %+v; want the class's penalty and a replica kept", advice)
	}
	o = DefaultEndpointOptions
	o.GPUActivity = true
	advice, _, err = EvaluateEndpoints(ctx, s, "c1", from, from.AddDate(0, 1, 0), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(advice) != 1 || !advice[0].FromGPUActivity() || advice[0].ID() != "serve/ReplicaSet/llama-7d9f8b6c5" || advice[0].Rec.MinReplicas != 1 {
		t.Errorf("on GPU activity: %+v; want the workload's GPU timeline (always busy: keep a replica)", advice)
	}
}

// TestReplayGapsLatencyBound: the requests that wait for a load are the
// ledger's count after the gaps a cooldown scales down in, an upper
// bound; where a gap has none (a row from before the ledger kept them, an
// unmeasured gap, a load past the longest window) every request is
// counted as waiting. Per-day figures are over the days reported.
func TestReplayGapsLatencyBound(t *testing.T) {
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	// Two days reported of a 31-day window: a 2-hour gap a day, 5
	// requests within 2 minutes of its end, 30 within 10; 400 a day.
	endpoint := func(mark func(g *ledger.Gaps)) *LiveEndpoint {
		var rows []ledger.EndpointRow
		for d := 0; d < 2; d++ {
			for h := 0; h < 24; h++ {
				r := ledger.EndpointRow{Hour: from.Add(time.Duration(d*24+h) * time.Hour), Cluster: "c1", Namespace: "serve", Model: "m", Pods: 1,
					ReportedSeconds: 3600, BusySeconds: 600, Requests: 16}
				if h == 9 {
					r.Gaps.Add(7200)
					mark(&r.Gaps)
				}
				rows = append(rows, r)
			}
		}
		eps := LiveEndpoints(rows, nil, from, from.AddDate(0, 1, 0))
		return &eps[0]
	}
	measured := endpoint(func(g *ledger.Gaps) { g.AddWoken(ledger.Bucket(7200), []float64{2, 3, 5, 12, 30}, 5) })
	cs := ColdStart{Load: 2 * time.Minute, GPUsPerReplica: 1}
	o := ReplayGaps(measured, Policy{Cooldown: time.Hour}, cs, 1_000_000)
	if o.Days != 2 || o.ColdStarts != 2 || o.ColdStartsPerDay != 1 {
		t.Errorf("%g days, %d cold starts, %g a day; want 2 days (those reported, not the window's 31), 2, 1", o.Days, o.ColdStarts, o.ColdStartsPerDay)
	}
	if o.AffectedRequests != 10 || o.P95ExtraLatency != 0 || !o.LatencyBound {
		t.Errorf("%g requests wait, p95 %s; want at most 10 (5 a cold start, 1.3%%): p95 0, as an upper bound", o.AffectedRequests, o.P95ExtraLatency)
	}
	// A 10-minute load: 30 a cold start wait, 7.8%: the p95 is the load.
	cs.Load = 10 * time.Minute
	if o := ReplayGaps(measured, Policy{Cooldown: time.Hour}, cs, 1_000_000); o.AffectedRequests != 60 || o.P95ExtraLatency != cs.Load {
		t.Errorf("10-minute load: %g wait, p95 %s; want 60 and the load", o.AffectedRequests, o.P95ExtraLatency)
	}
	// A load past the longest window: not bounded, every request waits.
	cs.Load = 15 * time.Minute
	if o := ReplayGaps(measured, Policy{Cooldown: time.Hour}, cs, 1_000_000); o.AffectedRequests != 768 || o.P95ExtraLatency != cs.Load {
		t.Errorf("15-minute load: %g wait, p95 %s; want all 768 and the load", o.AffectedRequests, o.P95ExtraLatency)
	}
	// A cooldown past the gaps: no cold start, nothing waits.
	cs.Load = 2 * time.Minute
	if o := ReplayGaps(measured, Policy{Cooldown: 4 * time.Hour}, cs, 1_000_000); o.ColdStarts != 0 || o.AffectedRequests != 0 {
		t.Errorf("4-hour cooldown: %d cold starts, %g wait; want none", o.ColdStarts, o.AffectedRequests)
	}
	for name, e := range map[string]*LiveEndpoint{
		"unmeasured": endpoint(func(g *ledger.Gaps) { g.AddUnmeasured(ledger.Bucket(7200)) }),
		"old rows": endpoint(func(g *ledger.Gaps) {
			g.Woken, g.Wakes, g.Measured, g.Unmeasured = nil, nil, nil, nil
		}),
	} {
		if o := ReplayGaps(e, Policy{Cooldown: time.Hour}, cs, 1_000_000); o.AffectedRequests != 768 || o.P95ExtraLatency != cs.Load {
			t.Errorf("%s: %g wait, p95 %s; want all 768 and the load", name, o.AffectedRequests, o.P95ExtraLatency)
		}
		if rec := RecommendLive(e, cs, 1_000_000, 0); rec.MinReplicas != 1 {
			t.Errorf("%s: %d replicas within a zero p95; want 1 (its requests are not known)", name, rec.MinReplicas)
		}
	}
}
