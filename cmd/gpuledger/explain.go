package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
	"github.com/gpuledger/gpuledger/reports"
)

func runExplain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("explain", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (its currency)")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Read)
	team := fs.String("team", "", "the team explained; empty for every team")
	workload := fs.String("workload", "", "one workload, namespace/name (its pods' lines, without the team's unallocated share)")
	cluster := fs.String("cluster", "", "restrict to one cluster; empty for all")
	month := flagutil.Month(fs, "month", "", "the month, YYYY-MM (or -from and -to)")
	from := flagutil.Time(fs, "from", "the range's start, RFC 3339 (with -to, instead of -month)")
	to := flagutil.Time(fs, "to", "the range's end, RFC 3339")
	limit := fs.Int("limit", 20, "how many of the largest lines to list; the totals are over all")
	format := fs.String("format", "text", "text, or json (GET /api/v1/explain's answer)")
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	q := reports.ExplainQuery{Team: *team, Cluster: *cluster, Limit: *limit, From: *from, To: *to}
	switch {
	case !month.IsZero() && (!from.IsZero() || !to.IsZero()):
		return flagutil.Usagef("give -month or -from and -to, not both")
	case !month.IsZero():
		q.From, q.To = *month, month.AddDate(0, 1, 0)
	case from.IsZero() || to.IsZero():
		return flagutil.Usagef("explain needs -month, or -from and -to (RFC 3339 such as 2026-10-01T00:00:00Z)")
	}
	if *workload != "" {
		ns, name, ok := strings.Cut(*workload, "/")
		if !ok || ns == "" || name == "" {
			return flagutil.Usagef("-workload=%q is not a workload; want namespace/name such as ml/train-0042", *workload)
		}
		q.Namespace, q.Workload = ns, name
	}
	if *format != "text" && *format != "json" {
		return flagutil.Usagef("-format=%q: want text or json", *format)
	}
	store, err := openStore(ctx, log)
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
