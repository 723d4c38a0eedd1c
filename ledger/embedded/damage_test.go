package embedded

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// damageFixture writes a month of a cluster's hours (teams, flavors,
// workloads, queues, endpoints, a checkpoint) into a ledger in dir.
func damageFixture(t *testing.T, dir string) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(3, 4))
	for day := range 31 {
		var rows []ledger.Row
		var wls []ledger.WorkloadRow
		var qs []ledger.QueueRow
		var eps []ledger.EndpointRow
		for h := range 24 {
			hour := start.Add(time.Duration(day*24+h) * time.Hour)
			for i, team := range []string{"ml-research", "vision", "nlp", ledger.TeamUnallocated} {
				for j, flavor := range []string{"h100", "a100"} {
					cost := int64(1_000_000 + rng.IntN(9_000_000))
					rows = append(rows, ledger.Row{Key: ledger.Key{Hour: hour, Cluster: "gpu-prod-1", Team: team, Namespace: team + "-ns",
						LocalQueue: "lq", ClusterQueue: team + "-cq", Flavor: flavor, Borrowed: (i+j)%3 == 0},
						GPUSeconds: float64(3600 * (1 + rng.IntN(8))), ActiveGPUSeconds: rng.Float64() * 3600, CostMicros: cost,
						IdleCostMicros: cost / 3, UnallocatedCostMicros: cost / 5, EnergyJoules: rng.Float64() * 1e6, EnergyCostMicros: int64(rng.IntN(100_000))})
				}
				wls = append(wls, ledger.WorkloadRow{Hour: hour, Cluster: "gpu-prod-1", Team: team, Namespace: team + "-ns", Kind: "Job",
					Name: fmt.Sprintf("train-%04d", rng.IntN(50)), GPUSeconds: 3600, ActiveGPUSeconds: rng.Float64() * 3600, CostMicros: int64(rng.IntN(5_000_000)),
					IdleCostMicros: int64(rng.IntN(1_000_000))})
			}
			qs = append(qs, ledger.QueueRow{Hour: hour, Cluster: "gpu-prod-1", ClusterQueue: "research", PendingWorkloads: rng.Float64() * 10,
				PendingGPUs: rng.Float64() * 40, Admitted: float64(rng.IntN(20)),
				AdmittedWait: ledger.Histogram{Bounds: []float64{60, 600, math.Inf(1)}, Counts: []float64{1, 2, float64(3 + rng.IntN(5))}}})
			eps = append(eps, ledger.EndpointRow{Hour: hour, Cluster: "gpu-prod-1", Namespace: "serving", Model: "llama", Kind: "ReplicaSet", Name: "serve-1",
				Pods: 1, ReportedSeconds: 3600, BusySeconds: rng.Float64() * 3600, Requests: float64(rng.IntN(1000))})
		}
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteQueueHours(ctx, qs); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteEndpointHours(ctx, eps); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetCheckpoint(ctx, "live:gpu-prod-1", start.AddDate(0, 1, 0)); err != nil {
		t.Fatal(err)
	}
}

// damageReads are the reads a damaged ledger is asked: every table, by
// the hour, day and month.
func damageReads(ctx context.Context, s *Store) []func() (any, error) {
	from, to := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := func(step ledger.Step, group ...ledger.Dimension) func() (any, error) {
		return func() (any, error) { return s.Query(ctx, ledger.Query{From: from, To: to, Step: step, GroupBy: group}) }
	}
	return []func() (any, error){
		q(ledger.StepHour, ledger.DimTeam, ledger.DimFlavor, ledger.DimBorrowed),
		q(ledger.StepDay, ledger.DimTeam),
		q(ledger.StepMonth, ledger.DimTeam, ledger.DimNamespace, ledger.DimLocalQueue, ledger.DimClusterQueue),
		func() (any, error) {
			return s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepDay, Cluster: "gpu-prod-1", Team: "nlp", GroupBy: []ledger.Dimension{ledger.DimFlavor}})
		},
		func() (any, error) { return s.TopWorkloads(ctx, ledger.Query{From: from, To: to}, 10) },
		func() (any, error) { return s.QueueHours(ctx, "", from, to) },
		func() (any, error) { return s.EndpointHours(ctx, "", from, to) },
		func() (any, error) { return s.Checkpoint(ctx, "live:gpu-prod-1") },
	}
}

