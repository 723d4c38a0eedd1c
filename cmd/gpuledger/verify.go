package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// verifier is a store that can check all it holds.
type verifier interface {
	Verify(ctx context.Context, progress func(step string)) ([]ledger.Problem, error)
}

func runVerify(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("verify", stdout)
	openStore := storeFlags(fs, defaultLedgerPath, storeVerify)
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	v, ok := store.(verifier)
	if !ok {
		return fmt.Errorf("this ledger backend (%T) cannot be verified", store)
	}
	start := time.Now()
	problems, err := v.Verify(ctx, func(step string) {
		fmt.Fprintf(stdout, "[%5.1fs] checking %s\n", time.Since(start).Seconds(), step)
	})
	for _, p := range problems {
		fmt.Fprintf(stdout, "DAMAGED %s: %s\n", p.Table, p.Detail)
	}
	if err != nil {
		return fmt.Errorf("verify stopped after %d problem(s): %w", len(problems), err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s) found in %.1fs: the ledger is damaged; restore it from a backup, or write the hours named with gpuledger ingest", len(problems), time.Since(start).Seconds())
	}
	fmt.Fprintf(stdout, "ok: no damage found in %.1fs\n", time.Since(start).Seconds())
	return nil
}
