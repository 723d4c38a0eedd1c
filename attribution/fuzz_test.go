package attribution

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

// event is one input of a feed: a DCGM sample or a kube-state-metrics fact.
type event struct {
	s *Sample
	p *PodInfo
}

func (e event) timeMs() int64 {
	if e.s != nil {
		return e.s.TimeMs
	}
	return e.p.TimeMs
}

// fuzzPod is a pod of the random feed: where it runs and what it asks for.
type fuzzPod struct {
	ns, pod, queue, node, kind string
	milli                      int64
}

// randomFeed makes a few hours of a cluster: random holders on the DCGM
// series of every device (several at once on a shared GPU), activity,
// energy counters with resets, gaps past the staleness bound, odd values,
// fields missing, exporter pods on relabelled series; and kube-state-metrics
// reporting pods Running or not on a node with GPU requests every 30 s,
// with gaps of its own. DCGM and kube-state-metrics need not agree: the
// invariants hold whatever they say.
func randomFeed(rng *rand.Rand, m *Model) []event {
	pods := []fuzzPod{
		{"research", "a", "training", "n1", KindGPU, 1000},
		{"notebooks", "b", "", "n1", MIGKind("3g.40gb"), 1000},
		{"stray", "c", "", "n2", KindGPU, 1000 * (1 + rng.Int64N(3))},
		{"research", "d", "unknown-queue", "n1", KindGPU, 2000},
		{"notebooks", "e", "", "n1", MIGKind("1g.10gb"), 2000},
		{"gpu-operator", "exporter-x", "", "n1", "", 0},
	}
	var out []event
	for _, g := range m.GPUs {
		profiles := []string{""}
		if len(g.MIG) > 0 {
			profiles = g.MIG
		}
		for i, prof := range profiles {
			inst := ""
			if prof != "" {
				inst = string(rune('1' + i))
			}
			sec := rng.IntN(30)
			energy := rng.Float64() * 1e9
			relabelled := rng.IntN(3) == 0
			for sec < 3*3600 {
				n := rng.IntN(2) // free or one holder
				if g.Replicas > 1 {
					n = rng.IntN(4)
				}
				holders := rng.Perm(len(pods) - 1)[:n]
				if n == 0 {
					holders = []int{-1}
				}
				ts := t0.UnixMilli() + int64(sec)*1000
				energy += rng.Float64() * 1e7
				if rng.IntN(100) == 0 {
					energy = rng.Float64() * 1e6 // counter reset
				}
				for _, hi := range holders {
					var ns, pod, q, ens, epod string
					switch {
					case hi >= 0 && relabelled:
						ns, pod, q, ens, epod = pods[hi].ns, pods[hi].pod, pods[hi].queue, "gpu-operator", "exporter-"+g.Node
					case hi >= 0:
						ns, pod, q = pods[hi].ns, pods[hi].pod, pods[hi].queue
					case relabelled:
						ns, pod = "gpu-operator", "exporter-"+g.Node // a free GPU, relabelled
					}
					for _, f := range []Field{FieldGREngineActive, FieldGPUUtil, FieldPowerUsage, FieldTotalEnergy} {
						if rng.IntN(4) == 0 {
							continue
						}
						v := rng.Float64() * 1.3
						switch f {
						case FieldGPUUtil:
							v *= 100
						case FieldPowerUsage:
							v *= 500
						case FieldTotalEnergy:
							v = energy
						}
						if rng.IntN(50) == 0 {
							v = math.NaN()
						}
						// The scrape job: one renames holders to exported_*,
						// the other does not.
						job := map[bool]string{true: "dcgm-relabelled", false: "dcgm"}[relabelled]
						out = append(out, event{s: &Sample{TimeMs: ts, Node: g.Node, GPU: g.Index, Profile: prof, Instance: inst,
							Namespace: ns, Pod: pod, Queue: q, ExporterNamespace: ens, ExporterPod: epod, Job: job, Field: f, Value: v}})
					}
				}
				sec += 1 + rng.IntN(60)
				if rng.IntN(40) == 0 {
					sec += 600 // a gap past the staleness bound
				}
			}
		}
	}
	for _, p := range pods {
		running := rng.IntN(2) == 0
		for sec := rng.IntN(30); sec < 3*3600; sec += 30 {
			if rng.IntN(60) == 0 {
				running = !running
			}
			if rng.IntN(80) == 0 {
				sec += 600 // kube-state-metrics silent
			}
			ts := t0.UnixMilli() + int64(sec)*1000
			phase := PhaseNotRunning
			if running {
				phase = PhaseRunning
			}
			out = append(out, event{p: &PodInfo{TimeMs: ts, Namespace: p.ns, Pod: p.pod, Phase: phase}},
				event{p: &PodInfo{TimeMs: ts, Namespace: p.ns, Pod: p.pod, Node: p.node, Queue: p.queue, OwnerKind: "Job", OwnerName: "job-" + p.pod}})
			if p.milli > 0 {
				out = append(out, event{p: &PodInfo{TimeMs: ts, Namespace: p.ns, Pod: p.pod, Node: p.node, Container: "main", Kind: p.kind, RequestMilli: p.milli}})
			}
		}
	}
	return out
}

