package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFigures: the comparison figures from hand-made outcomes, a job
// still waiting at the end counting with its wait so far.
func TestFigures(t *testing.T) {
	h := time.Hour
	jobs := []TraceJob{
		{ID: "a1", Queue: "a", Submit: 0, GPUs: 2},
		{ID: "b1", Queue: "b", Submit: 0, GPUs: 2},
		{ID: "b2", Queue: "b", Submit: h, GPUs: 4},
		{ID: "a2", Queue: "a", Submit: 0, GPUs: 8},
	}
	outs := []JobOutcome{
		{ID: "a1", Queue: "a", Flavor: "h100", GPUs: 2, Submit: 0, Start: 0, Finish: 2 * h},
		{ID: "b1", Queue: "b", Flavor: "t4", GPUs: 2, Submit: 0, Start: h, Finish: 0},
	}
	f := Figures(jobs, outs, map[string]int64{"h100": 4, "t4": 1}, 3*h)
	if f.Jobs != 4 || f.Started != 2 || f.Finished != 1 {
		t.Errorf("jobs %d started %d finished %d", f.Jobs, f.Started, f.Finished)
	}
	if f.AvgJCT != 2*h {
		t.Errorf("avg JCT %s, want 2h", f.AvgJCT)
	}
	// Waits 0, 1 h, and b2's 2 h and a2's 3 h so far.
	if f.MeanWait != 90*time.Minute || f.MaxWait != 3*h || f.P90Wait != 3*h {
		t.Errorf("waits mean %s p90 %s max %s, want 1h30m, 3h, 3h", f.MeanWait, f.P90Wait, f.MaxWait)
	}
	if f.GPUHoursByFlavor["h100"] != 4 || f.GPUHoursByFlavor["t4"] != 4 {
		t.Errorf("GPU-hours %v, want h100 4 and t4 4 (b1 runs to the end)", f.GPUHoursByFlavor)
	}
	// a and b both wait every hour. Hour 0: a holds 2 h100 (8), b
	// nothing: 0.5. Hour 1: a 8, b 2 t4 (2): 100/136. Hour 2: a1 has
	// finished, b 2: 0.5.
	if want := (0.5 + 100.0/136 + 0.5) / 3; math.Abs(f.JainBacklogged-want) > 1e-12 {
		t.Errorf("backlogged Jain %g, want %g", f.JainBacklogged, want)
	}
	// Money: hour 0, a spends 8 and b nothing: |1 - 0.5| = 0.5; hour 1,
	// a 8 and b 2: 0.3; hour 2, b alone: 0.5. Mean 0.433, p95 0.5.
	if want := (0.5 + 0.3 + 0.5) / 3; math.Abs(f.MoneyGap-want) > 1e-12 || f.MoneyGapP95 != 0.5 {
		t.Errorf("money gap %g (p95 %g), want %g (0.5)", f.MoneyGap, f.MoneyGapP95, want)
	}
	d := Diverge(outs, []JobOutcome{{ID: "a1", Flavor: "h100", Submit: 0, Start: 30 * time.Minute}, {ID: "b1", Flavor: "h100", Submit: 0, Start: h}})
	if d.Common != 2 || d.MeanAbsWait != 15*time.Minute || d.MedianAbsWait != 30*time.Minute || math.Abs(d.SameFlavor-0.5) > 1e-12 {
		t.Errorf("divergence %+v", d)
	}
}

