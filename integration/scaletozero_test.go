package integration

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
)

// request is one request of a trace: when it came, and how long the
// model server took to answer it.
type request struct{ at, service time.Duration }

// TestScaleToZeroBoundOnArrivals: requests of bursty traces become the
// vLLM series a scrape every 15 s sees (requests running, finished,
// tokens), go through attribution into the ledger's endpoint rows, and
// scale-to-zero's replay on those rows is played against a replay on the
// requests themselves, for every cooldown and three model loads. The
// ledger's count of requests that wait for a load is never below the
// requests' own, and where it prints a p95 of 0 at most 5% of the requests
// waited. The same holds with a gateway's counter of arriving requests
// (gpuledger_endpoint_arrivals_total, scraped every 15 s beside vLLM's),
// whose counts are the ledger's where it has them; and with the model
// server gone (scaled to zero, its series with it) from 5 minutes after
// each request until the next, where only the gateway measures the gaps:
// without it every request of such a gap counts as waiting. The traces: three seeds of bursts (1 to 40 requests a burst,
// bursts from 20 s to 4 h apart) over 14 days; GPULEDGER_ARRIVALS adds
// a CSV trace (Azure's LLM inference traces' TIMESTAMP,ContextTokens,
// GeneratedTokens), stretched GPULEDGER_ARRIVALS_STRETCH times.
func TestScaleToZeroBoundOnArrivals(t *testing.T) {
	traces := map[string][]request{}
	for seed := uint64(1); seed <= 3; seed++ {
		traces[fmt.Sprintf("bursty seed %d", seed)] = burstyTrace(seed, 14*24*time.Hour)
	}
	if p := os.Getenv("GPULEDGER_ARRIVALS"); p != "" {
		stretch := 1.0
		if s := os.Getenv("GPULEDGER_ARRIVALS_STRETCH"); s != "" {
			var err error
			if stretch, err = strconv.ParseFloat(s, 64); err != nil || !(stretch > 0) {
				t.Fatalf("GPULEDGER_ARRIVALS_STRETCH %q; want a positive number", s)
			}
		}
		tr, err := readTrace(p, stretch)
		if err != nil {
			t.Fatal(err)
		}
		traces[p] = tr
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range traces {
			if !yield(k) {
				return
			}
		}
	}) {
		tr := traces[name]
		from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		span := (tr[len(tr)-1].at + time.Hour).Truncate(time.Hour)
		sources := []struct {
			name    string
			gateway bool
			gone    time.Duration
		}{
			{"vLLM's series", false, 0},
			{"gateway arrivals", true, 0},
			{"vLLM's series, server at zero after 5 min", false, 5 * time.Minute},
			{"gateway arrivals, server at zero after 5 min", true, 5 * time.Minute},
		}
		eps := make([]capacity.LiveEndpoint, len(sources))
		for i, src := range sources {
			got := capacity.LiveEndpoints(endpointRowsOf(t, tr, from, span, src.gateway, src.gone), nil, from, from.Add(span))
			if len(got) != 1 {
				t.Fatalf("%s, %s: %d endpoints; want 1", name, src.name, len(got))
			}
			eps[i] = got[0]
		}
		for _, load := range []time.Duration{30 * time.Second, 2 * time.Minute, 5 * time.Minute} {
			cs := capacity.ColdStart{Load: load, GPUsPerReplica: 1}
			ratios := make([][]float64, len(sources))
			for _, c := range capacity.Cooldowns {
				p := capacity.Policy{Cooldown: c}
				waited := replayRequests(tr, c, load)
				for i, src := range sources {
					live := capacity.ReplayGaps(&eps[i], p, cs, 1_000_000)
					if live.AffectedRequests < waited {
						t.Errorf("%s, %s, load %s, cooldown %s: the ledger bounds the waiting requests at %g; %g waited", name, src.name, load, c, live.AffectedRequests, waited)
					}
					if live.P95ExtraLatency == 0 && waited > 0.05*float64(len(tr)) {
						t.Errorf("%s, %s, load %s, cooldown %s: the ledger's p95 is 0, yet %.2f%% of requests waited", name, src.name, load, c, 100*waited/float64(len(tr)))
					}
					if waited > 0 {
						ratios[i] = append(ratios[i], live.AffectedRequests/waited)
					}
				}
			}
			for i, src := range sources {
				r := ratios[i]
				slices.Sort(r)
				if len(r) > 0 {
					t.Logf("%s, %s, load %s: %d requests; bound / waited over the cooldowns: min %.2f, median %.2f, max %.2f", name, src.name, load, len(tr),
						r[0], r[len(r)/2], r[len(r)-1])
				}
			}
			// With the server gone in the long gaps, vLLM's series know
			// nothing of them (every request counts as waiting at the
			// cooldowns they may exceed); the gateway's arrivals still
			// count them.
			if a, b := ratios[2], ratios[3]; len(a) != len(b) || len(a) > 0 && b[len(b)/2] >= a[len(a)/2] {
				t.Errorf("%s, load %s: with the server at zero the gateway's bound / waited has median %.3f, vLLM's %.3f; want the gateway's tighter", name, load, b[len(b)/2], a[len(a)/2])
			}
		}
	}
}

