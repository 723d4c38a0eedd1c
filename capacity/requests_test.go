package capacity

import (
	"strings"
	"testing"
	"time"
)

// TestReplayRequestsByHand: a replica idle 60 s after a request's end
// scales down; the next request waits for the 30 s load with the one
// that comes during it, and the work the load delays ends 30 s later, so
// the cooldown runs from there.
func TestReplayRequestsByHand(t *testing.T) {
	s := time.Second
	reqs := []Request{
		{At: 0, Service: 10 * s},      // ends at 10
		{At: 100 * s, Service: 5 * s}, // 90 s idle > 60: cold, up at 130, ends 135
		{At: 110 * s, Service: 5 * s}, // during the load: waits 20 s, ends 135
		{At: 190 * s, Service: 5 * s}, // 55 s after 135: warm (it would be cold without the delay)
		{At: 400 * s, Service: 5 * s}, // cold again: up at 430, ends 435
	}
	cs := ColdStart{Load: 30 * s, GPUsPerReplica: 2, PenaltyMicros: 10_000}
	o := ReplayRequests(reqs, 1000*s, Policy{Cooldown: 60 * s}, cs, 3_600_000)
	if o.ColdStarts != 2 || o.AffectedRequests != 3 || o.Requests != 5 {
		t.Errorf("%d cold starts, %g of %g requests waited; want 2, 3 of 5", o.ColdStarts, o.AffectedRequests, o.Requests)
	}
	// Up 0-70, 100-255, 400-495: 320 s of 1000, on 2 GPUs.
	if want := (1000.0 - 320) / 3600 * 2; abs(o.SavedGPUHours-want) > 1e-12 {
		t.Errorf("saved %g GPU-hours; want %g", o.SavedGPUHours, want)
	}
	// Waits: 30, 20 and 30 s of 5 requests: the 95th percentile waits 30 s.
	if o.P95ExtraLatency != 30*s {
		t.Errorf("p95 %s; want 30s", o.P95ExtraLatency)
	}
	if want := int64(680*2*1000) - 2*10_000; o.NetSavingMicros != want {
		t.Errorf("net %d; want %d", o.NetSavingMicros, want)
	}
	// Within a p95 of 0 no cold start is allowed here (each makes 1 of 5
	// wait): the cooldown that saves the most without one is 5 minutes,
	// down only after the last request.
	if rec := RecommendRequests("e", reqs, 1000*s, cs, 3_600_000, 0); rec.MinReplicas != 0 || rec.Best.ColdStarts != 0 ||
		rec.Best.Policy.Cooldown != 5*time.Minute || rec.Best.P95ExtraLatency != 0 {
		t.Errorf("within a zero p95: %+v; want a 5-minute cooldown, no cold start", rec.Best)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestParseRequests reads a log in any order, RFC 3339 and Unix seconds,
// and names the field and line of what it refuses.
func TestParseRequests(t *testing.T) {
	log, err := ParseRequests(strings.NewReader("timestamp,endpoint,service_seconds\n" +
		"2026-10-02T08:00:10Z,chat/llama,1.5\n" +
		"1790928000.5,chat/llama,2\n" + // 2026-10-02T08:00:00.5Z
		"2026-10-03T23:59:59Z,img/sd,20\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !log.Start.Equal(time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)) || log.Span != 48*time.Hour || len(log.Endpoints) != 2 {
		t.Fatalf("start %s, span %s, %d endpoints; want 2026-10-02, 48h, 2", log.Start, log.Span, len(log.Endpoints))
	}
	chat := log.Endpoints["chat/llama"]
	if len(chat) != 2 || chat[0].At != 8*time.Hour+500*time.Millisecond || chat[1].Service != 1500*time.Millisecond {
		t.Errorf("chat/llama: %+v; want the Unix-seconds one first", chat)
	}
	for _, c := range []struct{ in, want string }{
		{"", "no request"},
		{"time,endpoint,service_seconds\n", "line 1: header"},
		{"timestamp,endpoint,service_seconds\n2026-10-02T08:00:10Z,a\n", "line 2: 2 fields"},
		{"timestamp,endpoint,service_seconds\nyesterday,a,1\n", `line 2: timestamp "yesterday"`},
		{"timestamp,endpoint,service_seconds\n12,a,1\n", "from 2000 to 2100"},
		{"timestamp,endpoint,service_seconds\n2026-10-02T08:00:10Z,,1\n", "endpoint is empty"},
		{"timestamp,endpoint,service_seconds\n2026-10-02T08:00:10Z,a,-1\n", `service_seconds "-1"`},
		{"timestamp,endpoint,service_seconds\n2026-10-02T08:00:10Z,a,NaN\n", `service_seconds "NaN"`},
	} {
		if _, err := ParseRequests(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error saying %q", c.in, err, c.want)
		}
	}
}

func FuzzParseRequests(f *testing.F) {
	f.Add("timestamp,endpoint,service_seconds\n2026-10-02T08:00:10Z,chat/llama,1.5\n1790928000.5,chat/llama,2\n")
	f.Add("timestamp,endpoint,service_seconds\n2099-12-31T23:59:59.999Z,a,604800\n")
	f.Fuzz(func(t *testing.T, in string) {
		log, err := ParseRequests(strings.NewReader(in))
		if err != nil {
			return
		}
		for name, reqs := range log.Endpoints {
			for i, r := range reqs {
				if r.At < 0 || r.At >= log.Span || r.Service < 0 || i > 0 && r.At < reqs[i-1].At {
					t.Fatalf("%s request %d: %+v in a %s log", name, i, r, log.Span)
				}
			}
			o := ReplayRequests(reqs, log.Span, Policy{Cooldown: time.Minute}, ColdStart{Load: time.Minute, GPUsPerReplica: 1}, 1_000_000)
			if o.SavedGPUHours < -1e-9 || o.AffectedRequests > o.Requests || o.ColdStarts > len(reqs) {
				t.Fatalf("%s: %+v", name, o)
			}
		}
	})
}
