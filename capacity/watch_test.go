package capacity

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// TestWatchInterval: evaluating again needs somewhere to send the alerts;
// a negative interval is refused, before anything is read.
func TestWatchInterval(t *testing.T) {
	for _, w := range []Watch{{Interval: time.Minute}, {Interval: -time.Second, Alertmanager: &Alertmanager{URL: "http://127.0.0.1:1"}}} {
		var ue flagutil.UsageError
		if err := w.Run(context.Background(), io.Discard); !errors.As(err, &ue) || !strings.Contains(err.Error(), "want 0, or a positive interval with -alertmanager.url") {
			t.Errorf("interval %s: %v", w.Interval, err)
		}
	}
}
