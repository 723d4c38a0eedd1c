package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

// The what-if runs only for a verdict to act on, and says so once when the
// ledger has no workload times to replay (the full replay is
// cmd/gpuledger's TestDemoMonth, on the demo month).
func TestWhatIfsWithoutWorkloadTimes(t *testing.T) {
	ctx := context.Background()
	store := embeddedtest.Open(t)
	cfg := &config.Config{}
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	quiet := []capacity.Recommendation{{Flavor: "h100"}}
	got, err := WhatIfs(ctx, store, cfg, "c1", now, quiet, []capacity.QueueWait{{ClusterQueue: "train"}})
	if err != nil || got != nil {
		t.Fatalf("no verdict fired: %q, %v; want nothing", got, err)
	}
	fired := []capacity.Recommendation{{Flavor: "h100", Verdict: capacity.Verdict{Fired: true, Action: capacity.ActionBuy, PurchaseGPUs: 8}}}
	got, err = WhatIfs(ctx, store, cfg, "c1", now, fired, nil)
	if err != nil || len(got) != 1 || !strings.Contains(got[0], "no workload times in the ledger for the last 30 days") {
		t.Fatalf("a fired verdict on an empty ledger: %q, %v; want one sentence saying there are no workload times", got, err)
	}
	if fired[0].WhatIf != "" {
		t.Errorf("the verdict's WhatIf was set to %q with nothing replayed", fired[0].WhatIf)
	}
}
