package integration_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ingest"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/reports"
	"github.com/gpuledger/gpuledger/sim"
)

// TestChargebackSameOnBothStores backfills the same six hours into the
// embedded store and into ClickHouse and gets byte-identical chargeback
// CSVs.
func TestChargebackSameOnBothStores(t *testing.T) {
	dsn := chtest.Database(t, chtest.DSN())
	cfg, scrapes := renderScrapes(t, 6*time.Hour)
	var body []byte
	for _, sc := range scrapes {
		body = sim.AppendTimestamped(body, sc.body, sc.at.UnixMilli())
	}
	file := filepath.Join(t.TempDir(), "telemetry.prom")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	model, _ := cfg.AttributionModel("")
	chs, err := clickhouse.Open(context.Background(), clickhouse.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer chs.Close()
	ropts := reports.Options{Currency: cfg.Currency, Teams: cfg.TeamNames(), Budgets: cfg.TeamBudgets()}
	var csvs [2]bytes.Buffer
	for i, store := range []ledger.Store{openStore(t), chs} {
		if _, err := ingest.Backfill(context.Background(), ingest.BackfillOptions{Source: &ingest.FileSource{Path: file},
			Store: store, Model: model, Start: simStart, End: simStart.Add(6 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		cb, err := reports.Build(context.Background(), store, simStart, ropts)
		if err != nil {
			t.Fatal(err)
		}
		if err := cb.WriteCSV(&csvs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if csvs[0].String() != csvs[1].String() || csvs[0].Len() == 0 {
		t.Errorf("chargeback differs:\nembedded:\n%s\nclickhouse:\n%s", csvs[0].String(), csvs[1].String())
	}
}
