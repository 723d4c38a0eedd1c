package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

func TestStoreContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestReopen: rows survive closing and reopening the ledger directory.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)
	row := ledger.Row{Key: ledger.Key{Hour: h, Cluster: "c", Team: "t"}, CostMicros: 42}
	if err := s.WriteHours(context.Background(), []ledger.Row{row}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Query(context.Background(), ledger.Query{From: h, To: h.Add(time.Hour), Step: ledger.StepHour})
	if err != nil || len(got) != 1 || got[0].CostMicros != 42 {
		t.Errorf("after reopen: %+v, %v", got, err)
	}
}

// TestRollupMigration: a ledger from before the rollups gets them filled
// when opened, and day and month queries read them.
func TestRollupMigration(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := time.Date(2026, 10, 1, 5, 0, 0, 0, time.UTC)
	rows := []ledger.Row{{Key: ledger.Key{Hour: h, Cluster: "c", Team: "t"}, CostMicros: 40}, {Key: ledger.Key{Hour: h.Add(time.Hour), Cluster: "c", Team: "t"}, CostMicros: 2}}
	if err := s.WriteHours(context.Background(), rows, nil); err != nil {
		t.Fatal(err)
	}
	// Back to schema 2: no rollups, no tables or columns added since.
	for _, table := range []string{"ledger_days", "ledger_months", "queue_rows", "workload_times", "endpoint_rows", "hour_flags", "row_counts"} {
		if _, err := s.db.Exec(`DROP TABLE ` + table); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"ledger_rows", "workload_rows", "checkpoints", "audit"} {
		if _, err := s.db.Exec(`ALTER TABLE ` + table + ` DROP COLUMN row_check`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	day := h.Truncate(24 * time.Hour)
	got, err := s.Query(context.Background(), ledger.Query{From: day, To: day.Add(24 * time.Hour), Step: ledger.StepDay})
	if err != nil || len(got) != 1 || got[0].CostMicros != 42 {
		t.Errorf("day after migration: %+v, %v", got, err)
	}
	month := ledger.Query{From: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Step: ledger.StepMonth}
	if !month.MonthlyRollup() {
		t.Fatal("the month query is not one the monthly rollup answers")
	}
	got, err = s.Query(context.Background(), month)
	if err != nil || len(got) != 1 || got[0].CostMicros != 42 {
		t.Errorf("month after migration: %+v, %v", got, err)
	}
}
