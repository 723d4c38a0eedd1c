package main

import (
	"context"
	"io"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runVerify(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("verify", stdout)
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Verify)
	newLogger := flagutil.Logger(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	return ledger.VerifyText(ctx, store, stdout)
}
