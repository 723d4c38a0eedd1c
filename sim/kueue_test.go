package sim

import (
	"math"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
)

// queueSink keeps the last scrape's queue samples.
type queueSink struct{ last []attribution.QueueSample }

func (s *queueSink) Add(*attribution.Sample)    {}
func (s *queueSink) AddPod(attribution.PodInfo) {}
func (s *queueSink) AddQueue(q *attribution.QueueSample) {
	if !q.Metric.IsEndpoint() {
		s.last = append(s.last, *q)
	}
}

// TestKueueSeries: after a Model.Run, every scrape carries Kueue's queue
// series and the controller's pending ones, and at each scrape they say
// what the run's workload times say: how many wait, for how many GPUs and
// how long, and how many were admitted after which wait.
func TestKueueSeries(t *testing.T) {
	cfg := exampleConfig(t)
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(12 * time.Hour)
	if _, err := m.Run(GenerateMix(cfg, start, end.Sub(start), 1.2, 3), start, end); err != nil {
		t.Fatal(err)
	}
	wls := m.Cluster.Workloads
	if len(wls) == 0 {
		t.Fatal("the run recorded no workload times")
	}
	tel := NewTelemetry(m.Cluster, start, end, time.Minute)
	var p ingest.Parser
	var sawPending, sawWait bool
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		sink := &queueSink{}
		if err := p.ParseExposition(body, at.UnixMilli(), sink); err != nil {
			t.Fatal(err)
		}
		type want struct{ pending, gpus, admitted, over30m, pendingOver30m float64 }
		exp, got := map[string]*want{}, map[string]*want{}
		for _, w := range wls {
			if exp[w.ClusterQueue] == nil {
				exp[w.ClusterQueue], got[w.ClusterQueue] = &want{}, &want{}
			}
			e := exp[w.ClusterQueue]
			switch {
			case w.Submit.After(at):
			case w.Admit.IsZero() || w.Admit.After(at):
				e.pending++
				e.gpus += w.GPUs
				if at.Sub(w.Submit) > 2560*time.Second {
					e.pendingOver30m++
				}
			default:
				e.admitted++
				if w.Admit.Sub(w.Submit) > 2560*time.Second {
					e.over30m++
				}
			}
		}
		for _, q := range sink.last {
			g := got[q.ClusterQueue]
			if g == nil {
				t.Fatalf("series of an unknown queue %q", q.ClusterQueue)
			}
			switch {
			case q.Metric == attribution.QueuePendingWorkloads:
				g.pending += q.Value
			case q.Metric == attribution.QueuePendingGPUs:
				g.gpus += q.Value
			case q.Metric == attribution.QueueAdmissionWait && math.IsInf(q.Le, 1):
				g.admitted += q.Value
				g.over30m += q.Value
			case q.Metric == attribution.QueueAdmissionWait && q.Le == 2560:
				g.over30m -= q.Value
			case q.Metric == attribution.QueuePendingAge && math.IsInf(q.Le, 1):
				g.pendingOver30m += q.Value
			case q.Metric == attribution.QueuePendingAge && q.Le == 2560:
				g.pendingOver30m -= q.Value
			}
		}
		for cq, e := range exp {
			g := got[cq]
			if math.Abs(g.gpus-e.gpus) > 1e-9 || g.pending != e.pending || g.admitted != e.admitted || g.over30m != e.over30m || g.pendingOver30m != e.pendingOver30m {
				t.Fatalf("%s at %s: series say %+v, the run %+v", cq, at.Format(time.TimeOnly), *g, *e)
			}
			sawPending = sawPending || e.pendingOver30m > 0
			sawWait = sawWait || e.over30m > 0
		}
	}
	if !sawPending || !sawWait {
		t.Errorf("no workload waited over 2560 s (pending %v, admitted %v): the load does not test the waits", sawPending, sawWait)
	}
}
