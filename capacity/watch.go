package capacity

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// Watch evaluates the capacity of a cluster (Assess) and writes the
// report to w; with an Alertmanager it sends the alerts (and resolves
// those no longer raised), else it names them. With an Interval it does
// so again every Interval until ctx ends, logging an evaluation that
// fails; without, once, returning its error.
type Watch struct {
	Assess AssessOptions
	// Now is the time of each evaluation (Assess.Now is set from it).
	Now          func() time.Time
	Alertmanager *Alertmanager
	Interval     time.Duration
	Log          *slog.Logger
}

// Run runs the evaluations.
func (wt Watch) Run(ctx context.Context, w io.Writer) error {
	if wt.Interval < 0 || (wt.Interval > 0 && wt.Alertmanager == nil) {
		return flagutil.Usagef("-interval=%s: want 0, or a positive interval with -alertmanager.url", wt.Interval)
	}
	// An alert lives three evaluations (at least 15 minutes) unless sent again.
	ttl := 3 * max(wt.Interval, 5*time.Minute)
	for {
		if err := wt.once(ctx, w, ttl); err != nil {
			if wt.Interval == 0 {
				return err
			}
			if wt.Log != nil {
				wt.Log.Warn("capacity not evaluated", "err", err)
			}
		}
		if wt.Interval == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wt.Interval):
		}
	}
}

func (wt Watch) once(ctx context.Context, w io.Writer, ttl time.Duration) error {
	o := wt.Assess
	o.Now = wt.Now()
	a, err := Assess(ctx, o)
	if err != nil {
		return err
	}
	if err := a.Report.WriteText(w); err != nil {
		return err
	}
	if wt.Alertmanager == nil {
		fmt.Fprintf(w, "\n%d alerts: %s (pass -alertmanager.url to send them)\n", len(a.Alerts), a.AlertNames())
		return nil
	}
	sent, resolved, err := wt.Alertmanager.Sync(ctx, o.Cluster, a.Alerts, time.Now(), ttl)
	if err != nil {
		return fmt.Errorf("%w; check -alertmanager.url", err)
	}
	fmt.Fprintf(w, "\nAlertmanager %s: %d alerts sent (%s), %d resolved\n", wt.Alertmanager.URL, sent, a.AlertNames(), resolved)
	return nil
}
