package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/internal/flagutil"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/backend"
)

func runClose(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("close", stdout)
	month := flagutil.Month(fs, "month", "", "the month to close, YYYY-MM; empty: list the closed months")
	by := fs.String("by", os.Getenv("USER"), "who closes it (recorded)")
	note := fs.String("note", "", "why, or what for, such as the invoice number (recorded)")
	openStore := backend.Flags(fs, backend.DefaultPath, backend.Write)
	newLogger := flagutil.Logger(fs)
	if err := flagutil.Parse(fs, args); err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	if month.IsZero() {
		return ledger.WriteClosedMonths(ctx, store, stdout)
	}
	m := *month
	if *by == "" {
		return flagutil.Usagef("close needs -by: who closes the month (no $USER to default to)")
	}
	now := time.Now().UTC()
	if err := ledger.CloseMonth(ctx, store, ledger.MonthClose{Month: m, At: now, By: *by, Note: *note}, now); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "closed %s by %s at %s: later changes of its hours are adjustments billed in the first open month\n",
		m.Format("2006-01"), *by, now.Format(time.RFC3339))
	return nil
}
