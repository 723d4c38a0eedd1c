package capacity

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// TestAssess: a flavor held busy for the whole window raises the
// expansion alert, the report says buy, and the what-ifs are asked for
// the verdicts Assess found.
func TestAssess(t *testing.T) {
	s := embeddedtest.Open(t, saturated("c1", 40)...)
	var asked int
	a, err := Assess(context.Background(), AssessOptions{Store: s, Config: &config.Config{Currency: "USD"}, Cluster: "c1", Now: now, Prices: prices,
		WhatIfDays: 7,
		WhatIfs: func(_ context.Context, _ time.Time, recs []Recommendation, _ []QueueWait) ([]string, error) {
			asked = len(recs)
			return []string{"what-if line"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if asked == 0 || len(a.Report.Expansion) != asked || a.Report.WhatIfs[0] != "what-if line" {
		t.Errorf("what-ifs asked for %d verdicts of %d", asked, len(a.Report.Expansion))
	}
	if !strings.Contains(a.AlertNames(), "GPUCapacityExpansion{") {
		t.Errorf("alerts %s: want the expansion alert", a.AlertNames())
	}
	var b strings.Builder
	if err := a.Report.WriteText(&b); err != nil || !strings.Contains(b.String(), "what-if line") {
		t.Errorf("report: %v\n%s", err, b.String())
	}
}
