package capacity

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"go.yaml.in/yaml/v3"
)

// TestReplayByHand: two requests an hour apart on a 2-hour span, a
// 60 s load and a 5-minute cooldown: two cold starts, each holding the
// GPU for the load and the cooldown (720 s of 7,200).
func TestReplayByHand(t *testing.T) {
	arr := []Arrival{{At: 0, Weight: 1}, {At: time.Hour, Weight: 1}}
	cs := ColdStart{Load: time.Minute, PenaltyMicros: 100_000, GPUsPerReplica: 2}
	o := Replay(arr, 2*time.Hour, Policy{Cooldown: 5 * time.Minute}, cs, 1_000_000)
	if o.ColdStarts != 2 || o.ColdStartsPerDay != 24 {
		t.Errorf("cold starts %d (%g a day), want 2 (24)", o.ColdStarts, o.ColdStartsPerDay)
	}
	if math.Abs(o.HeldGPUHours-0.4) > 1e-9 || o.AlwaysOnGPUHours != 4 || math.Abs(o.SavedGPUHours-3.6) > 1e-9 {
		t.Errorf("held %g, always on %g, saved %g GPU-hours; want 0.4, 4, 3.6", o.HeldGPUHours, o.AlwaysOnGPUHours, o.SavedGPUHours)
	}
	if o.P95ExtraLatency != time.Minute || o.AffectedRequests != 2 {
		t.Errorf("p95 extra latency %s over %g requests, want 1m over 2", o.P95ExtraLatency, o.AffectedRequests)
	}
	if o.NetSavingMicros != 3_600_000-200_000 {
		t.Errorf("net saving %d, want 3.6 GPU-hours at 1.00 less two penalties of 0.10", o.NetSavingMicros)
	}
	// A cooldown longer than the gap: one cold start, warm through.
	o = Replay(arr, 2*time.Hour, Policy{Cooldown: 2 * time.Hour}, cs, 1_000_000)
	if o.ColdStarts != 1 || math.Abs(o.HeldGPUHours-4) > 1e-9 {
		t.Errorf("2 h cooldown: %d cold starts, held %g", o.ColdStarts, o.HeldGPUHours)
	}
	// Requests during the load wait for its end; the p95 is over all.
	arr = []Arrival{{At: 0, Weight: 1}, {At: 30 * time.Second, Weight: 1}, {At: 10 * time.Minute, Weight: 98}}
	o = Replay(arr, time.Hour, Policy{Cooldown: 15 * time.Minute}, cs, 1_000_000)
	if o.ColdStarts != 1 || o.AffectedRequests != 2 || o.P95ExtraLatency != 0 {
		t.Errorf("%d cold starts, %g affected, p95 %s; want 1, 2, 0 (98 of 100 requests wait for nothing)", o.ColdStarts, o.AffectedRequests, o.P95ExtraLatency)
	}
}

// TestPreWarm: a request at 09:00 every day for 8 days, none at night: a
// daily rhythm; the 09:00 hour is pre-warmed, and with it there is no
// cold start.
func TestPreWarm(t *testing.T) {
	var arr []Arrival
	for d := range 8 {
		arr = append(arr, Arrival{At: time.Duration(d)*24*time.Hour + 9*time.Hour + 10*time.Minute, Weight: 1})
	}
	span := 8 * 24 * time.Hour
	pre := preWarm(arr, span)
	if len(pre) != 1 || pre[0] != (DailyWindow{9 * time.Hour, 10 * time.Hour}) {
		t.Fatalf("pre-warm %v, want 09:00-10:00", pre)
	}
	cs := ColdStart{Load: 2 * time.Minute, GPUsPerReplica: 1}
	o := Replay(arr, span, Policy{Cooldown: time.Minute, PreWarm: pre}, cs, 1)
	if o.ColdStarts != 0 || o.AffectedRequests != 0 {
		t.Errorf("pre-warmed: %d cold starts, %g requests waited", o.ColdStarts, o.AffectedRequests)
	}
	// Held: each day the hour plus the load before it.
	if want := 8 * (62.0 / 60); math.Abs(o.HeldGPUHours-want) > 1e-9 {
		t.Errorf("held %g GPU-hours, want %g", o.HeldGPUHours, want)
	}
	if preWarm(arr[:6], 6*24*time.Hour) != nil {
		t.Error("a rhythm from 6 days")
	}
}

