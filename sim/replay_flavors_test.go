package sim

import (
	"testing"
)

// examples/philly-replay.yaml, as simulate, policy-eval and sim-to-real
// read it: two flavors, half each, priced from the catalog.
func TestLoadReplayFlavors(t *testing.T) {
	fl, err := LoadReplayFlavors("../examples/philly-replay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 2 || fl[0].Name != "h100" || fl[1].Name != "t4" || fl[0].Share != 0.5 || fl[1].Share != 0.5 {
		t.Fatalf("flavors: %+v", fl)
	}
	if fl[0].PriceMicrosPerGPUHour <= fl[1].PriceMicrosPerGPUHour || fl[1].PriceMicrosPerGPUHour <= 0 {
		t.Errorf("prices: h100 %d, t4 %d micro-units a GPU-hour; want both set, the H100 dearer", fl[0].PriceMicrosPerGPUHour, fl[1].PriceMicrosPerGPUHour)
	}
	if none, err := LoadReplayFlavors(""); none != nil || err != nil {
		t.Errorf("no file: %v, %v; want the default (none)", none, err)
	}
	if _, err := LoadReplayFlavors("no-such-file.yaml"); err == nil {
		t.Error("a missing file gave no error")
	}
	if n := QuotaGPUs([]TraceQueue{{NominalGPUs: 8}, {NominalGPUs: 16}}); n != 24 {
		t.Errorf("QuotaGPUs: %d, want 24", n)
	}
}
