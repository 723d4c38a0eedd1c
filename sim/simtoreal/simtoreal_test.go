package simtoreal

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/kubetest"
	"github.com/gpuledger/gpuledger/internal/testenv"
)

// TestSimulatorWorld runs the mechanism scenario in the simulator alone:
// every policy gets a row, and every job it started is in outcomes.csv.
func TestSimulatorWorld(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	o := Options{Workload: "mechanism", Span: 6 * time.Hour, Limit: 6 * time.Hour, Seed: 1, Speedup: 240,
		HalfLife: 6 * time.Hour, Sampling: time.Second, Policies: []string{"kueue-afs", "costfair"}, Out: dir, Command: "test"}
	if err := Run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	for _, p := range o.Policies {
		if !strings.Contains(out.String(), p+"  simulator") {
			t.Errorf("no simulator row for %s in:\n%s", p, out.String())
		}
	}
	f, err := os.Open(filepath.Join(dir, "outcomes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, r := range rows[1:] {
		if r[1] != "sim" {
			t.Errorf("row %v: world %q without a real run", r, r[1])
		}
		per[r[0]]++
	}
	if per["kueue-afs"] == 0 || per["costfair"] == 0 {
		t.Errorf("outcomes per policy %v: want both policies' jobs", per)
	}
}

func TestUnknownWorkload(t *testing.T) {
	err := Run(context.Background(), new(strings.Builder), Options{Workload: "nope", Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err = %v, want one naming the workload", err)
	}
}

// TestCohortLayout: the cohort layout runs Kueue's cohort fair sharing and
// costfair-drs in the simulator, says so in its header, and its Check
// refuses a policy the layout cannot run on a real Kueue, naming it.
func TestCohortLayout(t *testing.T) {
	var out strings.Builder
	o := Options{Workload: "mechanism", Layout: "cohort", Span: 6 * time.Hour, Limit: 6 * time.Hour, Seed: 1, Speedup: 240,
		HalfLife: 6 * time.Hour, Sampling: time.Second, Policies: []string{"kueue", "costfair-drs"}, Out: t.TempDir(), Command: "test", Runs: 1,
		Worlds: []string{"sim"}}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a ClusterQueue per team in one cohort", "costfair-drs  simulator", "kueue  simulator"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	// The simulator alone runs any of its policies; a real Kueue only
	// the layout's.
	o.Policies = []string{"kueue-afs"}
	if err := o.Check(); err != nil {
		t.Errorf("kueue-afs in the simulator alone: %v", err)
	}
	o.Worlds = []string{"sim", "kueue"}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), `"kueue-afs"`) || !strings.Contains(err.Error(), "-layout cohort") {
		t.Errorf("kueue-afs in the cohort layout: %v, want an error naming both", err)
	}
	o.Layout, o.Policies = "tree", nil
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), `"tree"`) {
		t.Errorf("layout tree: %v, want an error naming it", err)
	}
}

// TestRealRunControlPlane: a real run writes control-plane.csv, a row a
// trace hour with what Kueue's scheduler did and the cores each process
// used, read from Kueue's metrics and /proc.
func TestRealRunControlPlane(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	if err := kubetest.Built(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	var out strings.Builder
	dir := t.TempDir()
	o := Options{Workload: "mechanism", Layout: "shared", Span: 3 * time.Hour, Limit: 3 * time.Hour, Seed: 1, Speedup: 600,
		HalfLife: time.Hour, Sampling: time.Second, WeightInterval: 10 * time.Minute, Policies: []string{"kueue"}, Out: dir, Command: "test", Runs: 1,
		Worlds: []string{"sim", "kueue"}}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kueue-1", "control-plane.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 || lines[0] != loadHeader {
		t.Fatalf("control-plane.csv: want its header and a row for each of the first trace hours at least, got:\n%s", b)
	}
	head := strings.Split(lines[0], ",")
	for _, l := range lines[1:] {
		row := map[string]string{}
		for i, v := range strings.Split(l, ",") {
			row[head[i]] = v
		}
		for _, col := range []string{"kueue_cycles", "kueue_busy", "pending_active", "cores_kueue", "cores_kube_apiserver", "cores_etcd", "cores_gpuledger"} {
			if v, err := strconv.ParseFloat(row[col], 64); err != nil || v < 0 {
				t.Errorf("hour %s: %s %q, want a figure", row["hour"], col, row[col])
			}
		}
	}
	if !strings.HasPrefix(lines[1], "1,") {
		t.Errorf("first row %q, want hour 1", lines[1])
	}
	if t.Failed() {
		log, _ := os.ReadFile(filepath.Join(dir, "kueue-1", "controller.log"))
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, "sim-to-real") {
				t.Log(l)
			}
		}
	}
}