func TestParseServeGenErrors(t *testing.T) {
	const h = "client_id,window_start_s,requests,cv,pattern,shape,scale\n"
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"client,start\n", "line 1: header"},
		{h + "0,601,5,1,G,1,1\n", `line 2: window_start_s "601"; want a non-negative multiple of 600`},
		{h + "0,600,-1,1,G,1,1\n", `line 2: requests "-1"`},
		{h + "0,600,5,1,X,1,1\n", `line 2: pattern "X"; want G (Gamma) or W (Weibull)`},
		{h + "0,600,5,1,W,0,1\n", `line 2: shape "0"; want a positive number`},
		{h + "0,600,5,1,W,1,NaN\n", `line 2: scale "NaN"`},
		{h + "0,600,5,1,W,1\n", "line 2: 6 fields; want 7"},
		{h + "0,1200,5,1,W,1,1\n0,600,5,1,W,1,1\n", "line 3: window_start_s 600 of client 0 is not after its previous window"},
	} {
		if _, err := ParseServeGen(strings.NewReader(tc.in), "m"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	eps, err := ParseServeGen(strings.NewReader(h+"7,0,3,1,G,0.5,2\n7,86400,1,1,W,0.4,3\n9,600,2,1,G,1,1\n"), "m-small")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].Name != "m-small/7" || len(eps[0].Windows) != 2 || eps[0].Span != 48*time.Hour || eps[1].Span != 48*time.Hour {
		t.Fatalf("%+v", eps)
	}
	arr := Arrivals(eps[0], 1)
	if len(arr) != 4 || arr[0].At >= ServeGenWindow || arr[3].At < 24*time.Hour || arr[3].At >= 24*time.Hour+ServeGenWindow {
		t.Errorf("arrivals %v: 3 in the first window, 1 in the second", arr)
	}
}

func FuzzParseServeGen(f *testing.F) {
	f.Add([]byte("client_id,window_start_s,requests,cv,pattern,shape,scale\n0,0,799,8.598,W,0.3753,0.3968\n0,1200,164,6.017,G,0.06042,103.7\n"))
	f.Add([]byte("client_id,window_start_s,requests,cv,pattern,shape,scale\n1,600,1e9,1,G,1,1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := ParseServeGen(bytes.NewReader(b), "m")
		if err != nil {
			return
		}
		for _, ep := range eps {
			if ep.Span <= 0 || len(ep.Windows) == 0 {
				t.Fatalf("endpoint %+v", ep)
			}
			for _, w := range ep.Windows {
				if w.Requests > 10_000 {
					return // drawing them is the costly part, not the parse
				}
			}
			var n int
			for _, w := range ep.Windows {
				n += w.Requests
			}
			if got := len(Arrivals(ep, 1)); got != n && n <= denseWindow {
				t.Fatalf("%d arrivals of %d requests", got, n)
			}
		}
	})
}

