package attribution

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

// t0 is an hour boundary.
var t0 = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

func testModel() *Model {
	return &Model{
		Cluster: "c1",
		GPUs: []GPU{
			// 3.6 per hour: 1,000 micros per second, easy to check by hand.
			{Node: "n1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
			// 7.0 per hour: 1,000,000 micros per compute slice-hour.
			{Node: "n1", Index: "1", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100-mig", RateMicrosPerHour: 7_000_000,
				MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
		},
		LocalQueues:       map[QueueRef]string{{"research", "training"}: "cq-research"},
		ClusterQueueTeams: map[string]string{"cq-research": "ml"},
		NamespaceTeams:    map[string]string{"notebooks": "ds", "research": "ml"},
		Quotas:            map[QuotaRef]int64{{"cq-research", "h100"}: QuotaUnitsPerGPU},
	}
}

type feed struct {
	samples []Sample
}

// scrape adds one scrape of a device at second sec of the hour.
func (f *feed) scrape(sec int, node, gpu, profile, inst, ns, pod, queue string, fields map[Field]float64) {
	for _, fl := range []Field{FieldGPUUtil, FieldGREngineActive, FieldFBUsed, FieldPowerUsage, FieldTotalEnergy} {
		v, ok := fields[fl]
		if !ok {
			continue
		}
		f.samples = append(f.samples, Sample{TimeMs: t0.UnixMilli() + int64(sec)*1000, Node: node, GPU: gpu,
			Profile: profile, Instance: inst, Namespace: ns, Pod: pod, Queue: queue, Field: fl, Value: v})
	}
}

func run(t *testing.T, m *Model, samples []Sample, pods []PodInfo, until time.Time) ([]ledger.Row, Stats) {
	t.Helper()
	a, err := New(m, Options{StartMs: t0.UnixMilli(), Lines: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.TimeMs == 0 {
			p.TimeMs = t0.UnixMilli()
		}
		a.AddPod(p)
	}
	for i := range samples {
		a.Add(&samples[i])
	}
	rows, _ := a.Emit(until.UnixMilli())
	// Every hour's lines explain its rows, to the micro-unit.
	if err := ledger.CheckLines(rows, a.Lines()); err != nil {
		t.Error(err)
	}
	return rows, a.Stats()
}

// TestScenarioByHand checks one hour computed by hand:
//
//   - n1/0 (whole H100, 3.60/h = 1,000 µ/s) is held by research/train-0
//     (queue training → cq-research → team ml) for the first 30 minutes at
//     GR activity 0.5, then free: ml pays 1,800 s × 1,000 = 1,800,000, half
//     of it idle; the other 1,800,000 is unallocated.
//   - n1/1 (MIG 3+2+1+1 of 7 slices, 7.00/h = 1,000,000 per slice-hour): the
//     3g.40gb instance is held all hour by notebooks/nb-0 (no queue; the
//     namespace belongs to ds) at GR activity 0.25: ds pays 3,000,000, of
//     which 2,250,000 idle, for 3/7 × 3,600 GPU-seconds. The other 4 slices
//     are unallocated: 4,000,000. The pod also draws 300 W × 3/7 of the GPU
//     for 3,600 s = 462,857.142… J.
//
// The hour costs 3,600,000 + 7,000,000 = 10,600,000 in all.
func TestScenarioByHand(t *testing.T) {
	var f feed
	for sec := 0; sec < 3600; sec += 15 {
		pod, ns := "", ""
		if sec < 1800 {
			pod, ns = "train-0", "research"
		}
		f.scrape(sec, "n1", "0", "", "", ns, pod, "", map[Field]float64{FieldGREngineActive: 0.5, FieldGPUUtil: 50, FieldPowerUsage: 400})
		f.scrape(sec, "n1", "1", "3g.40gb", "1", "notebooks", "nb-0", "", map[Field]float64{FieldGREngineActive: 0.25, FieldPowerUsage: 300})
		f.scrape(sec, "n1", "1", "2g.20gb", "2", "", "", "", map[Field]float64{FieldGREngineActive: 0})
	}
	rows, stats := run(t, testModel(), f.samples, []PodInfo{{Namespace: "research", Pod: "train-0", Queue: "training"}}, t0.Add(time.Hour))
	want := []ledger.Row{
		{Key: ledger.Key{Hour: t0, Cluster: "c1", Team: "_unallocated", Flavor: "h100"},
			GPUSeconds: 1800, CostMicros: 1_800_000, UnallocatedCostMicros: 1_800_000, EnergyJoules: 400 * 1800},
		{Key: ledger.Key{Hour: t0, Cluster: "c1", Team: "_unallocated", Flavor: "h100-mig"},
			GPUSeconds: 3600 * 4.0 / 7, CostMicros: 4_000_000, UnallocatedCostMicros: 4_000_000},
		// 300 W × 15 s × 3/7 = 1,928,571.43 mJ, rounded per scrape, × 240.
		{Key: ledger.Key{Hour: t0, Cluster: "c1", Team: "ds", Namespace: "notebooks", Flavor: "h100-mig"},
			GPUSeconds: 3600 * 3.0 / 7, ActiveGPUSeconds: 3600 * 3.0 / 7 / 4, CostMicros: 3_000_000, IdleCostMicros: 2_250_000,
			EnergyJoules: 1_928_571 * 240 / 1000.0},
		{Key: ledger.Key{Hour: t0, Cluster: "c1", Team: "ml", Namespace: "research", LocalQueue: "training", ClusterQueue: "cq-research", Flavor: "h100"},
			GPUSeconds: 1800, ActiveGPUSeconds: 900, CostMicros: 1_800_000, IdleCostMicros: 900_000, EnergyJoules: 400 * 1800},
	}
	if diff := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if len(stats.Rejected) != 0 {
		t.Errorf("rejected %v, want none", stats.Rejected)
	}
	checkReconciles(t, testModel(), rows)
}

// checkReconciles asserts the ledger invariants: every hour's rows sum to
// the inventory's hourly cost exactly, GPU-seconds to GPUs × 3,600, and no
// amount is negative or larger than it may be.
func checkReconciles(t *testing.T, m *Model, rows []ledger.Row) {
	t.Helper()
	cost := make(map[time.Time]int64)
	secs := make(map[time.Time]float64)
	for _, r := range rows {
		cost[r.Hour] += r.CostMicros
		secs[r.Hour] += r.GPUSeconds
		if r.CostMicros < 0 || r.IdleCostMicros < 0 || r.UnallocatedCostMicros < 0 || r.UnmeasuredCostMicros < 0 || r.ActiveCostMicros() < 0 ||
			r.EnergyCostMicros < 0 || r.GPUSeconds < 0 || r.ActiveGPUSeconds < 0 || r.UnmeasuredGPUSeconds < 0 ||
			r.ActiveGPUSeconds+r.UnmeasuredGPUSeconds > r.GPUSeconds+1e-6 || r.EnergyJoules < 0 {
			t.Errorf("row out of bounds: %+v", r)
		}
	}
	for h, c := range cost {
		if c != m.HourlyCostMicros() {
			t.Errorf("hour %s: rows sum to %d micros, want %d", h.Format(time.RFC3339), c, m.HourlyCostMicros())
		}
		if want := float64(len(m.GPUs)) * 3600; math.Abs(secs[h]-want) > 1e-6 {
			t.Errorf("hour %s: %f GPU-seconds, want %f", h.Format(time.RFC3339), secs[h], want)
		}
	}
}

func TestRejections(t *testing.T) {
	m := testModel()
	ms := t0.UnixMilli()
	s := func(dt int64, node, gpu, prof, inst string, f Field, v float64) Sample {
		return Sample{TimeMs: ms + dt, Node: node, GPU: gpu, Profile: prof, Instance: inst, Namespace: "research", Pod: "p", Field: f, Value: v}
	}
	samples := []Sample{
		s(0, "n1", "0", "", "", FieldGPUUtil, 10),
		s(0, "n1", "0", "", "", FieldGPUUtil, 10),      // duplicate field in one scrape
		s(15_000, "n1", "0", "", "", FieldGPUUtil, 10), // next scrape
		s(5_000, "n1", "0", "", "", FieldGPUUtil, 10),  // older than the pending scrape
		s(15_000, "n9", "0", "", "", FieldGPUUtil, 10), // node not in the inventory
		s(15_000, "n1", "0", "", "", FieldGPUUtil, math.NaN()),
		s(15_000, "n1", "0", "", "", FieldPowerUsage, math.Inf(1)),
		s(15_000, "n1", "1", "", "", FieldGPUUtil, 10),               // parent series of a MIG GPU
		s(15_000, "n1", "1", "7g.80gb", "0", FieldGREngineActive, 1), // profile not in the layout
		s(15_000, "n1", "1", "1g.10gb", "3", FieldGREngineActive, 1),
		s(15_000, "n1", "1", "1g.10gb", "4", FieldGREngineActive, 1),
		s(15_000, "n1", "1", "1g.10gb", "5", FieldGREngineActive, 1), // a third 1g.10gb: the layout has two
	}
	rows, stats := run(t, m, samples, nil, t0.Add(time.Hour))
	want := map[Reason]uint64{
		ReasonDuplicate: 1, ReasonOutOfOrder: 1, ReasonUnknownGPU: 1, ReasonBadValue: 2, ReasonUnknownInstance: 3,
	}
	if diff := cmp.Diff(want, stats.Rejected); diff != "" {
		t.Errorf("rejections (-want +got):\n%s", diff)
	}
	if stats.Accepted != 4 {
		t.Errorf("accepted %d samples, want 4", stats.Accepted)
	}
	checkReconciles(t, m, rows)

	// A sample for an hour already emitted is late.
	a, _ := New(m, Options{StartMs: ms})
	a.Emit(ms + hourMs)
	late := s(10, "n1", "0", "", "", FieldGPUUtil, 1)
	a.Add(&late)
	if got := a.Stats().Rejected[ReasonLate]; got != 1 {
		t.Errorf("late samples = %d, want 1", got)
	}
}

// TestGaps: a gap up to the staleness bound is bridged by the sample before
// it; a longer one counts one scrape interval and leaves the rest
// unobserved, charged as unallocated.
func TestGaps(t *testing.T) {
	m := &Model{Cluster: "c", GPUs: []GPU{{Node: "n", Index: "0", Flavor: "f", RateMicrosPerHour: 3_600_000}},
		NamespaceTeams: map[string]string{"ns": "team"}}
	at := func(sec int) Sample {
		return Sample{TimeMs: t0.UnixMilli() + int64(sec)*1000, Node: "n", GPU: "0", Namespace: "ns", Pod: "p", Field: FieldGPUUtil, Value: 100}
	}
	// Held at 0 s, 120 s (gap 2 min: bridged), then 1,200 s (gap 18 min: not
	// bridged, 15 s counted), then the stream ends (15 s counted).
	samples := []Sample{at(0), at(120), at(1200)}
	rows, _ := run(t, m, samples, nil, t0.Add(time.Hour))
	var held float64
	for _, r := range rows {
		if r.Team == "team" {
			held = r.GPUSeconds
		}
	}
	if want := 120.0 + 15 + 15; held != want {
		t.Errorf("held %v GPU-seconds, want %v", held, want)
	}
	checkReconciles(t, m, rows)
}

// TestIntervalAcrossHours: a sample whose interval crosses an hour boundary
// is split between the hours.
func TestIntervalAcrossHours(t *testing.T) {
	m := &Model{Cluster: "c", GPUs: []GPU{{Node: "n", Index: "0", Flavor: "f", RateMicrosPerHour: 3_600_000}},
		NamespaceTeams: map[string]string{"ns": "team"}}
	samples := []Sample{
		{TimeMs: t0.UnixMilli() + 3590_000, Node: "n", GPU: "0", Namespace: "ns", Pod: "p", Field: FieldGPUUtil, Value: 100},
		{TimeMs: t0.UnixMilli() + 3605_000, Node: "n", GPU: "0", Namespace: "ns", Pod: "p", Field: FieldGPUUtil, Value: 100},
	}
	rows, _ := run(t, m, samples, nil, t0.Add(2*time.Hour))
	got := map[time.Time]float64{}
	for _, r := range rows {
		if r.Team == "team" {
			got[r.Hour] = r.GPUSeconds
		}
	}
	want := map[time.Time]float64{t0: 10, t0.Add(time.Hour): 5 + 15}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("held seconds per hour (-want +got):\n%s", diff)
	}
	checkReconciles(t, m, rows)
}

// checkEnergyReconciles: each hour's energy cost is the price of the hour's
// energy, whoever it was booked to.
func checkEnergyReconciles(t *testing.T, m *Model, rows []ledger.Row) {
	t.Helper()
	a, _ := New(m, Options{})
	cost := map[time.Time]int64{}
	joules := map[time.Time]float64{}
	for _, r := range rows {
		cost[r.Hour] += r.EnergyCostMicros
		joules[r.Hour] += r.EnergyJoules
	}
	for h, c := range cost {
		// Energy is booked in whole mJ, so the joules sum to them exactly
		// up to float rounding.
		want := a.energyCostMicros(int64(math.Round(joules[h] * 1000)))
		if c != want {
			t.Errorf("hour %s: energy cost %d, want %d for %.3f J", h.Format(time.RFC3339), c, want, joules[h])
		}
	}
}

func TestNewRejectsBadModel(t *testing.T) {
	m := &Model{GPUs: []GPU{
		{Node: "n", Index: "0", Model: "NVIDIA A30", MIG: []string{"4g.24gb", "1g.6gb"}},
		{Node: "n", Index: "0"},
		{Node: "n", Index: "1", RateMicrosPerHour: -1},
		{Node: "n", Index: "2", MIG: []string{"big"}},
	}}
	_, err := New(m, Options{})
	if err == nil {
		t.Fatal("New accepted a bad model")
	}
	for _, want := range []string{"uses 5 compute slices; a NVIDIA A30 has 4", "listed twice", "rate -1 is negative", `MIG profile "big"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestPrimeMakesResumeIdentical: a run split at an hour, the second part
// primed with the minutes before it, gives the ledger of an unsplit run.
func TestPrimeMakesResumeIdentical(t *testing.T) {
	samples, pods := scenarioFeed()
	// Shift the scenario's hour into two hours: the same samples again one
	// hour later, with the counters continuing.
	var two []Sample
	two = append(two, samples...)
	for _, s := range samples {
		s.TimeMs += hourMs
		if s.Field == FieldTotalEnergy {
			s.Value += 2e9
		}
		two = append(two, s)
	}
	m := scenarioModel()
	whole, _ := run(t, m, two, pods, t0.Add(2*time.Hour))

	first, err := New(m, Options{StartMs: t0.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(m, Options{StartMs: t0.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		first.AddPod(p)
		second.AddPod(p)
	}
	split := t0.Add(time.Hour).UnixMilli()
	for i := range two {
		s := &two[i]
		if s.TimeMs < split {
			first.Add(s)
			if s.TimeMs >= split-5*60_000 {
				second.Prime(s)
			}
		} else {
			second.Add(s)
		}
	}
	a, _ := first.Emit(split)
	b, _ := second.Emit(t0.Add(2 * time.Hour).UnixMilli())
	if diff := cmp.Diff(whole, append(a, b...), cmpopts.EquateApprox(0, 1e-6)); diff != "" {
		t.Errorf("resumed run differs from the whole run (-whole +resumed):\n%s", diff)
	}
	// Without priming, the first energy sample after the split is lost.
	unprimed, _ := New(m, Options{StartMs: split})
	for _, p := range pods {
		unprimed.AddPod(p)
	}
	for i := range two {
		if two[i].TimeMs >= split {
			unprimed.Add(&two[i])
		}
	}
	c, _ := unprimed.Emit(t0.Add(2 * time.Hour).UnixMilli())
	if cmp.Equal(b, c, cmpopts.EquateApprox(0, 1e-6)) {
		t.Error("priming made no difference; the test does not test it")
	}
}
