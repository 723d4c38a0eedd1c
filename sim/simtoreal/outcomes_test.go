package simtoreal

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKeptOutcomes: a run's outcomes read back as a real Kueue's
// (-kueue.outcomes) give the figures they were computed from, line for
// line, without a Kueue; the teams' lines are printed for both worlds.
func TestKeptOutcomes(t *testing.T) {
	dir := t.TempDir()
	o := Options{Workload: "mechanism", Span: 12 * time.Hour, Limit: 12 * time.Hour, Seed: 1, Speedup: 60,
		HalfLife: time.Hour, Sampling: time.Second, WeightInterval: 10 * time.Minute, Policies: []string{"costfair+targets"},
		Worlds: []string{"sim"}, Runs: 1, Layout: "shared", MaxPending: 8, Out: dir, Command: "test"}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	var simOut strings.Builder
	if err := Run(context.Background(), &simOut, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "outcomes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "kept.csv")
	if err := os.WriteFile(kept, []byte(strings.ReplaceAll(string(b), ",sim,0,", ",kueue,1,")), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Worlds, o.KueueOutcomes = []string{"sim", "kueue"}, kept
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	row := func(world string) string {
		m := regexp.MustCompile(`costfair\+targets +` + world + `((?: +\S+){10})`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no %s row in:\n%s", world, out.String())
		}
		return m[1]
	}
	if s, k := row("simulator"), row("Kueue run 1"); s != k {
		t.Errorf("the kept run's figures %q, the simulator's %q: want the same", k, s)
	}
	if !strings.Contains(out.String(), " 0s  100%") {
		t.Errorf("want no divergence (0s, 100%% same flavor) in:\n%s", out.String())
	}
	for _, label := range []string{"costfair+targets/simulator", "costfair+targets/kueue-1"} {
		for _, team := range []string{"llm", "notebooks", "research", "vision"} {
			if !regexp.MustCompile(regexp.QuoteMeta(label) + ` +` + team + ` +(?:[+-]0\.\d{3}|-) `).MatchString(out.String()) {
				t.Errorf("no %s line of team %s in:\n%s", label, team, out.String())
			}
		}
	}
	// Another policy than the file's: a clear error.
	o.Policies = []string{"kueue"}
	err = Run(context.Background(), new(strings.Builder), o)
	if err == nil || !strings.Contains(err.Error(), `no real Kueue run of policy "kueue"`) {
		t.Errorf("err = %v, want one saying the file has no run of kueue", err)
	}
}

func TestReadOutcomes(t *testing.T) {
	const head = "policy,world,run,job,queue,gpus,flavor,submit_s,start_s,finish_s\n"
	got, err := ReadOutcomes(strings.NewReader(head+
		"p,sim,0,j0,a,1,h100,0,0,10\n"+
		"p,kueue,1,j1,a,2,h100,0,5,3605\n"+
		"p,kueue,2,j1,a,2,t4,0,7,0\n"+
		"q,kueue,1,j2,b,1,t4,0,0,1\n"), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("runs %v: want runs 1 and 2 of p, one job each", got)
	}
	if o := got[1][0]; o.ID != "j1" || o.Queue != "a" || o.GPUs != 2 || o.Flavor != "h100" || o.Start != 5*time.Second || o.Finish != 3605*time.Second {
		t.Errorf("run 1: %+v", o)
	}
	if o := got[2][0]; o.Finish != 0 || o.Flavor != "t4" {
		t.Errorf("run 2 (still running): %+v", o)
	}
	for _, c := range []struct{ in, want string }{
		{"", "outcomes header"},
		{"a,b\n", "outcomes header"},
		{head + "p,kueue,x,j,a,1,h100,0,0,1\n", `line 2: run "x"`},
		{head + "p,kueue,1,j,a,0,h100,0,0,1\n", `line 2: gpus "0"`},
		{head + "p,kueue,1,j,a,1,h100,0,-1,1\n", `line 2: start_s "-1"`},
		{head + "p,kueue,1,j,a,1,h100,0,NaN,1\n", `start_s "NaN"`},
		{head + "p,kueue,1,j,a,1,h100,9,5,10\n", "want submit ≤ start ≤ finish"},
		{head + "p,kueue,1,j,a,1,h100,0,5,4\n", "want submit ≤ start ≤ finish"},
		{head + "p,kueue,1,j,,1,h100,0,0,1\n", `queue ""`},
		{head + "p,kueue,1,j,a,1\n", "wrong number of fields"},
		{head + "p,sim,0,j,a,1,h100,0,0,1\n", `no real Kueue run of policy "p"`},
	} {
		_, err := ReadOutcomes(strings.NewReader(c.in), "p")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want one containing %q", c.in, err, c.want)
		}
	}
}

func FuzzReadOutcomes(f *testing.F) {
	f.Add("policy,world,run,job,queue,gpus,flavor,submit_s,start_s,finish_s\np,kueue,1,j1,a,2,h100,0,5,3605\n")
	f.Add("policy,world,run,job,queue,gpus,flavor,submit_s,start_s,finish_s\np,kueue,1,j1,a,2,h100,1e300,1e301,0\n")
	f.Fuzz(func(t *testing.T, in string) {
		runs, err := ReadOutcomes(strings.NewReader(in), "p")
		if err != nil {
			return
		}
		for run, outs := range runs {
			for _, o := range outs {
				if run < 1 || o.GPUs < 1 || o.Start < o.Submit || (o.Finish != 0 && o.Finish < o.Start) {
					t.Fatalf("run %d: accepted %+v", run, o)
				}
			}
		}
	})
}
