package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/reports"
)

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("serve", "Serves the cost API (/api/v1/cost), chargeback downloads\n(/api/v1/reports/chargeback/YYYY-MM?format=csv|xlsx), /healthz and /metrics from a ledger.", stdout)
	cfgPath := fs.String("config", "examples/cluster.yaml", "business-data configuration file (teams, budgets, currency)")
	ledgerPath := fs.String("ledger.path", "gpuledger-demo/ledger", "embedded ledger directory")
	listen := fs.String("http.listenAddr", "127.0.0.1:8080", "address the API listens on")
	newLogger := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger()
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	store, err := embedded.Open(*ledgerPath, embedded.Options{Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()
	srv := api.New(api.Options{Store: store, Logger: log,
		Report: reportOptions(cfg, "")})
	log.Info("serving", "addr", *listen)
	if err := srv.ListenAndServe(ctx, *listen); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; pass another -http.listenAddr", err)
	}
	return nil
}

func runReport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("report", "Writes the chargeback of one month from a ledger as chargeback-YYYY-MM.csv and .xlsx.", stdout)
	cfgPath := fs.String("config", "examples/cluster.yaml", "business-data configuration file (teams, budgets, currency)")
	ledgerPath := fs.String("ledger.path", "gpuledger-demo/ledger", "embedded ledger directory")
	monthFlag := fs.String("month", "", "month to report, YYYY-MM (required)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	out := fs.String("out", ".", "folder to write the reports into")
	format := fs.String("format", "csv,xlsx", "comma-separated formats: csv, xlsx")
	newLogger := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	month, err := time.Parse("2006-01", *monthFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	store, err := embedded.Open(*ledgerPath, embedded.Options{Logger: newLogger()})
	if err != nil {
		return err
	}
	defer store.Close()
	cb, err := reports.Build(ctx, store, month, reportOptions(cfg, *cluster))
	if err != nil {
		return err
	}
	paths, err := writeReport(cb, *out, splitList(*format))
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	return nil
}

// reportOptions labels and budgets reports from the configuration.
func reportOptions(cfg *config.Config, cluster string) reports.Options {
	return reports.Options{Currency: cfg.Currency, Teams: cfg.TeamNames(), Budgets: cfg.TeamBudgets(), Cluster: cluster}
}