// TestDamagedPagesAreErrors flips one byte of the ledger's file, at 200
// random offsets: Open refuses the file (quick_check), or every read
// answers as before the flip, or fails with a ledger.DamageError. No read
// answers with a changed number. (Before, a flipped byte in a data page
// changed an hour's cost and every answer was a 200.)
func TestDamagedPagesAreErrors(t *testing.T) {
	orig := t.TempDir()
	damageFixture(t, orig)
	ctx := context.Background()
	s, err := Open(orig, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, read := range damageReads(ctx, s) {
		v, err := read()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	s.Close()
	data, err := os.ReadFile(filepath.Join(orig, FileName))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	outcomes := map[string]int{}
	for trial := range 200 {
		off := rng.IntN(len(data))
		dir := t.TempDir()
		damaged := append([]byte(nil), data...)
		damaged[off] ^= byte(1 + rng.IntN(255))
		if err := os.WriteFile(filepath.Join(dir, FileName), damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			outcomes["refused at open"]++
			continue
		}
		changed, failed := 0, 0
		for i, read := range damageReads(ctx, s) {
			got, err := read()
			var de *ledger.DamageError
			switch {
			case errors.As(err, &de):
				failed++
			case err != nil:
				t.Errorf("trial %d, byte %d: read %d failed with an error that is not a DamageError: %v", trial, off, i, err)
			case !reflect.DeepEqual(got, want[i]):
				changed++
				t.Errorf("trial %d, byte %d of %d: read %d answered with a changed number", trial, off, len(data), i)
			}
		}
		s.Close()
		switch {
		case failed > 0:
			outcomes["a read failed"]++
		case changed == 0:
			outcomes["no read changed"]++
		}
	}
	t.Logf("%d bytes; outcomes of 200 flips: %v", len(data), outcomes)
	if outcomes["refused at open"] == 0 || outcomes["a read failed"] < 30 {
		t.Errorf("outcomes %v: the flips did not reach the data", outcomes)
	}
}

// TestVerify: a whole check of an intact ledger finds nothing; a value
// changed behind the store's back, a row gone, and a rollup changed with
// a check made to match (each in a copy of the ledger) are each found
// and named.
func TestVerify(t *testing.T) {
	orig := t.TempDir()
	damageFixture(t, orig)
	data, err := os.ReadFile(filepath.Join(orig, FileName))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verify := func(s *Store) []string {
		t.Helper()
		steps := 0
		problems, err := s.Verify(ctx, func(string) { steps++ })
		if err != nil {
			t.Fatal(err)
		}
		if steps < 10 {
			t.Errorf("%d steps told", steps)
		}
		var out []string
		for _, p := range problems {
			out = append(out, p.Table+": "+p.Detail)
		}
		return out
	}
	for _, c := range []struct {
		name string
		sql  []string
		want string
	}{
		{"intact", nil, ""},
		{"a value changed", []string{`UPDATE ledger_rows SET cost_micros = cost_micros + 1 WHERE hour = 1790848800 AND team = 'nlp' AND flavor = 'h100'`},
			"ledger_rows: row fails its check: gpu-prod-1 2026-10-01T10:00:00Z team nlp namespace nlp-ns flavor h100"},
		// A damaged record's type byte can make a check a REAL: SUM then
		// turns REAL too (it failed to scan, an error that was not a
		// DamageError, in CI's random flips).
		{"a check read as a number", []string{`UPDATE ledger_rows SET row_check = row_check + 0.5 WHERE hour = 1790848800 AND team = 'nlp' AND flavor = 'h100'`},
			"ledger_rows: row fails its check: gpu-prod-1 2026-10-01T10:00:00Z team nlp namespace nlp-ns flavor h100"},
		{"a cost read as a number", []string{`UPDATE ledger_rows SET cost_micros = cost_micros + 0.5 WHERE hour = 1790848800 AND team = 'nlp' AND flavor = 'h100'`},
			"ledger_rows: the ledger is damaged: embedded table ledger_rows in [2026-10-01T00:00:00Z, 2026-11-01T00:00:00Z): sql: Scan error"},
		{"a row gone", []string{`DELETE FROM workload_rows WHERE hour = 1790935200 AND team = 'vision'`},
			`workload_rows: gpu-prod-1 2026-10-02T10:00:00Z team "vision": 0 rows where the row counts say 1`},
		// SET's expressions read the row as it was: the check is made to
		// match in a second statement, and the row counts' sum with it.
		{"a rollup changed, its check and counts made to match", []string{
			`UPDATE ledger_days SET cost_micros = cost_micros + 5 WHERE hour = 1790985600 AND team = 'vision' AND flavor = 'a100'`,
			`UPDATE ledger_days SET row_check = gpuledger_check(` + ledgerCheckColumns + `) WHERE hour = 1790985600 AND team = 'vision' AND flavor = 'a100'`,
			`UPDATE row_counts SET check_sum = (SELECT SUM(row_check) FROM ledger_days WHERE hour = 1790985600 AND team = 'vision')
				WHERE tbl = 'ledger_days' AND bucket = 1790985600 AND team = 'vision'`},
			"the daily rollup: 2026-10-03 of cluster gpu-prod-1: the daily rollup"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range c.sql {
			if _, err := s.db.Exec(q); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		got := verify(s)
		s.Close()
		if c.want == "" {
			if len(got) != 0 {
				t.Errorf("%s: found %q", c.name, got)
			}
			continue
		}
		if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, c.want) }) {
			t.Errorf("%s: found %q; want one starting %q", c.name, got, c.want)
		}
	}
}
