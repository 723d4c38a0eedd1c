package sim

import (
	"strings"
	"testing"
	"time"
)

// TestRunTimeByFlavor: a job runs its duration over its flavor's speed, so
// that the same job ends sooner on a faster GPU; on Gavel's GPU types the
// speed is its model's throughput ratio.
func TestRunTimeByFlavor(t *testing.T) {
	flavors := []ReplayFlavor{
		{Name: "fast", Share: 0.5, PriceMicrosPerGPUHour: 6_880_000, Speed: 4},
		{Name: "slow", Share: 0.5, PriceMicrosPerGPUHour: 526_000},
	}
	qs := []TraceQueue{{Name: "a", NominalGPUs: 16, BorrowingLimit: -1}}
	// Two 8-GPU jobs of 8 h: the first lands on fast (tried first), the
	// second on slow.
	jobs := []TraceJob{
		{ID: "j1", Queue: "a", Duration: 8 * time.Hour, GPUs: 8, Pods: 1, PerPod: 8},
		{ID: "j2", Queue: "a", Duration: 8 * time.Hour, GPUs: 8, Pods: 1, PerPod: 8},
	}
	res, err := Replay(qs, jobs, ReplayOptions{Policy: "fifo", Gating: true, Flavors: flavors})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range res.Outcomes {
		got[o.ID] = o.Flavor + " " + (o.Finish - o.Start).String()
	}
	if got["j1"] != "fast 2h0m0s" || got["j2"] != "slow 8h0m0s" {
		t.Errorf("runs %v; want j1 on fast for 2h, j2 on slow for 8h", got)
	}

	// Gavel's table: a CycleGAN trains 4.4261/0.5048 = 8.77 times as fast
	// on a V100 as on a K80; a recommendation model (batch 512) slower.
	gv := []ReplayFlavor{{Name: "v100", GavelGPU: "v100", TraceGPU: "k80"}, {Name: "k80", GavelGPU: "k80", TraceGPU: "k80"}}
	rt, err := RunTimes(TraceJob{ID: "x", Duration: 877 * time.Minute, Model: "CycleGAN"}, gv)
	if err != nil {
		t.Fatal(err)
	}
	if d := rt["v100"]; d < 99*time.Minute || d > 101*time.Minute || rt["k80"] != 877*time.Minute {
		t.Errorf("CycleGAN of 877 min on a K80: %v", rt)
	}
	rt, _ = RunTimes(TraceJob{ID: "y", Duration: time.Hour, Model: "Recommendation (batch size 512)"}, gv)
	if rt["v100"] <= time.Hour {
		t.Errorf("Recommendation (batch 512) on a V100: %v; Gavel measured it slower than on a K80", rt["v100"])
	}
	// A job without a model gets one by its ID: the same in every replay.
	a, _ := RunTimes(TraceJob{ID: "job-17", Duration: time.Hour}, gv)
	b, _ := RunTimes(TraceJob{ID: "job-17", Duration: time.Hour}, gv)
	if a["v100"] != b["v100"] || a["v100"] == time.Hour {
		t.Errorf("job-17: %v then %v", a, b)
	}

	for _, c := range []struct {
		f    ReplayFlavor
		want string
	}{
		{ReplayFlavor{Name: "a", Speed: -1}, "speed -1"},
		{ReplayFlavor{Name: "a", GavelGPU: "h100", TraceGPU: "k80"}, `Gavel GPU "h100"`},
		{ReplayFlavor{Name: "a", GavelGPU: "v100"}, "the trace's GPU is not given"},
		{ReplayFlavor{Name: "a", GavelGPU: "v100", TraceGPU: "k80", Speed: 2}, "want one"},
	} {
		if _, err := RunTimes(TraceJob{ID: "z", Duration: time.Hour}, []ReplayFlavor{c.f}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.f, err, c.want)
		}
	}
}
