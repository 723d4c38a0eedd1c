package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/attribution"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestBadConfigs checks that each testdata/*.bad.yaml gets every one of its
// problems listed, as in its .golden file.
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/*.bad.yaml")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := Load(file)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load(%s) = %v, want a config.Error", file, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGoodConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	files = append(files, "../examples/cluster.yaml")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.AttributionModel("")
			if err != nil {
				t.Fatal(err)
			}
			if len(m.GPUs) == 0 || m.HourlyCostMicros() <= 0 {
				t.Errorf("model has %d GPUs costing %d an hour", len(m.GPUs), m.HourlyCostMicros())
			}
		})
	}
}

// TestExampleModel pins the example cluster: 64 GPUs, 48 H100 at 6.88 and
// 16 A100 at 3.430881 per GPU-hour.
func TestExampleModel(t *testing.T) {
	c, err := Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.AttributionModel("gpu-prod-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.HourlyCostMicros(), int64(48*6_880_000+16*3_430_881); got != want {
		t.Errorf("hourly cost %d, want %d", got, want)
	}
	if len(m.GPUs) != 64 {
		t.Errorf("%d GPUs, want 64", len(m.GPUs))
	}
	if got := m.ClusterQueueTeams["nlp-serving"]; got != "nlp" {
		t.Errorf("nlp-serving belongs to %q, want nlp", got)
	}
	if _, err := c.AttributionModel("nope"); err == nil {
		t.Error("unknown cluster accepted")
	}
}

func TestMoneyIsExact(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(mustRead(t, "testdata/minimal.good.yaml"), "perGPUHour: 2.5", "perGPUHour: 0.1", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PriceMicros("a100"); got != 100_000 {
		t.Errorf("price %d micros, want 100000", got)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParse: no input makes Parse panic, and an accepted config builds a
// model.
func FuzzParse(f *testing.F) {
	for _, pat := range []string{"testdata/*.yaml", "../examples/*.yaml"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("error %v is not a config.Error with problems", err)
			}
			return
		}
		for _, cl := range c.Clusters {
			if _, err := c.AttributionModel(cl.Name); err != nil {
				t.Fatalf("valid config, but model for %q: %v", cl.Name, err)
			}
		}
	})
}

// TestFeatureModel checks the rates and sharing a config with every option
// resolves to; the figures are worked out by hand in the comments.
func TestFeatureModel(t *testing.T) {
	c, err := Load("testdata/features.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]int64{
		"l4":  1_668_800, // aws g6.48xlarge: 13.3504 / 8
		"a10": 750_000,
		// 35000/(48×730) + 0.7 kW × 1.3 × 0.12 + 150/730
		// = 0.998858… + 0.1092 + 0.205479… = 1.313538 (rounded)
		"h100-owned": 1_313_538,
		"h100-spot":  6_326_193, // gcp a3-highgpu-8g spot: 50.6095408… / 8
	}
	for f, want := range rates {
		if got := c.PriceMicros(f); got != want {
			t.Errorf("rate of %s = %d, want %d", f, got, want)
		}
	}
	// Where each rate comes from, as the lines that explain a bill say.
	for f, want := range map[string]string{
		"l4":         "price book aws/g6.48xlarge on-demand",
		"a10":        "configured perGPUHour",
		"h100-owned": "on-prem amortisation: 35000.00 USD a GPU over 48 months, 700 W, 150.00 a month overhead",
		"h100-spot":  "price book gcp/a3-highgpu-8g spot",
		"nope":       "",
	} {
		if got := c.PriceSource(f); got != want {
			t.Errorf("source of %s's rate = %q, want %q", f, got, want)
		}
	}
	if cp := c.Capacity; cp == nil || cp.PurchaseGPUs != 64 || cp.UtilizationPercent != 85 || cp.WindowDays != 28 || cp.ReclaimIdleMinutes != 120 {
		t.Errorf("capacity %+v", cp)
	}
	m, err := c.AttributionModel("")
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string]attribution.GPU{}
	for _, g := range m.GPUs {
		byNode[g.Node] = g
	}
	f := func(node string, replicas int, byRequest bool) {
		t.Helper()
		if g := byNode[node]; g.Replicas != replicas || g.SplitByRequest != byRequest {
			t.Errorf("%s: replicas %d, by request %v; want %d, %v", node, g.Replicas, g.SplitByRequest, replicas, byRequest)
		}
	}
	f("ts-1", 4, false)
	f("ts-2", 2, true)
	f("frac-1", 1000, true)
	f("own-1", 0, false)
	if got := m.Quotas[attribution.QuotaRef{ClusterQueue: "all", Flavor: "l4"}]; got != 32*attribution.QuotaUnitsPerGPU {
		t.Errorf("quota all/l4 = %d units, want 32 GPUs = %d", got, 32*attribution.QuotaUnitsPerGPU)
	}
	if m.Unallocated != attribution.UnallocatedByQuota || m.EnergyPriceMicrosPerKWh != 120_000 || m.PUEMicros != 1_300_000 {
		t.Errorf("policy %v, energy %d, PUE %d", m.Unallocated, m.EnergyPriceMicrosPerKWh, m.PUEMicros)
	}
}

// TestExampleQuotasInGPUs: MIG quotas count their compute share of the GPU.
func TestExampleQuotasInGPUs(t *testing.T) {
	c, err := Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.AttributionModel("")
	// nlp-serving on h100-mig: 6 × 3g + 4 × 2g + 8 × 1g = (18 + 8 + 8)/7
	// GPUs, exactly 34 × 4 = 136 units of 1/28 GPU (it was 4,856 milli-GPU,
	// 2/7 of a milli short, before).
	if got, want := m.Quotas[attribution.QuotaRef{ClusterQueue: "nlp-serving", Flavor: "h100-mig"}], int64(34*4); got != want {
		t.Errorf("nlp-serving h100-mig quota %d units, want %d", got, want)
	}
}

// TestWarnings: a GPU model gpuledger does not know is a warning with its
// position, not an error; a catalog price converts at the exchange rate.
func TestWarnings(t *testing.T) {
	c, err := Load("testdata/currency.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Path != "clusters[0].nodes[1].gpuModel" || c.Warnings[0].Line != 8 ||
		!strings.Contains(c.Warnings[0].Msg, `"Acme Tensor 9000" is not a GPU model gpuledger knows`) {
		t.Errorf("warnings %+v", c.Warnings)
	}
	// 0.526 USD × 0.92 = 0.48392 EUR.
	if got := c.PriceMicros("t4"); got != 483_920 {
		t.Errorf("t4 rate %d micro-EUR, want 483,920", got)
	}
}

// TestOwnershipWarnings: a team that owns nothing and a ClusterQueue
// owned by nobody are warnings with their positions: the first is never
// billed, the second bills _unowned where its LocalQueues' namespaces have
// no owner either. A ClusterQueue whose LocalQueues are all in owned
// namespaces is billed to those teams, and is not warned about.
func TestOwnershipWarnings(t *testing.T) {
	c, err := Load("testdata/owners.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, fmt.Sprintf("%d %s: %s", w.Line, w.Path, w.Msg))
	}
	want := []string{
		`14 clusterQueues[1]: ClusterQueue "orphan" is owned by no team, and its LocalQueue(s) scratch/default are in namespaces no team owns: their pods bill _unowned; add it to a team's clusterQueues`,
		`19 clusterQueues[2]: ClusterQueue "unused" is owned by no team and no LocalQueue points to it: pods admitted through it bill their namespaces' teams, or _unowned; add it to a team's clusterQueues`,
		`37 teams[1]: team "ghost" owns no ClusterQueue and no namespace, so nothing is ever billed to it; give it clusterQueues or namespaces`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestGPUModels(t *testing.T) {
	f := func(name string, known, mig bool, profile string) {
		t.Helper()
		info := attribution.GPUModel(name)
		if info.Known != known || info.MIG != mig || (profile != "" && !slicesContains(info.Profiles, profile)) {
			t.Errorf("GPUModel(%q) = %+v; want known %v, MIG %v, with %s", name, info, known, mig, profile)
		}
	}
	f("NVIDIA H100 80GB HBM3", true, true, "3g.40gb")
	f("NVIDIA H100 NVL", true, true, "3g.47gb")
	f("NVIDIA H200", true, true, "1g.18gb")
	f("NVIDIA A100-SXM4-40GB", true, true, "1g.5gb")
	f("NVIDIA A100 80GB PCIe", true, true, "1g.10gb")
	f("NVIDIA A30", true, true, "2g.12gb")
	f("NVIDIA A10G", true, false, "")
	f("NVIDIA A10", true, false, "")
	f("Tesla T4", true, false, "")
	f("NVIDIA L40S", true, false, "")
	f("NVIDIA GH200 480GB", true, true, "")
	f("Acme Tensor 9000", false, false, "")
}

// TestLoadTokens: a token file (a mounted secret) is checked like the
// configuration's tokens, and may not reuse their names.
func TestLoadTokens(t *testing.T) {
	c, err := Load("testdata/minimal.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(good, []byte("tokens:\n  - {name: admin, sha256: fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9, scopes: [admin]}\n"), 0o600)
	toks, err := LoadTokens(good, c)
	if err != nil || len(toks) != 1 || toks[0].Scopes[0] != "admin" {
		t.Fatalf("LoadTokens: %+v, %v", toks, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("tokens:\n  - {name: vmagent, sha256: fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9, scopes: [\"team:nobody\"]}\n"), 0o600)
	_, err = LoadTokens(bad, c)
	if err == nil || !strings.Contains(err.Error(), `token "vmagent" is defined twice`) || !strings.Contains(err.Error(), `team "nobody" is not defined`) {
		t.Errorf("bad token file: %v", err)
	}
}
