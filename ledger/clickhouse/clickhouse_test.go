package clickhouse

import (
	"context"
	"testing"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

func TestStoreContract(t *testing.T) {
	dsn := chtest.DSN()
	ledgertest.Run(t, func(t *testing.T) ledger.Store {
		s, err := Open(context.Background(), Options{DSN: chtest.Database(t, dsn)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMigrationsOnce: opening twice applies nothing the second time.
func TestMigrationsOnce(t *testing.T) {
	dsn := chtest.Database(t, chtest.DSN())
	for range 2 {
		s, err := Open(context.Background(), Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		if err := s.conn.QueryRow(context.Background(), "SELECT count() FROM "+s.db+".gpuledger_schema").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != uint64(len(migrations)-1) {
			t.Errorf("%d migrations recorded, want %d", n, len(migrations)-1)
		}
		s.Close()
	}
}
