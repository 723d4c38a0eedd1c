package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/api/mcp"
)

func runMCP(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("mcp", stdout)
	cfgPath := configFlag(fs, "business-data configuration file (teams, budgets, currency, tokens)")
	openStore := storeFlags(fs, defaultLedgerPath, storeRead)
	tokensFile := fs.String("auth.tokensFile", "", "YAML file of more API tokens, as gpuledger serve takes it")
	token := fs.String("token", "", "the API token (its secret) the calls carry; default $GPULEDGER_TOKEN; neither: the whole ledger")
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, _, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	log := newLogger()
	var auth *api.Auth
	secret := *token
	if secret == "" {
		secret = os.Getenv("GPULEDGER_TOKEN")
	}
	if secret != "" {
		toks, err := collectTokens(cfg, *tokensFile)
		if err != nil {
			return err
		}
		auth = api.NewAuth(toks)
	} else {
		// A token for this process alone: the whole ledger, as the
		// other commands that read it.
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		secret = hex.EncodeToString(b)
		auth = api.NewAuth([]api.Token{{Name: "gpuledger-mcp", SHA256: api.HashToken(secret), Scopes: []api.Scope{api.ScopeAdmin}}})
	}
	store, err := openStore(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	srv := api.New(api.Options{Store: store, Logger: log, Auth: auth, Report: reportOptions(cfg, ""), Capacity: capacityOptions(cfg, ""), Version: version})
	if err := mcp.ServeStdio(ctx, mcp.Options{API: srv.Handler(), Authorization: "Bearer " + secret, Version: version}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
