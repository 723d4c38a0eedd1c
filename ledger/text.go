package ledger

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Verifier is a Store that can check all it holds: every row's check,
// the row counts, the rollups against the hours.
type Verifier interface {
	Verify(ctx context.Context, progress func(step string)) ([]Problem, error)
}

// VerifyText verifies s, writing each step as it starts and each problem
// found to w; it fails when s cannot be verified, when the check stops, or
// when it found damage, saying what to do.
func VerifyText(ctx context.Context, s Store, w io.Writer) error {
	v, ok := s.(Verifier)
	if !ok {
		return fmt.Errorf("this ledger backend (%T) cannot be verified", s)
	}
	start := time.Now()
	problems, err := v.Verify(ctx, func(step string) {
		fmt.Fprintf(w, "[%5.1fs] checking %s\n", time.Since(start).Seconds(), step)
	})
	for _, p := range problems {
		fmt.Fprintf(w, "DAMAGED %s: %s\n", p.Table, p.Detail)
	}
	if err != nil {
		return fmt.Errorf("verify stopped after %d problem(s): %w", len(problems), err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s) found in %.1fs: the ledger is damaged; restore it from a backup, or write the hours named with gpuledger ingest", len(problems), time.Since(start).Seconds())
	}
	fmt.Fprintf(w, "ok: no damage found in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// WriteClosedMonths lists the store's closed months on w: when, by whom
// and why each was closed.
func WriteClosedMonths(ctx context.Context, s Store, w io.Writer) error {
	closes, err := s.ClosedMonths(ctx)
	if err != nil {
		return err
	}
	if len(closes) == 0 {
		fmt.Fprintln(w, "no month is closed")
	}
	for _, c := range closes {
		fmt.Fprintf(w, "%s closed %s by %s  %s\n", c.Month.Format("2006-01"), c.At.Format(time.RFC3339), c.By, c.Note)
	}
	return nil
}
