package attribution

import (
	"encoding/csv"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
)

// readLedgerCSV reads expected rows written by hand; lines starting with #
// are the explanation. Columns are found by their header names; the
// unmeasured_* columns may be left out (zero).
func readLedgerCSV(t *testing.T, path string) []ledger.Row {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	recs, err := csv.NewReader(strings.NewReader(strings.Join(lines, "\n"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := make(map[string]int)
	for i, name := range recs[0] {
		col[name] = i
	}
	var rows []ledger.Row
	for line, r := range recs[1:] {
		str := func(name string) string {
			i, ok := col[name]
			if !ok {
				return ""
			}
			return r[i]
		}
		f := func(name string) float64 {
			v := str(name)
			if v == "" {
				return 0
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: row %d, %s: %v", path, line+1, name, err)
			}
			return x
		}
		n := func(name string) int64 {
			v := str(name)
			if v == "" {
				return 0
			}
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: row %d, %s: %v", path, line+1, name, err)
			}
			return x
		}
		h, err := time.Parse(time.RFC3339, str("hour"))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ledger.Row{
			Key: ledger.Key{Hour: h, Cluster: str("cluster"), Team: str("team"), Namespace: str("namespace"), LocalQueue: str("local_queue"),
				ClusterQueue: str("cluster_queue"), Flavor: str("flavor"), Borrowed: str("borrowed") == "true"},
			GPUSeconds: f("gpu_seconds"), ActiveGPUSeconds: f("active_gpu_seconds"), UnmeasuredGPUSeconds: f("unmeasured_gpu_seconds"),
			CostMicros: n("cost_micros"), IdleCostMicros: n("idle_cost_micros"), UnmeasuredCostMicros: n("unmeasured_cost_micros"),
			UnallocatedCostMicros: n("unallocated_cost_micros"), EnergyJoules: f("energy_joules"), EnergyCostMicros: n("energy_cost_micros"),
		})
	}
	return rows
}

func scenarioModel() *Model {
	return &Model{
		Cluster: "lab",
		GPUs: []GPU{
			{Node: "mig-1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100-mig", RateMicrosPerHour: 7_000_000,
				MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
			{Node: "ts-1", Index: "0", Model: "NVIDIA L4", Flavor: "l4-shared", RateMicrosPerHour: 800_000, Replicas: 4},
			{Node: "frac-1", Index: "0", Model: "NVIDIA A10", Flavor: "a10-frac", RateMicrosPerHour: 1_000_000, Replicas: 1000, SplitByRequest: true},
			{Node: "h100-1", Index: "0", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
			{Node: "h100-1", Index: "1", Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 3_600_000},
		},
		LocalQueues: map[QueueRef]string{
			{"infer", "serving"}: "serving", {"research", "training"}: "research", {"vision", "training-v"}: "vision",
		},
		ClusterQueueTeams: map[string]string{"serving": "nlp", "research": "ml", "vision": "vision"},
		NamespaceTeams:    map[string]string{"research": "ml", "vision": "vision", "infer": "nlp"},
		Quotas: map[QuotaRef]int64{
			{"serving", "h100-mig"}: QuotaUnitsPerGPU, {"research", "l4-shared"}: QuotaUnitsPerGPU, {"vision", "h100"}: QuotaUnitsPerGPU,
		},
		EnergyPriceMicrosPerKWh: 100_000,
		PUEMicros:               1_500_000,
	}
}

// scenarioFeed is the hour testdata/scenario.csv describes.
func scenarioFeed() ([]Sample, []PodInfo) {
	var f feed
	energy := 10_000_000.0
	for sec := 0; sec < 3600; sec += 15 {
		f.scrape(sec, "mig-1", "0", "3g.40gb", "1", "infer", "llm-0", "serving", map[Field]float64{FieldGREngineActive: 0.6})
		if sec < 1800 {
			f.scrape(sec, "mig-1", "0", "2g.20gb", "2", "research", "nb-1", "", map[Field]float64{FieldGREngineActive: 0})
		} else {
			f.scrape(sec, "mig-1", "0", "2g.20gb", "2", "", "", "", map[Field]float64{FieldGREngineActive: 0})
		}
		f.scrape(sec, "mig-1", "0", "1g.10gb", "3", "", "", "", map[Field]float64{FieldGREngineActive: 0})
		f.scrape(sec, "mig-1", "0", "1g.10gb", "4", "", "", "", map[Field]float64{FieldGREngineActive: 0})
		f.scrape(sec, "ts-1", "0", "", "", "research", "a", "training", map[Field]float64{FieldGPUUtil: 50})
		f.scrape(sec, "ts-1", "0", "", "", "vision", "b", "", map[Field]float64{FieldGPUUtil: 50})
		f.scrape(sec, "frac-1", "0", "", "", "research", "c", "", map[Field]float64{FieldGREngineActive: 1})
		switch {
		case sec == 0:
		case sec == 1800:
			energy = 3_000_000 // the counter restarted
		default:
			energy += 6_000_000
		}
		f.scrape(sec, "h100-1", "0", "", "", "vision", "train-0", "", map[Field]float64{FieldGREngineActive: 0.8, FieldTotalEnergy: energy})
		f.scrape(sec, "h100-1", "1", "", "", "vision", "train-0", "", map[Field]float64{FieldGREngineActive: 0.8})
	}
	pods := []PodInfo{
		{Namespace: "vision", Pod: "train-0", Queue: "training-v", OwnerKind: "Job", OwnerName: "train"},
		{Namespace: "research", Pod: "c", Container: "main", RequestMilli: 250_000},
	}
	return f.samples, pods
}

func TestScenarioCSV(t *testing.T) {
	samples, pods := scenarioFeed()
	m := scenarioModel()
	rows, stats := run(t, m, samples, pods, t0.Add(time.Hour))
	want := readLedgerCSV(t, "testdata/scenario.csv")
	if diff := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-3)); diff != "" {
		t.Errorf("ledger differs from testdata/scenario.csv (-want +got):\n%s", diff)
	}
	checkReconciles(t, m, rows)
	if stats.CounterResets != 1 {
		t.Errorf("counter resets counted %d, want 1", stats.CounterResets)
	}
	if len(stats.Rejected) != 0 {
		t.Errorf("rejections %v, want none", stats.Rejected)
	}
}

// TestScenarioPolicies re-runs the scenario under the two sharing policies
// and checks where the 3,750,000 of unallocated cost goes, by hand:
//
//   - quota: each flavor's unallocated cost goes to the ClusterQueues with
//     quota in it. a10-frac has none, so its 750,000 stays; h100-mig's
//     3,000,000 goes to serving, the only queue with quota there (team nlp).
//   - usage: by each team's cost in the flavor that hour. a10-frac: ml alone
//     (250,000) gets 750,000; h100-mig: ml 1,000,000 and nlp 3,000,000 get
//     750,000 and 2,250,000.
func TestScenarioPolicies(t *testing.T) {
	samples, pods := scenarioFeed()
	type share struct {
		team, cq, flavor string
	}
	for _, tc := range []struct {
		policy UnallocatedPolicy
		want   map[share]int64
	}{
		{UnallocatedByQuota, map[share]int64{
			{ledger.TeamUnallocated, "", "a10-frac"}: 750_000,
			{"nlp", "serving", "h100-mig"}:           3_000_000,
		}},
		{UnallocatedByUsage, map[share]int64{
			{"ml", "", "a10-frac"}:         750_000,
			{"ml", "", "h100-mig"}:         750_000,
			{"nlp", "serving", "h100-mig"}: 2_250_000,
		}},
	} {
		m := scenarioModel()
		m.Unallocated = tc.policy
		rows, _ := run(t, m, samples, pods, t0.Add(time.Hour))
		got := map[share]int64{}
		for _, r := range rows {
			if r.UnallocatedCostMicros != 0 {
				got[share{r.Team, r.ClusterQueue, r.Flavor}] += r.UnallocatedCostMicros
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("policy %d: unallocated cost (-want +got):\n%s", tc.policy, diff)
		}
		checkReconciles(t, m, rows)
	}
}
