package sim

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLoadPhilly: service is single-GPU work, so a job's run time is it
// divided by its model's speed-up on its GPU count; a VC without a node
// count is an error unless told what to do; offsets come from the seed.
func TestLoadPhilly(t *testing.T) {
	dir := phillyDir(t)
	if _, _, err := LoadPhilly(dir, PhillyOptions{}); err == nil || !strings.Contains(err.Error(), "VC 51b7ef is not in philly_vc_nodes.csv") {
		t.Errorf("a VC without a node count: %v", err)
	}
	qs, jobs, err := LoadPhilly(dir, PhillyOptions{VCs: []string{"0e4a51"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].NominalGPUs != 32*8 || len(jobs) != 2465 {
		t.Fatalf("queues %+v, %d jobs", qs, len(jobs))
	}
	byID := map[string]TraceJob{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	// trace_0e4a51.csv app 0: 16482 s of TransformerModel256 on 1 GPU.
	if j := byID["0e4a51-0"]; j.Duration != 16482*time.Second || j.GPUs != 1 {
		t.Errorf("app 0: %+v", j)
	}
	// A multi-GPU job runs shorter than its service: its speed-up.
	var multi int
	for _, j := range jobs {
		if j.GPUs > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Fatal("no multi-GPU job in 0e4a51")
	}
	one, _, _ := LoadPhilly(dir, PhillyOptions{VCs: []string{"51b7ef"}, MissingNodes: 2})
	if len(one) != 1 || one[0].NominalGPUs != 16 {
		t.Errorf("an explicit node count: %+v", one)
	}
	// Offsets: the same seed, the same alignment; another seed, another.
	o := PhillyOptions{VCs: []string{"0e4a51", "ed69ec"}, OffsetSpread: 30 * 24 * time.Hour, OffsetSeed: 3}
	_, a, _ := LoadPhilly(dir, o)
	_, b, _ := LoadPhilly(dir, o)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different jobs:\n%s", diff)
	}
	o.OffsetSeed = 4
	_, c, _ := LoadPhilly(dir, o)
	if cmp.Equal(a, c) {
		t.Error("another seed gave the same alignment")
	}
	if s, err := ScaleForLoad(qs, jobs, 0, 0.85); err != nil || s <= 0 || s >= 1 {
		t.Errorf("scale for load 0.85: %v, %v", s, err)
	}
}

func TestLoadPhillyErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := writeFile(dir+"/"+name, body); err != nil {
			t.Fatal(err)
		}
	}
	write("philly_vc_nodes.csv", "vc,node num\nx,2\n")
	write("model_speedups.csv", "model_name,gpus,time_per_iteration_us,speedup\nM,1,10,1\nM,2,6,1.5\n")
	for _, c := range []struct{ trace, want string }{
		{"app_id,submit_time,service,num_jobs,sleep_time,model_name\n0,0,300,2,0,M\n", ""},
		{"app_id,submit_time,service,num_jobs,sleep_time,model_name\n0,0,300,4,0,M\n", `model_name "M" on 4 GPUs has no row`},
		{"app_id,submit_time,service,num_jobs,sleep_time,model_name\n0,x,300,1,0,M\n", `submit_time "x"`},
		{"app_id,submit_time,service,num_jobs\n0,0,300,1\n", "want app_id,submit_time,service,num_jobs,sleep_time,model_name"},
	} {
		write("trace_x.csv", c.trace)
		_, jobs, err := LoadPhilly(dir, PhillyOptions{})
		if c.want == "" {
			if err != nil || len(jobs) != 1 || jobs[0].Duration != 200*time.Second {
				t.Errorf("300 single-GPU seconds on 2 GPUs at 1.5×: %+v, %v", jobs, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.trace, err, c.want)
		}
	}
}

func writeFile(path, body string) error { return os.WriteFile(path, []byte(body), 0o644) }
