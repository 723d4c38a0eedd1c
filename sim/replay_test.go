package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/admission"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// phillyDir is the Philly-derived traces' folder, or the test is skipped
// (failed under CI).
func phillyDir(t testing.TB) string {
	t.Helper()
	return testenv.Data(t, "traces/philly-pcs")
}

// philly loads the VCs with a node count (all but 51b7ef) between from and
// to, every VC's clock starting at its first job.
func philly(t testing.TB, from, to time.Duration) ([]TraceQueue, []TraceJob) {
	t.Helper()
	qs, jobs, err := LoadPhilly(phillyDir(t), PhillyOptions{From: from, To: to, SkipUnlisted: true})
	if err != nil {
		t.Fatal(err)
	}
	return qs, jobs
}

func TestReplayPhilly(t *testing.T) {
	// A day of the densest stretch of the traces.
	qs, jobs := philly(t, 30*24*time.Hour, 31*24*time.Hour)
	if len(qs) != 7 || len(jobs) == 0 {
		t.Fatalf("%d queues, %d jobs", len(qs), len(jobs))
	}
	// A tenth of the quotas: the window's jobs then contend.
	const scale = 0.1
	for _, p := range []string{"fifo", "kueue", "kueue-afs", "costfair"} {
		start := time.Now()
		r, err := Replay(qs, jobs, ReplayOptions{Policy: p, Gating: true, CapacityScale: scale})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-9s jobs %d finished %d avgJCT %.0fs p95 %.0fs util %.3f jain %.3f partial %.1f GPU-h (%s)",
			p, r.Jobs, r.Finished, r.AvgJCTSeconds, r.P95JCTSeconds, r.Utilization, r.Jain, r.PartialGangGPUHours, time.Since(start).Round(time.Millisecond))
		if r.Finished != r.Jobs || r.PartialGangGPUHours != 0 || r.Utilization <= 0 || r.Utilization > 1 {
			t.Errorf("%s: %+v", p, r)
		}
	}
	off, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: false, CapacityScale: scale, Limit: 60 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fifo without gating: finished %d of %d, partial gangs held %.1f GPU-h", off.Finished, off.Jobs, off.PartialGangGPUHours)
	if off.PartialGangGPUHours <= 0 {
		t.Error("without gating no GPU time was held by partial gangs")
	}
	// waitForPodsReady: a gang not ready in 10 minutes gives its GPUs back
	// and comes back after a backoff; partial holds shrink.
	ready, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: false, CapacityScale: scale, Limit: 60 * 24 * time.Hour,
		ReadyTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fifo without gating, 10 min ready timeout: finished %d of %d, partial gangs held %.1f GPU-h, %d evictions",
		ready.Finished, ready.Jobs, ready.PartialGangGPUHours, ready.Evictions)
	if ready.Evictions == 0 || ready.PartialGangGPUHours >= off.PartialGangGPUHours {
		t.Errorf("ready timeout: %d evictions, %.1f partial GPU-h (without: %.1f)", ready.Evictions, ready.PartialGangGPUHours, off.PartialGangGPUHours)
	}
	// Same inputs, same numbers.
	a, _ := Replay(qs, jobs, ReplayOptions{Policy: "costfair", Gating: true, CapacityScale: scale})
	b, _ := Replay(qs, jobs, ReplayOptions{Policy: "costfair", Gating: true, CapacityScale: scale})
	if diff := cmp.Diff(a, b, cmp.AllowUnexported(ReplayResult{})); diff != "" {
		t.Errorf("two runs differ:\n%s", diff)
	}
}

