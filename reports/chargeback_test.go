package reports

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// testChargeback builds October 2026 from two days of rows: ml on h100 and
// a100, ds on h100, an unowned pod, unallocated capacity, and a row in
// November that must not be counted.
func testChargeback(t *testing.T) *Chargeback {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows []ledger.Row
	add := func(day, hour int, team, flavor string, secs, active float64, cost, idle int64) {
		h := time.Date(2026, 10, day, hour, 0, 0, 0, time.UTC)
		r := ledger.Row{Key: ledger.Key{Hour: h, Cluster: "c1", Team: team, Namespace: team, Flavor: flavor},
			GPUSeconds: secs, ActiveGPUSeconds: active, CostMicros: cost, IdleCostMicros: idle, EnergyJoules: secs * 500,
			EnergyCostMicros: int64(secs) * 20}
		if team == ledger.TeamUnallocated {
			r.IdleCostMicros, r.UnallocatedCostMicros = 0, idle
		}
		rows = append(rows, r)
	}
	add(1, 0, "ml", "h100", 7200, 6000, 13_760_000, 2_293_334)
	add(1, 0, "ml", "a100", 3600, 1800, 3_430_900, 1_715_450)
	add(1, 0, "ds", "h100", 3600, 360, 6_880_000, 6_192_000)
	add(1, 0, ledger.TeamUnowned, "h100", 1800, 0, 3_440_000, 3_440_000)
	add(1, 0, ledger.TeamUnallocated, "h100", 1800, 0, 3_440_000, 3_440_000)
	add(2, 13, "ml", "h100", 3600, 3600, 6_880_000, 0)
	add(2, 13, ledger.TeamUnallocated, "h100", 10800, 0, 20_640_000, 20_640_000)
	// ml ran 1 GPU-hour beyond its quota on day 2, and the quota policy
	// charged ds 1.000001 of unallocated cost.
	add(2, 13, "ml", "a100", 3600, 3000, 3_430_900, 500_000)
	rows[len(rows)-1].Borrowed = true
	rows = append(rows, ledger.Row{Key: ledger.Key{Hour: time.Date(2026, 10, 2, 13, 0, 0, 0, time.UTC), Cluster: "c1", Team: "ds", Flavor: "h100"},
		CostMicros: 1_000_001, UnallocatedCostMicros: 1_000_001})
	rows = append(rows, ledger.Row{Key: ledger.Key{Hour: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Cluster: "c1", Team: "ml", Flavor: "h100"}, CostMicros: 1})
	// Vision's pod ran an hour on day 3 while the exporter was down: held by
	// Kubernetes' allocation, activity unmeasured, 2,000,000.
	rows = append(rows, ledger.Row{Key: ledger.Key{Hour: time.Date(2026, 10, 3, 5, 0, 0, 0, time.UTC), Cluster: "c1", Team: "vision", Namespace: "vision", Flavor: "a100"},
		GPUSeconds: 3600, UnmeasuredGPUSeconds: 3600, CostMicros: 2_000_000, UnmeasuredCostMicros: 2_000_000})
	h := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	workloads := []ledger.WorkloadRow{
		{Hour: h, Cluster: "c1", Team: "ds", Namespace: "ds", Kind: "StatefulSet", Name: "nb-7", GPUSeconds: 3600, ActiveGPUSeconds: 360, CostMicros: 6_880_000, IdleCostMicros: 6_192_000},
		{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml", Kind: "Job", Name: "train-1", GPUSeconds: 10800, ActiveGPUSeconds: 7800, CostMicros: 17_190_900, IdleCostMicros: 4_008_784},
	}
	if err := s.WriteHours(context.Background(), rows, workloads); err != nil {
		t.Fatal(err)
	}
	// Queue cq-ml's last two days of the month: 4 workloads an hour
	// admitted after up to 2560 s, one pending: too few of the week's
	// hours for a verdict.
	var queues []ledger.QueueRow
	for hour := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC); hour.Month() == time.October; hour = hour.Add(time.Hour) {
		queues = append(queues, ledger.QueueRow{Hour: hour, Cluster: "c1", ClusterQueue: "cq-ml", PendingWorkloads: 1, PendingGPUs: 8, Admitted: 4,
			AdmittedWait: ledger.Histogram{Bounds: []float64{1280, 2560, math.Inf(1)}, Counts: []float64{1, 4, 4}},
			PendingWait:  ledger.Histogram{Bounds: []float64{1280, 2560, math.Inf(1)}, Counts: []float64{0, 1, 1}}})
	}
	if err := s.WriteQueueHours(context.Background(), queues); err != nil {
		t.Fatal(err)
	}
	// An inference endpoint of ds, idle from 0:00 to 8:00 on Oct 1 and 2
	// (its workload has no rows: one GPU a replica at the default price).
	var eps []ledger.EndpointRow
	for hour := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC); hour.Before(time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC)); hour = hour.Add(time.Hour) {
		e := ledger.EndpointRow{Hour: hour, Cluster: "c1", Namespace: "ds", Model: "qwen-7b", Kind: "ReplicaSet", Name: "qwen-7d9f8b6c5", Pods: 1,
			ReportedSeconds: 3600, BusySeconds: 1800, Requests: 600}
		if hour.Hour() == 8 {
			e.Gaps.Add(8 * 3600)
			e.Gaps.AddWoken(ledger.Bucket(8*3600), []float64{1, 1, 1, 1, 1}, 5)
		}
		if hour.Hour() < 8 {
			e.BusySeconds, e.Requests = 0, 0
		}
		eps = append(eps, e)
	}
	if err := s.WriteEndpointHours(context.Background(), eps); err != nil {
		t.Fatal(err)
	}
	cb, err := Build(context.Background(), s, time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC), Options{
		Currency: "USD", Teams: []string{"ml", "vision", "ds"}, FOCUS: true,
		Budgets:  map[string]int64{"ml": 20_000_000, "ds": 5_000_000, "vision": 1_000_000},
		Capacity: &capacity.DefaultRule, PricesMicros: map[string]int64{"h100": 6_880_000, "a100": 3_430_900},
		Wait: &capacity.DefaultWaitRule, Endpoints: &capacity.EndpointOptions{Default: 2 * time.Minute, PriceMicros: 6_880_000,
			Classes: []capacity.SLAClass{{Name: "batch", Namespaces: []string{"ds"}, PenaltyMicros: 100_000, MaxP95: -1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

func TestChargebackCSV(t *testing.T) {
	cb := testChargeback(t)
	if cb.FileBase() != "chargeback-2026-10" {
		t.Errorf("file base %q", cb.FileBase())
	}
	// The month reconciles: the lines sum to everything the ledger holds
	// for October.
	var sum int64
	for _, l := range cb.Lines {
		sum += l.CostMicros
	}
	// 58,470,900 on the first days plus ml's borrowed 3,430,900, ds's
	// unallocated share 1,000,001 and vision's unmeasured hour 2,000,000.
	if want := int64(64_901_801); sum != want || cb.Total.CostMicros != want {
		t.Errorf("lines sum to %d, total %d; want %d", sum, cb.Total.CostMicros, want)
	}
	// The TOTAL's variance is the teams': budgets 26,000,000 less ml's
	// 27,501,800, ds's 7,880,001 and vision's 2,000,000; the 27,520,000 of
	// _unowned and _unallocated is in no budget.
	if got, want := cb.Total.VarianceMicros(), int64(26_000_000-27_501_800-7_880_001-2_000_000); got != want {
		t.Errorf("TOTAL variance %d, want %d", got, want)
	}
	var b bytes.Buffer
	if err := cb.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "chargeback.csv", b.String())
}

func TestChargebackXLSX(t *testing.T) {
	cb := testChargeback(t)
	var b bytes.Buffer
	if err := cb.WriteXLSX(&b); err != nil {
		t.Fatal(err)
	}
	dump, err := DumpXLSX(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "chargeback.xlsx.txt", dump)
}

// TestNoData: a month the ledger has no rows of is an error that says so,
// not an invoice of zeros.
func TestNoData(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Build(context.Background(), s, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), Options{Currency: "USD", Teams: []string{"ml"}, Cluster: "c1"})
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "holds no rows for 2026-09") || !strings.Contains(err.Error(), "cluster c1") {
		t.Errorf("error %v: want ErrNoData naming the month and cluster", err)
	}
}