// timeOrder sorts a feed by time, events of one instant in random order.
func timeOrder(rng *rand.Rand, feed []event) []event {
	out := slices.Clone(feed)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	slices.SortStableFunc(out, func(a, b event) int { return cmp.Compare(a.timeMs(), b.timeMs()) })
	return out
}

func feedTo(a *Attributor, ev event) {
	if ev.s != nil {
		s := *ev.s
		a.Add(&s)
		return
	}
	a.AddPod(*ev.p)
}

func primeWith(a *Attributor, ev event) {
	if ev.s != nil {
		s := *ev.s
		a.Prime(&s)
		return
	}
	a.PrimePod(*ev.p)
}

func fuzzModel(rng *rand.Rand) *Model {
	m := testModel()
	m.GPUs = append(m.GPUs, GPU{Node: "n2", Index: "0", Model: "NVIDIA A100-SXM4-80GB", Flavor: "a100",
		Replicas: 1 + rng.IntN(8), SplitByRequest: rng.IntN(2) == 0})
	for i := range m.GPUs {
		m.GPUs[i].RateMicrosPerHour = rng.Int64N(20_000_000)
	}
	m.Unallocated = UnallocatedPolicy(rng.IntN(3))
	m.EnergyPriceMicrosPerKWh = rng.Int64N(500_000)
	m.PUEMicros = 1_000_000 + rng.Int64N(1_000_000)
	m.Quotas[QuotaRef{"cq-research", "a100"}] = rng.Int64N(3 * QuotaUnitsPerGPU)
	m.Quotas[QuotaRef{"cq-research", "h100-mig"}] = rng.Int64N(QuotaUnitsPerGPU)
	return m
}

