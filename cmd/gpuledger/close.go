package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

func runClose(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("close", stdout)
	month := fs.String("month", "", "the month to close, YYYY-MM")
	by := fs.String("by", os.Getenv("USER"), "who closes it (recorded)")
	note := fs.String("note", "", "why, or what for, such as the invoice number (recorded)")
	openStore := storeFlags(fs, defaultLedgerPath, storeWrite)
	newLogger := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	store, err := openStore(ctx, newLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	if *month == "" {
		closes, err := store.ClosedMonths(ctx)
		if err != nil {
			return err
		}
		if len(closes) == 0 {
			fmt.Fprintln(stdout, "no month is closed")
		}
		for _, c := range closes {
			fmt.Fprintf(stdout, "%s closed %s by %s  %s\n", c.Month.Format("2006-01"), c.At.Format(time.RFC3339), c.By, c.Note)
		}
		return nil
	}
	m, err := time.Parse("2006-01", *month)
	if err != nil {
		return usageError{fmt.Sprintf("-month=%q is not a month; want YYYY-MM, such as 2026-10", *month)}
	}
	if *by == "" {
		return usageError{"close needs -by: who closes the month (no $USER to default to)"}
	}
	now := time.Now().UTC()
	if err := ledger.CloseMonth(ctx, store, ledger.MonthClose{Month: m, At: now, By: *by, Note: *note}, now); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "closed %s by %s at %s: later changes of its hours are adjustments billed in the first open month\n",
		m.Format("2006-01"), *by, now.Format(time.RFC3339))
	return nil
}