// BenchmarkPhillyPolicies replays the whole Philly trace (85,682 jobs, the
// VCs' real quotas, gangs gated) under Kueue's fair sharing and the
// cost-weighted fair share, with and without preemption, side by side, and
// reports the figures of the admission issue: average and p95 JCT and
// their ratios, Jain over usage/quota (whole run, and hourly over the
// contending queues), finish-time fairness, preemptions and the work they
// threw away, GPU-hours held by partial gangs.
func BenchmarkPhillyPolicies(b *testing.B) {
	qs, jobs := philly(b, 0, 1000*24*time.Hour)
	iso, err := IsolatedJCT(qs, jobs, ReplayOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		for _, preempt := range []bool{false, true} {
			var res [2]ReplayResult
			for k, p := range []string{"kueue", "costfair"} {
				if res[k], err = Replay(qs, jobs, ReplayOptions{Policy: p, Gating: true, Preemption: preempt, Isolated: iso}); err != nil {
					b.Fatal(err)
				}
				r, tag := res[k], p
				if preempt {
					tag += "+preempt"
				}
				b.ReportMetric(r.AvgJCTSeconds, tag+"-avg-jct-s")
				b.ReportMetric(r.P95JCTSeconds, tag+"-p95-jct-s")
				b.ReportMetric(r.Jain, tag+"-jain")
				b.ReportMetric(r.JainBacklogged, tag+"-jain-backlogged")
				b.ReportMetric(r.FTFMean, tag+"-ftf-mean")
				b.ReportMetric(r.FTFMaxQueue, tag+"-ftf-worst-queue")
				b.ReportMetric(r.PartialGangGPUHours, tag+"-partial-gpu-h")
				if preempt {
					b.ReportMetric(float64(r.Preemptions), tag+"-preemptions")
					b.ReportMetric(r.PreemptedGPUHours, tag+"-lost-gpu-h")
				}
			}
			tag := ""
			if preempt {
				tag = "+preempt"
			}
			b.ReportMetric(res[1].AvgJCTSeconds/res[0].AvgJCTSeconds, "costfair/kueue-avg-jct"+tag)
			b.ReportMetric(res[1].P95JCTSeconds/res[0].P95JCTSeconds, "costfair/kueue-p95-jct"+tag)
		}
	}
	b.ReportMetric(float64(len(jobs)), "jobs")
}

// BenchmarkPhillyGating: the densest day of the trace at a tenth of the
// quotas, gangs gated or not: GPU-hours held by gangs that are partly
// placed, without and with a waitForPodsReady-style timeout (FIFO), and
// what costfair's idle penalty does to them.
func BenchmarkPhillyGating(b *testing.B) {
	qs, jobs := philly(b, 30*24*time.Hour, 31*24*time.Hour)
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			tag, policy string
			gating      bool
			ready       time.Duration
			penalty     float64
		}{
			{"gated", "fifo", true, 0, 0}, {"ungated", "fifo", false, 0, 0}, {"ungated-ready10m", "fifo", false, 10 * time.Minute, 0},
			// The idle penalty: partial gangs hold GPUs idle, and costfair
			// charges their queue for it.
			{"costfair-penalty0-ungated-ready10m", "costfair", false, 10 * time.Minute, -1},
			{"costfair-penalty1-ungated-ready10m", "costfair", false, 10 * time.Minute, 1},
			{"costfair-penalty4-ungated-ready10m", "costfair", false, 10 * time.Minute, 4},
		} {
			r, err := Replay(qs, jobs, ReplayOptions{Policy: c.policy, Gating: c.gating, ReadyTimeout: c.ready, CapacityScale: 0.1,
				Limit: 60 * 24 * time.Hour, IdlePenalty: c.penalty})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.PartialGangGPUHours, c.tag+"-partial-gpu-h")
			b.ReportMetric(r.AvgJCTSeconds, c.tag+"-avg-jct-s")
		}
	}
}

