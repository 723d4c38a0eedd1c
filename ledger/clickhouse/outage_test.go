package clickhouse

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

var h0 = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// hourRows is one hour of a small cluster's ledger, different per hour.
func hourRows(i int) ([]ledger.Row, []ledger.WorkloadRow) {
	h := h0.Add(time.Duration(i) * time.Hour)
	k := int64(i)
	rows := []ledger.Row{
		{Key: ledger.Key{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml", Flavor: "h100"}, GPUSeconds: 3600, ActiveGPUSeconds: 3000,
			CostMicros: 6_880_000 + k, IdleCostMicros: 1_000_000, EnergyJoules: 1e6, EnergyCostMicros: 100 + k},
		{Key: ledger.Key{Hour: h, Cluster: "c1", Team: ledger.TeamUnallocated, Flavor: "h100"}, GPUSeconds: 3600,
			CostMicros: 6_880_000 - k, UnallocatedCostMicros: 6_880_000 - k},
	}
	wls := []ledger.WorkloadRow{{Hour: h, Cluster: "c1", Team: "ml", Namespace: "ml", Kind: "Job", Name: "train", GPUSeconds: 3600,
		ActiveGPUSeconds: 3000, CostMicros: 6_880_000 + k, IdleCostMicros: 1_000_000}}
	return rows, wls
}

// reference writes hours [0, n) to an embedded store: what ClickHouse must
// hold in the end.
func reference(t *testing.T, n int, skip map[int]bool) ledger.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range n {
		if skip[i] {
			continue
		}
		rows, wls := hourRows(i)
		if err := s.WriteHours(context.Background(), rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func sameAs(t *testing.T, want, got ledger.Store, hours int) {
	t.Helper()
	q := ledger.Query{From: h0, To: h0.Add(time.Duration(hours) * time.Hour), Step: ledger.StepHour, GroupBy: ledger.Dimensions}
	a, err := want.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := got.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("ledger differs from a run without the outage (-want +got):\n%s", diff)
	}
	wa, _ := want.TopWorkloads(context.Background(), q, 100)
	wb, err := got.TopWorkloads(context.Background(), q, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wa, wb); diff != "" {
		t.Errorf("workloads differ (-want +got):\n%s", diff)
	}
}

func replayAll(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.SpoolStats().PendingRecords > 0 {
		if err := s.Replay(); err != nil && time.Now().After(deadline) {
			t.Fatalf("replay: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("spool still holds %+v", s.SpoolStats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOutageSpoolsAndReplays: with the server down, writes go to the spool
// and succeed; the server is back, and in the middle of the replay it dies
// again; it comes back and the replay finishes. The ledger is the one a run
// without the outage writes.
func TestOutageSpoolsAndReplays(t *testing.T) {
	srv := chtest.StartServer(t, "")
	ctx := context.Background()
	s, err := Open(ctx, Options{DSN: srv.DSN(), SpoolDir: t.TempDir(), ReplayEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const hours = 60
	for i := range 5 {
		rows, wls := hourRows(i)
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	for i := 5; i < hours; i++ {
		rows, wls := hourRows(i)
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatalf("write during the outage: %v", err)
		}
	}
	if err := s.SetCheckpoint(ctx, "vm", h0.Add(hours*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := s.SpoolStats(); st.PendingRecords != hours-5+1 {
		t.Fatalf("spool %+v, want %d records", st, hours-5+1)
	}
	// Back, but it dies again in the middle of the replay.
	srv.Start()
	done := make(chan error, 1)
	go func() { done <- s.Replay() }()
	for s.SpoolStats().Replayed < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	srv.Kill()
	if err := <-done; err == nil && s.SpoolStats().PendingRecords > 0 {
		t.Fatal("replay against a dead server reported no error")
	}
	mid := s.SpoolStats()
	t.Logf("the server died with the spool at %+v", mid)
	if mid.Replayed < 10 || mid.PendingRecords == 0 {
		t.Fatalf("the server died after the whole replay (%+v); the test did not test a partial replay", mid)
	}
	srv.Start()
	replayAll(t, s)
	sameAs(t, reference(t, hours, nil), s, hours)
	if cp, err := s.Checkpoint(ctx, "vm"); err != nil || !cp.Equal(h0.Add(hours*time.Hour)) {
		t.Errorf("checkpoint %v, %v", cp, err)
	}
	if st := s.SpoolStats(); st.Corrupt != 0 || st.PendingBytes != 0 {
		t.Errorf("spool after replay: %+v", st)
	}
}

// TestTornSpoolRecord: a crash mid-append leaves a torn last record; it is
// cut off and counted at the next Open, never applied in part, and the
// records before it (and after it, appended later) replay.
func TestTornSpoolRecord(t *testing.T) {
	srv := chtest.StartServer(t, "")
	ctx := context.Background()
	spoolDir := t.TempDir()
	srv.Kill()
	// No server at Open: Open needs one, so open first, then kill.
	srv.Start()
	s, err := Open(ctx, Options{DSN: srv.DSN(), SpoolDir: spoolDir, ReplayEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for i := range 4 {
		rows, wls := hourRows(i)
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// Tear the last record: drop its last bytes, as a crash during its
	// write would.
	logPath := filepath.Join(spoolDir, spoolLogName)
	st, _ := os.Stat(logPath)
	if err := os.Truncate(logPath, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	s, err = Open(ctx, Options{DSN: srv.DSN(), SpoolDir: spoolDir, ReplayEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.SpoolStats(); st.Corrupt != 1 || st.PendingRecords != 3 {
		t.Fatalf("after reopening a torn spool: %+v; want 1 corrupt, 3 pending", st)
	}
	// A write now queues behind the spool, after the cut.
	rows, wls := hourRows(4)
	if err := s.WriteHours(ctx, rows, wls); err != nil {
		t.Fatal(err)
	}
	replayAll(t, s)
	sameAs(t, reference(t, 5, map[int]bool{3: true}), s, 5)
}

// TestSpoolIsBounded: past its bound the spool refuses writes, so the
// caller keeps them.
func TestSpoolIsBounded(t *testing.T) {
	srv := chtest.StartServer(t, "")
	s, err := Open(context.Background(), Options{DSN: srv.DSN(), SpoolDir: t.TempDir(), SpoolMaxBytes: 2000, ReplayEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Kill()
	var full error
	for i := range 20 {
		rows, wls := hourRows(i)
		if full = s.WriteHours(context.Background(), rows, wls); full != nil {
			break
		}
	}
	if !errors.Is(full, ErrSpoolFull) {
		t.Fatalf("writes past the bound: %v, want ErrSpoolFull", full)
	}
}
