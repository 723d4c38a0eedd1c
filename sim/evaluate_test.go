package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEvaluate runs a small grid: every candidate variant in every cell,
// tuned rows only for the held-out half, ratios against the better
// baseline of the same cell, and the same grid twice gives the same runs.
func TestEvaluate(t *testing.T) {
	c := EvalConfig{Dir: phillyDir(t), Halves: [2][]string{{"ed69ec", "2869ce"}, {"0e4a51"}}, Workloads: []string{"philly", "gavel"},
		GavelJobsPerHour: 4, From: 30 * 24 * time.Hour, Span: 3 * 24 * time.Hour, OffsetSpread: 10 * 24 * time.Hour,
		Seeds: []uint64{1, 2}, Loads: []float64{0.9}, TuneLoads: []float64{0.9}, Regimes: []string{"none", "kueue"},
		Candidates: DefaultCandidates(), Workers: 2}
	var last int
	runs, err := Evaluate(context.Background(), c, func(stage string, done, total int) {
		if stage == "replays" {
			last = total
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	variants := 0
	for _, cand := range c.Candidates {
		variants += len(cand.Variants)
	}
	if want := 2 * 2 * 2 * 2 * variants; len(runs) != want || last != want {
		t.Fatalf("%d runs (progress said %d), want %d", len(runs), last, want)
	}
	for _, r := range runs {
		if r.Result.Finished != r.Result.Jobs || r.Result.Jobs == 0 || r.Result.PartialGangGPUHours != 0 {
			t.Errorf("%+v: %d of %d finished, %.1f partial GPU-h", r, r.Result.Finished, r.Result.Jobs, r.Result.PartialGangGPUHours)
		}
		// The load as built: the offered demand over the GPUs the
		// replay had, near the load asked for (whole nodes of 8), not it.
		if r.BuiltLoad <= 0 || math.Abs(r.BuiltLoad-r.Load) > 0.15*r.Load || r.Result.GPUs%8 != 0 {
			t.Errorf("%s/%s seed %d: built load %.3f for %.2f on %d GPUs", r.Workload, r.Half, r.Seed, r.BuiltLoad, r.Load, r.Result.GPUs)
		}
	}
	rows := Tuned(c, runs)
	// Per test half: every candidate, per workload and regime.
	if len(rows) != 2*len(c.Candidates)*2*2 {
		t.Errorf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.Seeds != 2 || r.JCTRatio.Min > r.JCTRatio.Mean || r.JCTRatio.Mean > r.JCTRatio.Max {
			t.Errorf("row %+v", r)
		}
		// The better baseline of a cell is never above 1 against itself.
		if r.Candidate == "kueue" || r.Candidate == "kueue-afs" {
			if r.JCTRatio.Min < 1-1e-9 {
				t.Errorf("baseline %s at %.3f of the best baseline", r.Candidate, r.JCTRatio.Min)
			}
		}
	}
	var sb strings.Builder
	if err := WriteEvalTable(&sb, rows); err != nil || !strings.Contains(sb.String(), "avg JCT / best Kueue") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
	g := DefaultGoal()
	g.Loads, g.MoneyLoads = []float64{0.9}, nil
	goal := GoalCheck(rows, g)
	if !strings.HasPrefix(goal["costfair"], "misses") && goal["costfair"] != "meets the goal" {
		t.Errorf("goal check: %q", goal["costfair"])
	}
	sb.Reset()
	WriteGoal(&sb, c, rows)
	for _, cand := range c.Candidates {
		name := cand.Name
		if cand.Baseline {
			name += " (Kueue)"
		}
		if !strings.Contains(sb.String(), "  "+name+" ") {
			t.Errorf("goal lines without %s:\n%s", name, sb.String())
		}
	}
	again, err := Evaluate(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runs, again, cmp.AllowUnexported(ReplayResult{})); diff != "" {
		t.Errorf("the same grid twice differs:\n%s", diff)
	}
}

// TestGoalCheck: the verdict follows each criterion.
func TestGoalCheck(t *testing.T) {
	g := DefaultGoal()
	ok := EvalRow{Candidate: "x", Load: 0.85, JCTRatio: Spread{Mean: 1.02}, MaxWaitHours: Spread{Mean: 5.4}, BaseMaxWaitHours: Spread{Mean: 5}}
	if got := GoalCheck([]EvalRow{ok}, g); got["x"] != "meets the goal" {
		t.Errorf("a row within every bound: %q", got["x"])
	}
	for name, bad := range map[string]func(*EvalRow){
		"JCT ratio":     func(r *EvalRow) { r.JCTRatio.Mean = 1.031 },
		"max wait":      func(r *EvalRow) { r.MaxWaitHours.Mean = 5.6 },
		"partial gangs": func(r *EvalRow) { r.PartialGPUHours.Max = 0.5 },
	} {
		r := ok
		bad(&r)
		if got := GoalCheck([]EvalRow{r}, g); !strings.Contains(got["x"], name) {
			t.Errorf("%s: %q", name, got["x"])
		}
	}
	// Rows at other loads do not count.
	r := ok
	r.JCTRatio.Mean, r.Load = 2, 0.7
	if got := GoalCheck([]EvalRow{ok, r}, g); got["x"] != "meets the goal" {
		t.Errorf("a row outside the goal loads counted: %q", got["x"])
	}
	// The money gap at 1.1: 0.03 or under, or half of kueue-afs's in the
	// same cell.
	afs := EvalRow{Candidate: "kueue-afs", Load: 1.1, JCTRatio: Spread{Mean: 1}, MoneyGap: Spread{Mean: 0.12}}
	for _, c := range []struct {
		gap  float64
		meet bool
	}{{0.03, true}, {0.06, true}, {0.061, false}} {
		r := ok
		r.Load, r.MoneyGap.Mean = 1.1, c.gap
		got := GoalCheck([]EvalRow{afs, r}, g)["x"]
		if (got == "meets the goal") != c.meet || !c.meet && !strings.Contains(got, "money gap 0.061 (kueue-afs 0.120)") {
			t.Errorf("money gap %g against kueue-afs's 0.12: %q", c.gap, got)
		}
	}
	g.MoneyLoads = nil
	r = ok
	r.Load, r.MoneyGap.Mean = 1.1, 0.5
	if got := GoalCheck([]EvalRow{r}, g); got["x"] != "meets the goal" {
		t.Errorf("one flavor, no money criterion: %q", got["x"])
	}
}

func TestPickCandidates(t *testing.T) {
	got, err := PickCandidates([]string{"costfair-drs"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "kueue,kueue-afs,costfair-drs" {
		t.Errorf("picked %v; want the baselines and costfair-drs", names)
	}
	if _, err := PickCandidates([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown candidate: %v", err)
	}
	if all, _ := PickCandidates(nil); len(all) != len(DefaultCandidates()) {
		t.Errorf("none named: %d candidates, want all %d", len(all), len(DefaultCandidates()))
	}
}