// TestMoneyGapByBlock: the money gap of each 12 trace hours, the last
// block cut at the end, and NaN for a block in which no two queues waited.
func TestMoneyGapByBlock(t *testing.T) {
	h := time.Hour
	jobs := []TraceJob{
		{ID: "a1", Queue: "a", GPUs: 2}, {ID: "a2", Queue: "a", GPUs: 2}, {ID: "a3", Queue: "a", GPUs: 99},
		{ID: "b1", Queue: "b", GPUs: 2}, {ID: "b2", Queue: "b", GPUs: 99},
	}
	// a holds two H100s (8) for 12 h, then a and b two T4s (2) each for
	// 12 h, then b alone: gaps 0.5, 0 and 0.5; a3 and b2 wait throughout.
	outs := []JobOutcome{
		{ID: "a1", Queue: "a", Flavor: "h100", GPUs: 2, Start: 0, Finish: 12 * h},
		{ID: "a2", Queue: "a", Flavor: "t4", GPUs: 2, Start: 12 * h, Finish: 24 * h},
		{ID: "b1", Queue: "b", Flavor: "t4", GPUs: 2, Start: 12 * h},
	}
	prices := map[string]int64{"h100": 4, "t4": 1}
	f := Figures(jobs, outs, prices, 30*h)
	if want := []float64{0.5, 0, 0.5}; len(f.MoneyGapByBlock) != 3 || f.MoneyGapByBlock[0] != 0.5 || f.MoneyGapByBlock[1] != 0 || f.MoneyGapByBlock[2] != 0.5 {
		t.Errorf("money gap by block %v, want %v", f.MoneyGapByBlock, want)
	}
	if got := f.BlockCells(); got != "0.500\t0.000\t0.500" {
		t.Errorf("block cells %q", got)
	}
	// Who the gap is made of: a over its share, then b.
	if got, want := f.QueueBlockCells("a"), "+0.500 h100:2.0\t+0.000 t4:2.0\t-0.500"; got != want {
		t.Errorf("queue a's cells %q, want %q", got, want)
	}
	if got, want := f.QueueBlockCells("b"), "-0.500\t+0.000 t4:2.0\t+0.500 t4:2.0"; got != want {
		t.Errorf("queue b's cells %q, want %q", got, want)
	}
	if got := f.Queues(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("queues %v", got)
	}
	// Queue a alone waits: no block has a sample.
	f = Figures(jobs[:3], outs[:2], prices, 12*h)
	if len(f.MoneyGapByBlock) != 1 || !math.IsNaN(f.MoneyGapByBlock[0]) || f.BlockCells() != "-" {
		t.Errorf("with one queue: %v (%q), want one NaN block", f.MoneyGapByBlock, f.BlockCells())
	}
}

// TestSharedModel: with SharedGPUs every queue may use every GPU of its
// flavor and the cluster is those GPUs, one node per flavor.
func TestSharedModel(t *testing.T) {
	m, err := TraceModel([]TraceQueue{{Name: "a", NominalGPUs: 40, BorrowingLimit: -1}, {Name: "b", NominalGPUs: 40, BorrowingLimit: -1}},
		TraceCluster{SharedGPUs: 40, Flavors: []ReplayFlavor{{Name: "h100", Share: 0.25, PriceMicrosPerGPUHour: 2}, {Name: "t4", Share: 0.75, PriceMicrosPerGPUHour: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.FlavorCapacity(); got["h100"] != 10 || got["t4"] != 30 || len(m.Nodes) != 2 {
		t.Fatalf("capacity %v on %d nodes, want h100 10 and t4 30 on 2", got, len(m.Nodes))
	}
	for _, q := range m.Queues {
		for fr, quota := range q.Quotas {
			if want := int64(m.FlavorCapacity()[fr.Flavor]); quota.Nominal != want {
				t.Errorf("queue %s flavor %s: nominal %d, want %d", q.Name, fr.Flavor, quota.Nominal, want)
			}
		}
	}
	if _, err := TraceModel([]TraceQueue{{Name: "a"}}, TraceCluster{SharedGPUs: 1, Flavors: []ReplayFlavor{{Name: "h100", Share: 0.5, PriceMicrosPerGPUHour: 2}, {Name: "t4", Share: 0.5, PriceMicrosPerGPUHour: 1}}}); err == nil {
		t.Error("1 GPU split between two flavors: no error")
	}
}

// TestReplayMoneyGap: a queue that borrows its neighbour's whole quota
// with a 16-GPU gang while both have work waiting spends all the money of
// the two backlogged queues on half their entitlement: a gap of 0.5 at
// every sample, with samples; queues that each hold their own quota have
// none.
func TestReplayMoneyGap(t *testing.T) {
	h := time.Hour
	qs := []TraceQueue{{Name: "a", NominalGPUs: 8, Cohort: "c", BorrowingLimit: -1}, {Name: "b", NominalGPUs: 8, Cohort: "c", BorrowingLimit: -1}}
	jobs := []TraceJob{
		{ID: "a1", Queue: "a", Submit: 0, Duration: 10 * h, GPUs: 16, Pods: 2, PerPod: 8},
		{ID: "a2", Queue: "a", Submit: 0, Duration: 10 * h, GPUs: 16, Pods: 2, PerPod: 8},
		{ID: "b1", Queue: "b", Submit: time.Minute, Duration: h, GPUs: 8, Pods: 1, PerPod: 8},
		{ID: "b2", Queue: "b", Submit: time.Minute, Duration: h, GPUs: 8, Pods: 1, PerPod: 8},
		// The submission window runs to 30 h; the samples are in it.
		{ID: "b3", Queue: "b", Submit: 30 * h, Duration: h, GPUs: 8, Pods: 1, PerPod: 8},
	}
	r, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: true})
	if err != nil {
		t.Fatal(err)
	}
	// Samples at 1 h to 10 h; then a1 is done and b's jobs take b's own
	// quota.
	if r.MoneyGap != 0.5 || r.MoneyGapP95 != 0.5 || r.MoneyGapSamples != 10 {
		t.Errorf("money gap %g (p95 %g) over %d samples; want 0.5 over the 10 hours a holds everything", r.MoneyGap, r.MoneyGapP95, r.MoneyGapSamples)
	}
	// No borrowing, every job 8 GPUs for 10 h: each queue runs one on its
	// quota while its second waits.
	for i := range qs {
		qs[i].Cohort, qs[i].BorrowingLimit = "", 0
	}
	for i := range jobs {
		jobs[i].GPUs, jobs[i].Pods, jobs[i].Duration = 8, 1, 10*h
	}
	if r, err = Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: true}); err != nil {
		t.Fatal(err)
	}
	if r.MoneyGap != 0 || r.MoneyGapSamples == 0 {
		t.Errorf("each queue on its own quota: money gap %g over %d samples; want 0 with samples", r.MoneyGap, r.MoneyGapSamples)
	}
	// The drain apart: with the last submission at 5 h, only the samples
	// at 1-5 h count, though both queues wait until 10 h.
	jobs[4].Submit = 5 * h
	if r, err = Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: true}); err != nil {
		t.Fatal(err)
	}
	if r.MoneyGapSamples != 5 {
		t.Errorf("%d samples with the window ending at 5 h; want 5", r.MoneyGapSamples)
	}
	// The 16 GPUs are busy in the window but for b's first minute (8/16
	// GPUs × 1 of 300 minutes); with the drain to 20 h, a's second job
	// alone at the end, less.
	if want := 1 - 8.0/(16*300); math.Abs(r.UtilizationWindow-want) > 1e-9 || !(r.Utilization < want) {
		t.Errorf("utilisation %g over the window (want %g), %g with the drain", r.UtilizationWindow, want, r.Utilization)
	}
}

