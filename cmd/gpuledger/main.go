// Command gpuledger attributes GPU cost to teams from dcgm-exporter
// telemetry and Kueue queues, keeps the hourly ledger, and serves chargeback
// reports and a cost API.
//
// Usage: gpuledger <command> [flags]; gpuledger <command> -help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands = []command{
	{"demo", "simulate a month of the example cluster through the whole loop, write reports, serve the API", runDemo},
	{"serve", "serve the cost API and report downloads; take remote write and scrape exporters into the ledger", runServe},
	{"controller", "steer Kueue with the ledger: fair-sharing weights by money, the gpuledger.io/budget AdmissionCheck", runController},
	{"ingest", "backfill the ledger from VictoriaMetrics, Prometheus or files, resumably", runIngest},
	{"report", "write a month's chargeback (CSV and XLSX) from a ledger", runReport},
	{"explain", "explain a bill line: a team's or workload's cost down to its GPUs, pods, busy, idle and unmeasured time and rates", runExplain},
	{"mcp", "serve the read API to an agent as a Model Context Protocol server over stdio", runMCP},
	{"close", "close a month: its figures never change; later corrections are adjustments billed in the next open month", runClose},
	{"capacity", "say per GPU flavor whether to buy more (the expansion trigger) and how budgets burn; send the alerts to Alertmanager", runCapacity},
	{"rules", "write vmalert/Prometheus rules that raise the expansion and reclaim alerts from the raw metrics", runRules},
	{"scale-to-zero", "recommend per inference endpoint whether to scale to zero and KEDA's cooldown, from its request gaps; write KEDA objects", runScaleToZero},
	{"simulate", "replay the Philly-derived traces through the admission policies side by side", runSimulate},
	{"policy-eval", "evaluate the admission policies at stated offered loads, tuned on one half of the VCs and reported on the other", runPolicyEval},
	{"sim-to-real", "replay a trace window on a real Kueue and in the simulator, and compare them", runSimToReal},
	{"validate", "check a configuration file and list every problem", runValidate},
	{"verify", "check a whole ledger for damage: every row's check, the row counts, the rollups against the hours", runVerify},
	{"token", "make an API token: its secret, and the hashed entry for the configuration", runToken},
	{"version", "print the version, commit and Go version", runVersion},
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "gpuledger: GPU cost attribution and chargeback for Kubernetes clusters.\n\nUsage: gpuledger <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'gpuledger <command> -help' for a command's flags.\n")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "gpuledger: %v\n", err)
		}
		var ue usageError
		if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in how gpuledger was called: exit status 2.
type usageError = flagutil.UsageError

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return flagutil.Usagef("no command given; run 'gpuledger -help' for the list")
		}
		return nil
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout)
		}
	}
	return flagutil.Usagef("unknown command %q; want one of %s (see 'gpuledger -help')", args[0], commandNames())
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// newFlagSet returns the command's flag set; its -help prints the
// command's summary (from commands, filled in at start: a command's run
// cannot refer to commands).
func newFlagSet(name string, stdout io.Writer) *flag.FlagSet {
	return flagutil.NewFlagSet(name, summaries[name], stdout)
}

var summaries = map[string]string{}

func init() {
	for _, c := range commands {
		summaries[c.name] = strings.ToUpper(c.summary[:1]) + c.summary[1:]
	}
}

// parseWithConfig parses a command's flags, makes its logger and loads
// its configuration.
func parseWithConfig(fs *flag.FlagSet, args []string, cfgPath *string, newLogger func() *slog.Logger) (*slog.Logger, *config.Config, error) {
	if err := flagutil.Parse(fs, args); err != nil {
		return nil, nil, err
	}
	cfg, _, err := config.Locate(*cfgPath, os.Stderr)
	return newLogger(), cfg, err
}
