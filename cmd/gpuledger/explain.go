package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/reports"
)

func runExplain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("explain", stdout)
	cfgPath := configFlag(fs, "business-data configuration file (its currency)")
	openStore := storeFlags(fs, defaultLedgerPath, storeRead)
	team := fs.String("team", "", "the team explained; empty for every team")
	workload := fs.String("workload", "", "one workload, namespace/name (its pods' lines, without the team's unallocated share)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	monthFlag := fs.String("month", "", "the month, YYYY-MM (or -from and -to)")
	fromFlag := fs.String("from", "", "the range's start, RFC 3339 (with -to, instead of -month)")
	toFlag := fs.String("to", "", "the range's end, RFC 3339")
	limit := fs.Int("limit", 20, "how many of the largest lines to list; the totals are over all")
	format := fs.String("format", "text", "text, or json (GET /api/v1/explain's answer)")
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	q := reports.ExplainQuery{Team: *team, Cluster: *cluster, Limit: *limit}
	switch {
	case *monthFlag != "" && (*fromFlag != "" || *toFlag != ""):
		return usageError{"give -month or -from and -to, not both"}
	case *monthFlag != "":
		m, err := time.Parse("2006-01", *monthFlag)
		if err != nil {
			return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM such as 2026-10", *monthFlag)}
		}
		q.From, q.To = m, m.AddDate(0, 1, 0)
	default:
		var err error
		if q.From, err = time.Parse(time.RFC3339, *fromFlag); err != nil {
			return usageError{fmt.Sprintf("-from=%q is not a time; want RFC 3339 such as 2026-10-01T00:00:00Z, or give -month", *fromFlag)}
		}
		if q.To, err = time.Parse(time.RFC3339, *toFlag); err != nil {
			return usageError{fmt.Sprintf("-to=%q is not a time; want RFC 3339 such as 2026-11-01T00:00:00Z", *toFlag)}
		}
	}
	if *workload != "" {
		ns, name, ok := strings.Cut(*workload, "/")
		if !ok || ns == "" || name == "" {
			return usageError{fmt.Sprintf("-workload=%q is not a workload; want namespace/name such as ml/train-0042", *workload)}
		}
		q.Namespace, q.Workload = ns, name
	}
	if *format != "text" && *format != "json" {
		return usageError{fmt.Sprintf("-format=%q: want text or json", *format)}
	}
	cfg, _, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	ex, err := reports.Explain(ctx, store, q)
	if err != nil {
		return err
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(api.NewExplainResponse(&ex, cfg.Currency))
	}
	return ex.WriteText(stdout, cfg.Currency)
}