// BenchmarkKueueBaseline replays Kueue's baseline configuration with its
// preemption settings under each policy: usage and mean time to admission
// per class, beside Kueue's published figures (usage 55.9%; small 215 s,
// medium 77 s, large 16.5 s, measured with a real API server).
func BenchmarkKueueBaseline(b *testing.B) {
	qs, jobs := KueueBaseline.Generate()
	for i := 0; i < b.N; i++ {
		for _, p := range []string{"fifo", "kueue", "costfair"} {
			r, err := Replay(qs, jobs, ReplayOptions{Policy: p, Gating: true, Preemption: true, NodeSize: 20, SampleEvery: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(100*r.Utilization, p+"-usage-%")
			for _, c := range []string{"small", "medium", "large"} {
				b.ReportMetric(r.WaitBySize[c], p+"-"+c+"-admission-s")
			}
			b.ReportMetric(float64(r.Preemptions), p+"-preemptions")
		}
	}
}

// TestKueueBaseline replays Kueue's baseline configuration: every workload
// is admitted, and priority shows: large (priority 200) waits least, small
// (50) most, as in Kueue's own results.
func TestKueueBaseline(t *testing.T) {
	testenv.Slow(t, "Kueue's 15,000-workload baseline under three policies")
	qs, jobs := KueueBaseline.Generate()
	if len(qs) != 30 || len(jobs) != 30*500 {
		t.Fatalf("%d queues, %d workloads", len(qs), len(jobs))
	}
	for _, p := range []string{"fifo", "kueue", "costfair"} {
		// As Kueue's configuration: reclaimWithinCohort Any,
		// withinClusterQueue LowerPriority.
		r, err := Replay(qs, jobs, ReplayOptions{Policy: p, Gating: true, Preemption: true, NodeSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-8s usage %.1f%% time to admission small %.1fs medium %.1fs large %.1fs, %d preemptions", p, 100*r.Utilization,
			r.WaitBySize["small"], r.WaitBySize["medium"], r.WaitBySize["large"], r.Preemptions)
		if r.Preemptions == 0 {
			t.Errorf("%s: no preemption, though higher priorities wait", p)
		}
		if r.Finished != r.Jobs {
			t.Errorf("%s: %d of %d finished", p, r.Finished, r.Jobs)
		}
		if !(r.WaitBySize["large"] <= r.WaitBySize["medium"] && r.WaitBySize["medium"] <= r.WaitBySize["small"]) {
			t.Errorf("%s: waits %v do not follow priority", p, r.WaitBySize)
		}
	}
}

// BenchmarkKueueLarge replays Kueue's large-scale configuration (2,000
// queues, 60,000 workloads) under Kueue fair sharing and the cost-weighted
// share; one op is both.
func BenchmarkKueueLarge(b *testing.B) {
	qs, jobs := KueueLarge.Generate()
	for i := 0; i < b.N; i++ {
		for _, p := range []string{"kueue", "costfair"} {
			r, err := Replay(qs, jobs, ReplayOptions{Policy: p, Gating: true, Preemption: true, NodeSize: 20, SampleEvery: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			if r.Finished != len(jobs) {
				b.Fatalf("%s: %d of %d finished", p, r.Finished, len(jobs))
			}
			b.ReportMetric(100*r.Utilization, p+"-usage-%")
			b.ReportMetric(r.WaitBySize["small"], p+"-small-admission-s")
			b.ReportMetric(r.WaitBySize["large"], p+"-large-admission-s")
		}
	}
	b.ReportMetric(float64(len(jobs)), "workloads")
}

func TestGavelMix(t *testing.T) {
	qs := []TraceQueue{{Name: "a", NominalGPUs: 24, Cohort: "c", BorrowingLimit: -1}, {Name: "b", NominalGPUs: 8, Cohort: "c", BorrowingLimit: -1}}
	jobs := Gavel(qs, 100, 48*time.Hour, 7)
	if diff := cmp.Diff(jobs, Gavel(qs, 100, 48*time.Hour, 7)); diff != "" {
		t.Fatalf("same seed, different jobs:\n%s", diff)
	}
	sizes, perQueue := map[int]int{}, map[string]int{}
	for _, j := range jobs {
		sizes[j.GPUs]++
		perQueue[j.Queue]++
		if j.Duration < 60*31*time.Second || j.Duration > 600_000*time.Second {
			t.Fatalf("duration %s out of 60·10^[1.5,4] s", j.Duration)
		}
	}
	n := float64(len(jobs))
	if n < 4500 || n > 5100 {
		t.Errorf("%v jobs in 48 h at 100/h", n)
	}
	for size, want := range map[int]float64{1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05} {
		if got := float64(sizes[size]) / n; got < want-0.03 || got > want+0.03 {
			t.Errorf("size %d: %.3f of jobs, want %.2f", size, got, want)
		}
	}
	if r := float64(perQueue["a"]) / n; r < 0.70 || r > 0.80 {
		t.Errorf("queue a got %.2f of jobs, want 0.75 (its share of quota)", r)
	}
}

// TestClosedLoop: the replayed cluster's GPUs emit exporter telemetry that
// ingest and attribution turn into ledger rows, and the cost-weighted
// policy reads its shares back from the Store. Every hour the ledger holds
// reconciles to the cluster's cost, the teams' GPU time is what ran (to the
// scrape interval), idle time shows, and the same run twice gives the same
// result.
func TestClosedLoop(t *testing.T) {
	testenv.Slow(t, "four days of telemetry through ingest and the ledger, three times")
	qs, jobs := philly(t, 30*24*time.Hour, 31*24*time.Hour)
	run := func(gating bool) (ReplayResult, ledger.Store) {
		store, err := embedded.Open(t.TempDir(), embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		r, err := Replay(qs, jobs, ReplayOptions{Policy: "costfair", Gating: gating, Preemption: gating, CapacityScale: 0.1, Ledger: store,
			Limit: 4 * 24 * time.Hour, Ingest: func(m *attribution.Model, o attribution.Options, now func() time.Time) (Ingester, error) {
				return ingest.NewPipeline(m, o, store, ingest.PipelineOptions{ReorderWindow: -1, Now: now})
			}})
		if err != nil {
			t.Fatal(err)
		}
		return r, store
	}
	a, store := run(true)
	b, _ := run(true)
	if diff := cmp.Diff(a, b, cmp.AllowUnexported(ReplayResult{})); diff != "" {
		t.Errorf("two closed-loop runs differ:\n%s", diff)
	}
	if a.Scrapes == 0 || a.LedgerHours == 0 {
		t.Fatalf("no loop: %d scrapes, %d hours", a.Scrapes, a.LedgerHours)
	}
	var capacity int64
	for _, q := range qs {
		capacity += int64(max(int(math.Round(float64(q.NominalGPUs)/GPUsPerNode*0.1)), 1) * GPUsPerNode)
	}
	check := func(name string, r ReplayResult, store ledger.Store) {
		var idle, held int64
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		rows, err := store.Query(context.Background(), ledger.Query{From: epoch, To: epoch.Add(r.Makespan + time.Hour), Step: ledger.StepHour,
			GroupBy: []ledger.Dimension{ledger.DimTeam}})
		if err != nil {
			t.Fatal(err)
		}
		perHour := map[time.Time]int64{}
		var heldSec float64
		for _, row := range rows {
			perHour[row.Hour] += row.CostMicros
			if row.Team != ledger.TeamUnallocated {
				heldSec += row.GPUSeconds
				idle += row.IdleCostMicros
				held += row.CostMicros
			}
			if row.CostMicros < 0 || row.IdleCostMicros < 0 {
				t.Errorf("%s: negative row %+v", name, row)
			}
		}
		if len(perHour) != r.LedgerHours {
			t.Errorf("%s: %d hours in the ledger, the replay wrote %d", name, len(perHour), r.LedgerHours)
		}
		for h, c := range perHour {
			if c != capacity*6_880_000 {
				t.Errorf("%s: hour %s sums to %d, want %d", name, h, c, capacity*6_880_000)
			}
		}
		var want float64
		for _, c := range r.CostMicrosByQueue {
			want += float64(c) / 6_880_000 * 3600
		}
		want += r.PartialGangGPUHours * 3600
		// The ledger runs to the end of the last hour: what was held at the
		// end of the replay stays held to then.
		slack := float64(capacity) * (time.Duration(r.LedgerHours)*time.Hour - r.Makespan).Seconds()
		if heldSec < 0.99*want || heldSec > 1.01*want+slack {
			t.Errorf("%s: the ledger has %.0f GPU-seconds held, the replay ran and held %.0f (+%.0f after its end)", name, heldSec, want, slack)
		}
		t.Logf("%s: avg JCT %.0fs, %d hours and %d scrapes in the ledger, idle %.1f%% of %d µ held, %d preemptions, %.0f GPU-h partial",
			name, r.AvgJCTSeconds, len(perHour), r.Scrapes, 100*float64(idle)/float64(held), held, r.Preemptions, r.PartialGangGPUHours)
		// Waiting pods hold their GPUs fully idle.
		if partial := int64(r.PartialGangGPUHours * 6_880_000); idle < partial*99/100 {
			t.Errorf("%s: idle cost %d, below the %d of the partial gangs' GPU time", name, idle, partial)
		}
	}
	check("gated", a, store)
	// Without gating, pods placed ahead of their gang hold GPUs idle: the
	// ledger sees them as idle cost, which the policy penalises.
	off, offStore := run(false)
	check("ungated", off, offStore)
	if off.PartialGangGPUHours == 0 {
		t.Error("no GPU time in partial gangs without gating")
	}
}

// TestHeterogeneousReplay: with two flavors a queue tries them in order,
// and each job's GPU time is priced at its flavor's rate.
func TestHeterogeneousReplay(t *testing.T) {
	qs := []TraceQueue{{Name: "a", NominalGPUs: 16, Cohort: "c", BorrowingLimit: -1}}
	jobs := []TraceJob{
		{ID: "j1", Queue: "a", Submit: 0, Duration: time.Hour, GPUs: 4, Pods: 1, PerPod: 4},
		{ID: "j2", Queue: "a", Submit: 0, Duration: time.Hour, GPUs: 8, Pods: 2, PerPod: 4},
	}
	flavors := []ReplayFlavor{{Name: "t4", Share: 0.5, PriceMicrosPerGPUHour: 530_000}, {Name: "h100", Share: 0.5, PriceMicrosPerGPUHour: 6_880_000}}
	r, err := Replay(qs, jobs, ReplayOptions{Policy: "costfair", Gating: true, Flavors: flavors})
	if err != nil {
		t.Fatal(err)
	}
	// j1 takes 4 of the 8 T4s; j2 does not fit the 4 left and goes to the
	// H100s: 4 T4-hours and 8 H100-hours.
	if want := int64(4*530_000 + 8*6_880_000); r.CostMicrosByQueue["a"] != want || r.AvgJCTSeconds != 3600 {
		t.Errorf("cost %d, want %d; avg JCT %v", r.CostMicrosByQueue["a"], want, r.AvgJCTSeconds)
	}
	if _, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Flavors: flavors}); err == nil {
		t.Error("a heterogeneous replay without gating was accepted")
	}
	if _, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: true, Flavors: []ReplayFlavor{{Name: "x", Share: 1}}}); err == nil || !strings.Contains(err.Error(), "price") {
		t.Errorf("a flavor without a price: %v", err)
	}
}

// TestFlavorQuotasFitTheirGPUs: on a two-flavor replay, each flavor's
// nominal quotas add up to its GPUs exactly (a queue's share of a flavor
// rounded alone once gave 300 T4 GPUs of quota on 296), whatever the
// queues' sizes and the flavors' shares; one flavor keeps each queue's own
// GPUs.
func TestFlavorQuotasFitTheirGPUs(t *testing.T) {
	var qs []TraceQueue
	for i, g := range []int{24, 40, 8, 56, 16, 104, 32} {
		qs = append(qs, TraceQueue{Name: fmt.Sprintf("vc%d", i), NominalGPUs: g, Cohort: "c", BorrowingLimit: -1})
	}
	for _, share := range []float64{0.5, 0.37, 0.8} {
		flavors := []ReplayFlavor{{Name: "h100", Share: share, PriceMicrosPerGPUHour: 6_880_000}, {Name: "t4", Share: 1 - share, PriceMicrosPerGPUHour: 526_000}}
		m, err := TraceModel(qs, TraceCluster{Flavors: flavors, CapacityScale: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		gpus, quota := map[string]int64{}, map[string]int64{}
		for _, n := range m.Cluster.Nodes {
			gpus[n.Flavor] += int64(n.GPUs)
		}
		for _, cq := range m.Queues {
			for fr, q := range cq.Quotas {
				quota[fr.Flavor] += q.Nominal
			}
		}
		for _, f := range flavors {
			if quota[f.Name] != gpus[f.Name] || gpus[f.Name] == 0 {
				t.Errorf("share %g: %s quotas %d on %d GPUs", share, f.Name, quota[f.Name], gpus[f.Name])
			}
		}
	}
	m, err := TraceModel(qs, TraceCluster{PriceMicrosPerGPUHour: 6_880_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		var n int64
		for _, v := range m.Queues[q.Name].Quotas {
			n += v.Nominal
		}
		if n != int64(q.NominalGPUs) {
			t.Errorf("one flavor: %s has %d GPUs of quota, want its own %d", q.Name, n, q.NominalGPUs)
		}
	}
}

// TestSettledSpend: with SettledSpend costfair's spend is spread over the
// trace hours it falls in and read as the controller reads the ledger:
// only the hours that have ended, each decayed from its middle, read
// again every SettledSpend, with the admission penalties on top.
func TestSettledSpend(t *testing.T) {
	r := &replay{opts: ReplayOptions{Policy: "costfair", SettledSpend: 10 * time.Minute, HalfLife: time.Hour},
		snap:      &admission.Snapshot{Queues: map[string]*admission.ClusterQueue{"a": {Weight: 2}, "b": {Weight: 1}}},
		penalties: admission.NewDecayed(time.Hour.Milliseconds())}
	r.now = 30 * time.Minute
	r.settle("a", 90*time.Minute, 60) // 30 in hour 0, 30 in hour 1
	r.settle("b", 90*time.Minute, 6)
	if got := r.settled["a"]; math.Abs(got[0]-30) > 1e-9 || math.Abs(got[1]-30) > 1e-9 || len(got) != 2 {
		t.Fatalf("a's hours %v, want 30 in hour 0 and 30 in hour 1", got)
	}
	r.now = 90 * time.Minute
	// Hour 0 has ended, its middle an hour ago: half of a's 30 over a's
	// weight 2, half of b's 3.
	want := map[string]float64{"a": 15.0 / 2, "b": 1.5}
	check := func(when string, want map[string]float64) {
		t.Helper()
		got := r.settledShares()
		for q, w := range want {
			if math.Abs(got[q]-w) > 1e-9 {
				t.Errorf("%s: %s's share %g, want %g (all %v)", when, q, got[q], w, got)
			}
		}
	}
	check("at 1:30", want)
	// Read again at 1:40, not before: at 1:35 the shares stand.
	r.now = 95 * time.Minute
	r.settle("a", 125*time.Minute, 60)
	check("at 1:35", want)
	// At 2:05 hour 1 (a: 30 + 50 of the second 60) has ended too.
	r.now = 125 * time.Minute
	age := func(mid time.Duration) float64 { return math.Exp2(-(125*time.Minute - mid).Hours()) }
	check("at 2:05", map[string]float64{"a": (30*age(30*time.Minute) + 80*age(90*time.Minute)) / 2, "b": 3*age(30*time.Minute) + 3*age(90*time.Minute)})
	// An admission penalty counts at once.
	r.penalties.Add("b", 4)
	r.now = 126 * time.Minute
	check("with b's penalty", map[string]float64{"b": 3*age(30*time.Minute) + 3*age(90*time.Minute) + 4})
}

// TestControllerWeights: with ControllerWeights costfair's queues carry
// the weights gpuledger's controller would write, every interval and only
// past the hysteresis: usage over money share, scaled to average 1.
func TestControllerWeights(t *testing.T) {
	r := &replay{opts: ReplayOptions{Policy: "costfair", ControllerWeights: 10 * time.Minute, Hysteresis: 0.1, HalfLife: time.Hour},
		model: &Model{value: map[string]float64{"a": 1, "b": 1, "c": 1}}, names: []string{"a", "b", "c"},
		snap:     &admission.Snapshot{Queues: map[string]*admission.ClusterQueue{"a": {Weight: 1}, "b": {Weight: 1}, "c": {Weight: 1}}},
		consumed: admission.NewDecayed(time.Hour.Milliseconds()), decayed: admission.NewDecayed(time.Hour.Milliseconds())}
	if !r.viaWeights() {
		t.Fatal("costfair with ControllerWeights: not via the weights")
	}
	// a and b used the same GPU time; a's was three times the money. c used
	// nothing and keeps 1.
	r.consumed.Add("a", 100)
	r.consumed.Add("b", 100)
	r.decayed.Add("a", 30)
	r.decayed.Add("b", 10)
	r.controllerWeights()
	weights := func() [3]float64 {
		return [3]float64{r.snap.Queues["a"].Weight, r.snap.Queues["b"].Weight, r.snap.Queues["c"].Weight}
	}
	// raw 100/30 and 100/10, mean 20/3: 0.5 and 1.5.
	if got := weights(); math.Abs(got[0]-0.5) > 1e-9 || math.Abs(got[1]-1.5) > 1e-9 || got[2] != 1 {
		t.Fatalf("weights %v, want [0.5 1.5 1]", got)
	}
	if shares := r.consumed.Shares(r.snap.Queues); math.Abs(shares["a"]-200) > 1e-9 || math.Abs(shares["b"]-100/1.5) > 1e-9 {
		t.Errorf("Kueue's order keys %v, want usage over weight", shares)
	}
	// Not yet due: nothing moves.
	r.decayed.Add("b", 20)
	r.now = 5 * time.Minute
	r.controllerWeights()
	if got := weights(); got[1] != 1.5 {
		t.Errorf("before the interval: weights %v, want b still 1.5", got)
	}
	// Due: a and b now spent alike, both move to 1.
	r.now = 10 * time.Minute
	r.controllerWeights()
	if got := weights(); math.Abs(got[0]-1) > 1e-9 || math.Abs(got[1]-1) > 1e-9 {
		t.Errorf("after the interval: weights %v, want 1 and 1", got)
	}
	// A move within the hysteresis (a: 2%) is not written.
	r.decayed.Add("a", 1)
	r.now = 20 * time.Minute
	r.controllerWeights()
	if got := weights(); got[0] != 1 || got[1] != 1 {
		t.Errorf("a 2%% move: weights %v, want 1 and 1 kept", got)
	}
}