// TestLongestStalls: a queue's stall runs from when it had work waiting
// (or last started a job) to its next start, or to the end; a job that
// starts the moment it comes leaves no stall.
func TestLongestStalls(t *testing.T) {
	h := time.Hour
	jobs := []TraceJob{
		{ID: "a1", Queue: "a", Submit: 0, GPUs: 1}, {ID: "a2", Queue: "a", Submit: h, GPUs: 1},
		{ID: "a3", Queue: "a", Submit: 6 * h, GPUs: 1}, {ID: "b1", Queue: "b", Submit: 3 * h, GPUs: 1},
		{ID: "b2", Queue: "b", Submit: 20 * h, GPUs: 1}, // after the end
	}
	outs := []JobOutcome{
		{ID: "a1", Queue: "a", GPUs: 1, Submit: 0, Start: 2 * h}, {ID: "a2", Queue: "a", GPUs: 1, Submit: h, Start: 5 * h},
		{ID: "b1", Queue: "b", GPUs: 1, Submit: 3 * h, Start: 3 * h},
	}
	f := Figures(jobs, outs, nil, 10*h)
	// a: waiting 0-2h, then 2h-5h, then 6h-10h (a3 never starts).
	if f.LongestStall["a"] != 4*h || f.LongestStall["b"] != 0 || f.MaxStall != 4*h {
		t.Errorf("stalls %v, max %v; want a 4h, b 0", f.LongestStall, f.MaxStall)
	}
}

// TestFigureCells: the median of runs takes each figure's middle value,
// the spread its min–max, and the error is (sim − real) / real.
func TestFigureCells(t *testing.T) {
	runs := []RunFigures{{Jobs: 10, Started: 8, MoneyGap: 0.3, AvgJCT: 3 * time.Hour}, {Jobs: 10, Started: 6, MoneyGap: 0.1, AvgJCT: time.Hour},
		{Jobs: 10, Started: 7, MoneyGap: 0.2, AvgJCT: 2 * time.Hour}}
	med := MedianFigures(runs)
	if med.Started != 7 || med.MoneyGap != 0.2 || med.AvgJCT != 2*time.Hour || med.Jobs != 10 {
		t.Errorf("median %+v", med)
	}
	if got := strings.Split(SpreadCells(runs), "\t"); got[0] != "6–8" || got[2] != "1h0m0s–3h0m0s" || got[7] != "0.100–0.300" {
		t.Errorf("spread %q", got)
	}
	sim := RunFigures{Jobs: 10, Started: 7, MoneyGap: 0.22, AvgJCT: 2 * time.Hour}
	if got := strings.Split(ErrorCells(sim, med), "\t"); got[0] != "+0%" || got[7] != "+10%" || got[8] != "0%" {
		t.Errorf("error %q", got)
	}
	if got := strings.Split(med.Cells(), "\t"); got[0] != "7/10" || got[7] != "0.200" {
		t.Errorf("cells %q", got)
	}
}
