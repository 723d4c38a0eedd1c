package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/api/mcp"
	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runMCP(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("mcp", stdout)
	cfgPath := config.Flag(fs, "business-data configuration file (teams, budgets, currency, tokens)")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Read)
	tokensFile := fs.String("auth.tokensFile", "", "YAML file of more API tokens, as gpuledger serve takes it")
	token := fs.String("token", "", "the API token (its secret) the calls carry; default $GPULEDGER_TOKEN; neither: the whole ledger")
	log, cfg, err := parseWithConfig(fs, args, cfgPath, flagutil.Logger(fs))
	if err != nil {
		return err
	}
	var auth *api.Auth
	secret := *token
	if secret == "" {
		secret = os.Getenv("GPULEDGER_TOKEN")
	}
	if secret != "" {
		toks, err := api.TokensOf(cfg, *tokensFile)
		if err != nil {
			return err
		}
		auth = api.NewAuth(toks)
	} else {
		// A token for this process alone: the whole ledger, as the
		// other commands that read it.
		if auth, secret, err = api.SoleAdmin("gpuledger-mcp"); err != nil {
			return err
		}
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	srv := api.New(api.Options{Store: store, Logger: log, Auth: auth, Report: reportOptions(cfg, ""), Capacity: api.CapacityOptions(capacity.SettingsOf(cfg, "")), Version: version})
	if err := mcp.ServeStdio(ctx, mcp.Options{API: srv.Handler(), Authorization: "Bearer " + secret, Version: version}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