// replayRequests plays a cooldown and a model load on the requests
// themselves, the replica up at the first: the one that comes c or more
// after the last one finished (the model server idle since: what KEDA's
// HTTP add-on and an in-flight trigger see) waits for the load, as do
// those that come during it; each runs when the model is up, for its
// service time. It returns how many requests waited.
func replayRequests(tr []request, c, load time.Duration) float64 {
	var waited float64
	readyAt, lastEnd := time.Duration(0), tr[0].at
	for _, r := range tr {
		if r.at >= lastEnd+c && r.at >= readyAt {
			readyAt = r.at + load
		}
		start := max(r.at, readyAt)
		if start > r.at {
			waited++
		}
		lastEnd = max(lastEnd, start+r.service)
	}
	return waited
}

// burstyTrace draws bursts of 1 to 40 requests (about a second apart,
// each served in 2 to 20 s), the bursts from 20 s to 4 h apart
// (log-uniform), over span.
func burstyTrace(seed uint64, span time.Duration) []request {
	rng := rand.New(rand.NewPCG(seed, 0xb0057))
	var out []request
	at := time.Duration(0)
	for {
		at += time.Duration(20 * math.Exp(rng.Float64()*math.Log(4*3600/20.0)) * float64(time.Second))
		if at >= span {
			return out
		}
		n := 1 + int(rng.ExpFloat64()*8)%40
		t := at
		for range n {
			out = append(out, request{at: t, service: time.Duration((2 + 18*rng.Float64()) * float64(time.Second))})
			t += time.Duration(rng.ExpFloat64() * float64(time.Second))
		}
		at = t
	}
}

// readTrace reads TIMESTAMP,ContextTokens,GeneratedTokens, times from the
// first request's, stretched; a request's service time is 20 ms a
// generated token and 50 µs a context token.
func readTrace(path string, stretch float64) ([]request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out []request
	var t0 time.Time
	for line := 1; sc.Scan(); line++ {
		if line == 1 {
			continue
		}
		fl := strings.Split(sc.Text(), ",")
		if len(fl) != 3 {
			return nil, fmt.Errorf("%s:%d: %d fields; want TIMESTAMP,ContextTokens,GeneratedTokens", path, line, len(fl))
		}
		ts, err := time.Parse("2006-01-02 15:04:05.9999999", fl[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: TIMESTAMP: %w", path, line, err)
		}
		ctx, err1 := strconv.Atoi(fl[1])
		gen, err2 := strconv.Atoi(fl[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: token counts %q, %q; want integers", path, line, fl[1], fl[2])
		}
		if t0.IsZero() {
			t0 = ts
		}
		out = append(out, request{at: time.Duration(float64(ts.Sub(t0)) * stretch),
			service: time.Duration(float64(gen)*20e6 + float64(ctx)*50e3)})
	}
	slices.SortFunc(out, func(a, b request) int { return int(a.at - b.at) })
	return out, sc.Err()
}

// endpointRowsOf scrapes the trace's vLLM series every 15 s, from one
// pod, as text exposition through ingest's parser into an Attributor, and
// returns its endpoint rows; with gateway,
// a gateway's counter of the requests that arrived too, scraped 5 s after
// the pod. With gone, the pod is away (scaled to zero: it reports nothing)
// from gone after a request ended until the next request comes.
func endpointRowsOf(t *testing.T, tr []request, from time.Time, span time.Duration, gateway bool, gone time.Duration) []ledger.EndpointRow {
	t.Helper()
	a, err := attribution.New(&attribution.Model{Cluster: "c1"}, attribution.Options{StartMs: from.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]time.Duration, len(tr))
	for i, r := range tr {
		ends[i] = r.at + r.service
	}
	slices.Sort(ends)
	var arrived, finished int
	var p ingest.Parser
	for at := time.Duration(0); at <= span; at += 15 * time.Second {
		for arrived < len(tr) && tr[arrived].at <= at {
			arrived++
		}
		for finished < len(ends) && ends[finished] <= at {
			finished++
		}
		ms := from.Add(at).UnixMilli()
		away := gone > 0 && arrived == finished && finished > 0 && ends[finished-1]+gone < at && (arrived == len(tr) || tr[arrived].at > at)
		if !away {
			const l = `{engine="0",model_name="model",namespace="serve",pod="server-0"}`
			body := fmt.Sprintf("vllm:num_requests_running%s %d\nvllm:num_requests_waiting%s 0\n"+
				"vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"model\",namespace=\"serve\",pod=\"server-0\"} %d\n"+
				"vllm:generation_tokens_total%s %d\n", l, arrived-finished, l, finished, l, 50*finished)
			if err := p.ParseExposition([]byte(body), ms, a); err != nil {
				t.Fatal(err)
			}
		}
		if gateway {
			n := arrived
			for n < len(tr) && tr[n].at <= at+5*time.Second {
				n++
			}
			body := fmt.Sprintf("gpuledger_endpoint_arrivals_total{model_name=\"model\",namespace=\"serve\",pod=\"epp-0\"} %d\n", n)
			if err := p.ParseExposition([]byte(body), ms+5000, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := p.Stats(); st.Invalid != 0 || st.MissingLabels != 0 || st.Skipped != 0 {
		t.Fatalf("parse: %+v; want every sample read", st)
	}
	a.CloseEndpoints()
	a.Emit(from.Add(span).UnixMilli())
	return a.EndpointRows()
}