// TestServeGenEndpoints: on the real traces, the arrivals keep every
// window's count, and no policy holds more than always-on or saves less
// than nothing by hand of a longer cooldown.
func TestServeGenEndpoints(t *testing.T) {
	b, err := os.ReadFile(testenv.Data(t, "traces/inference-servegen/m-small_windows.csv"))
	if err != nil {
		t.Fatal(err)
	}
	eps, err := ParseServeGen(bytes.NewReader(b), "m-small")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 43 || eps[0].Span != 14*24*time.Hour {
		t.Fatalf("%d endpoints over %s, want 43 over 14 days", len(eps), eps[0].Span)
	}
	cs := ColdStart{Load: 30 * time.Second, PenaltyMicros: 50_000, GPUsPerReplica: 1}
	for _, ep := range eps[:8] {
		arr := Arrivals(ep, 1)
		var want, got float64
		for _, w := range ep.Windows {
			want += float64(w.Requests)
		}
		for _, a := range arr {
			got += a.Weight
		}
		if math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: %g requests drawn, want %g", ep.Name, got, want)
		}
		prevHeld := 0.0
		for _, c := range Cooldowns {
			o := Replay(arr, ep.Span, Policy{Cooldown: c}, cs, 1_000_000)
			if o.HeldGPUHours > o.AlwaysOnGPUHours+1e-9 || o.HeldGPUHours+1e-9 < prevHeld {
				t.Errorf("%s cooldown %s: held %g of %g (shorter cooldown held %g)", ep.Name, c, o.HeldGPUHours, o.AlwaysOnGPUHours, prevHeld)
			}
			prevHeld = o.HeldGPUHours
		}
		r := Recommend(ep, arr, cs, 1_000_000, -1)
		if r.Best.NetSavingMicros < r.Default.NetSavingMicros {
			t.Errorf("%s: the chosen policy saves %d, KEDA's default %d", ep.Name, r.Best.NetSavingMicros, r.Default.NetSavingMicros)
		}
		// Within an SLA of no wait at the p95.
		r = Recommend(ep, arr, cs, 1_000_000, 0)
		if r.Best.P95ExtraLatency > 0 || (r.MinReplicas == 1) != (r.Best.SavedGPUHours == 0) {
			t.Errorf("%s with p95 ≤ 0: %+v", ep.Name, r)
		}
	}
}

// TestKEDAObject: the objects parse as YAML and carry the choice: a
// ScaledObject woken by a request rate from outside the pods, with the
// pre-warm window's cron starting a load early; an HTTPScaledObject
// without a query.
func TestKEDAObject(t *testing.T) {
	rec := ScaleToZero{Endpoint: "m-large/7", MinReplicas: 0, ColdStart: ColdStart{Load: 10 * time.Minute},
		Best: Outcome{Policy: Policy{Cooldown: 15 * time.Minute, PreWarm: []DailyWindow{{7 * time.Hour, 9 * time.Hour}}}, Days: 14}}
	var so struct {
		Kind string
		Spec struct {
			MinReplicaCount int `yaml:"minReplicaCount"`
			CooldownPeriod  int `yaml:"cooldownPeriod"`
			Triggers        []struct {
				Type     string
				Metadata map[string]string
			}
		}
	}
	doc := KEDAObject(rec, KEDATarget{Namespace: "inference", Name: "m-large-7", Prometheus: "http://vm:8428", Query: `sum(rate(req{svc="m-large-7"}[1m]))`, Threshold: 2})
	if err := yaml.Unmarshal([]byte(doc), &so); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if so.Kind != "ScaledObject" || so.Spec.MinReplicaCount != 0 || so.Spec.CooldownPeriod != 900 || len(so.Spec.Triggers) != 2 {
		t.Fatalf("%+v\n%s", so, doc)
	}
	if m := so.Spec.Triggers[0].Metadata; m["query"] != `sum(rate(req{svc="m-large-7"}[1m]))` || m["activationThreshold"] != "0" || m["threshold"] != "2" {
		t.Errorf("prometheus trigger %v", m)
	}
	if m := so.Spec.Triggers[1].Metadata; so.Spec.Triggers[1].Type != "cron" || m["start"] != "50 6 * * *" || m["end"] != "0 9 * * *" {
		t.Errorf("cron trigger %v: want 06:50 (a 10-minute load before 07:00) to 09:00", m)
	}
	var h struct {
		Kind string
		Spec struct {
			Replicas        struct{ Min, Max int }
			ScaledownPeriod int `yaml:"scaledownPeriod"`
		}
	}
	doc = KEDAObject(rec, KEDATarget{Namespace: "inference", Name: "m-large-7", Host: "m.example", Service: "m", Port: 8000})
	if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if h.Kind != "HTTPScaledObject" || h.Spec.Replicas.Min != 0 || h.Spec.Replicas.Max != 1 || h.Spec.ScaledownPeriod != 900 || !strings.Contains(doc, "CronJob") {
		t.Errorf("%+v\n%s", h, doc)
	}
}
