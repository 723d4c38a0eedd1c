package clickhouse

import (
	"context"
	"testing"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// TestComparePeers: two stores on one database, as two active-active
// replicas: the second to write an hour compares it with the first's and
// counts it the same; a store's own rewrite is not compared; rows that
// differ from the other writer's newest are counted and logged.
func TestComparePeers(t *testing.T) {
	dsn := chtest.Database(t, chtest.DSN())
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, Options{DSN: dsn, ComparePeers: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	write := func(s *Store, hours ...int) {
		t.Helper()
		var rows []ledger.Row
		var wls []ledger.WorkloadRow
		for _, h := range hours {
			r, w := hourRows(h)
			rows, wls = append(rows, r...), append(wls, w...)
		}
		if err := s.WriteHours(ctx, rows, wls); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 0, 1, 2)
	if got := a.PeerStats(); got != (PeerStats{}) {
		t.Errorf("the first writer of new hours compared %+v", got)
	}
	write(b, 0, 1, 2)
	if got := b.PeerStats(); got != (PeerStats{Same: 3}) {
		t.Errorf("the second writer of the same hours: %+v; want 3 the same", got)
	}
	write(b, 1)
	if got := b.PeerStats(); got != (PeerStats{Same: 3}) {
		t.Errorf("a writer's rewrite of its own hour was compared: %+v", got)
	}
	// a rewrites hour 2 with other rows: b's are the newest there.
	rows, wls := hourRows(2)
	rows[0].CostMicros++
	rows[0].UnallocatedCostMicros++
	if err := a.WriteHours(ctx, rows, wls); err != nil {
		t.Fatal(err)
	}
	if got := a.PeerStats(); got != (PeerStats{Differ: 1}) {
		t.Errorf("rows that differ from the other writer's: %+v; want 1 differing", got)
	}
	// Hours a store never wrote, written by the other, still compare.
	write(a, 1)
	if got := a.PeerStats(); got != (PeerStats{Same: 1, Differ: 1}) {
		t.Errorf("after a's rewrite of b's newest hour 1: %+v; want 1 the same, 1 differing", got)
	}
	// A spool replay of a record that got in in part (its first row, with
	// its version) finds its own rows, not another writer's: nothing is
	// compared.
	rows, wls = hourRows(5)
	rec := &record{Version: a.nextVersion(), Rows: rows, Workloads: wls}
	if err := b.apply(ctx, &record{Version: rec.Version, Rows: rows[:1]}); err != nil {
		t.Fatal(err)
	}
	before := a.PeerStats()
	if err := a.apply(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got := a.PeerStats(); got != before {
		t.Errorf("a replay over its own partial write was compared: %+v, before %+v", got, before)
	}
}