// FuzzAttribution checks the cost model's invariants on random input:
// every hour sums exactly to the inventory's cost and to the energy's cost,
// nothing is negative, workload rows hold the team rows' held cost; and the
// ledger depends only on the data: not on the order of samples of one
// instant, not on when the caller collects closed hours (how a backfill is
// chunked), and not on a restart at an hour boundary primed with the
// window before it.
func FuzzAttribution(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(42), uint64(7))
	f.Add(uint64(9), uint64(9))
	f.Fuzz(func(t *testing.T, seed, seed2 uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		m := fuzzModel(rng)
		feed := randomFeed(rng, m)
		until := t0.Add(4 * time.Hour).UnixMilli()
		opts := Options{StartMs: t0.UnixMilli()}

		// A: one pass, collected at the end.
		at, err := New(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range timeOrder(rand.New(rand.NewPCG(seed2, 1)), feed) {
			feedTo(at, ev)
		}
		rowsA, wlA := at.Emit(until)

		// B: another order of each instant's events, hours collected at
		// random points.
		bt, _ := New(m, opts)
		crng := rand.New(rand.NewPCG(seed2, 3))
		var rowsB []ledger.Row
		var wlB []ledger.WorkloadRow
		for _, ev := range timeOrder(rand.New(rand.NewPCG(seed2, 2)), feed) {
			feedTo(bt, ev)
			if crng.IntN(500) == 0 {
				r, w := bt.Ready()
				rowsB, wlB = append(rowsB, r...), append(wlB, w...)
			}
		}
		r, w := bt.Emit(until)
		rowsB, wlB = append(rowsB, r...), append(wlB, w...)

		checkReconciles(t, m, rowsA)
		checkEnergyReconciles(t, m, rowsA)
		if diff := gocmp.Diff(rowsA, rowsB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("order of an instant's samples or collection points changed the ledger (-a +b):\n%s", diff)
		}
		if diff := gocmp.Diff(wlA, wlB, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("order of an instant's samples or collection points changed the workload rows (-a +b):\n%s", diff)
		}
		if len(rowsA) == 0 {
			t.Error("no rows")
		}

		// C: a run resumed at an hour the data closed (the feed goes on
		// past the staleness bound after it, as a backfill's checkpoint
		// is), primed with the window before it, writes the hours from
		// there as the whole run did.
		resume := t0.Add(time.Duration(1+crng.IntN(2)) * time.Hour).UnixMilli()
		ct, _ := New(m, Options{StartMs: resume})
		for _, ev := range timeOrder(rand.New(rand.NewPCG(seed2, 4)), feed) {
			switch ms := ev.timeMs(); {
			case ms >= resume:
				feedTo(ct, ev)
			case ms >= resume-opts.PrimeWindowMs():
				primeWith(ct, ev)
			}
		}
		rowsC, wlC := ct.Emit(until)
		after := func(rs []ledger.Row) []ledger.Row {
			return slices.DeleteFunc(slices.Clone(rs), func(r ledger.Row) bool { return r.Hour.UnixMilli() < resume })
		}
		if diff := gocmp.Diff(after(rowsA), rowsC, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("resumed at %s: ledger differs (-whole +resumed):\n%s", time.UnixMilli(resume).UTC().Format(time.RFC3339), diff)
		}
		wlAfter := slices.DeleteFunc(slices.Clone(wlA), func(w ledger.WorkloadRow) bool { return w.Hour.UnixMilli() < resume })
		if diff := gocmp.Diff(wlAfter, wlC, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("resumed: workload rows differ (-whole +resumed):\n%s", diff)
		}

		// D: hours closed by force at random points (a live path's settle),
		// once straight through and once saved with Snapshot and Restored
		// at a random event: the same ledger.
		events := timeOrder(rand.New(rand.NewPCG(seed2, 5)), feed)
		cut := crng.IntN(len(events))
		settle := map[int]int64{}
		for range 3 {
			i := crng.IntN(len(events))
			settle[i] = events[i].timeMs() - int64(crng.IntN(3))*hourMs
		}
		runD := func(snapshotAt int) ([]ledger.Row, []ledger.WorkloadRow) {
			dt, _ := New(m, opts)
			var rows []ledger.Row
			var wls []ledger.WorkloadRow
			for i, ev := range events {
				if i == snapshotAt {
					b, err := dt.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					restored, rep, err := Restore(m, Options{}, b)
					if err != nil || len(rep.DroppedDevices) != 0 {
						t.Fatalf("restore: %v, %+v", err, rep)
					}
					dt = restored
				}
				feedTo(dt, ev)
				if until, ok := settle[i]; ok {
					r, w := dt.Emit(until)
					rows, wls = append(rows, r...), append(wls, w...)
				}
			}
			r, w := dt.Emit(until)
			return append(rows, r...), append(wls, w...)
		}
		rowsD1, wlD1 := runD(-1)
		rowsD2, wlD2 := runD(cut)
		checkReconciles(t, m, rowsD1)
		if diff := gocmp.Diff(rowsD1, rowsD2); diff != "" {
			t.Errorf("snapshot and restore at event %d changed the ledger (-straight +restored):\n%s", cut, diff)
		}
		if diff := gocmp.Diff(wlD1, wlD2); diff != "" {
			t.Errorf("snapshot and restore changed the workload rows (-straight +restored):\n%s", diff)
		}

		// Workload rows hold the same held cost as the team rows.
		var teamHeld, wlCost, wlUnmeasured, teamUnmeasured int64
		for _, r := range rowsA {
			teamHeld += r.CostMicros - r.UnallocatedCostMicros
			teamUnmeasured += r.UnmeasuredCostMicros
		}
		for _, w := range wlA {
			wlCost += w.CostMicros
			wlUnmeasured += w.UnmeasuredCostMicros
			if w.IdleCostMicros < 0 || w.UnmeasuredCostMicros < 0 || w.IdleCostMicros+w.UnmeasuredCostMicros > w.CostMicros {
				t.Errorf("workload row out of bounds: %+v", w)
			}
		}
		if teamHeld != wlCost || teamUnmeasured != wlUnmeasured {
			t.Errorf("workloads cost %d (unmeasured %d), team rows' held cost %d (unmeasured %d)", wlCost, wlUnmeasured, teamHeld, teamUnmeasured)
		}
		// No row is charged to the exporter's own pod.
		for _, w := range wlA {
			if w.Name == "exporter-x" {
				t.Errorf("the exporter pod was charged: %+v", w)
			}
		}
	})
}
