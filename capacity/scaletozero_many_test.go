package capacity

import (
	"strings"
	"testing"
	"time"
)

// TestScaleToZeroSummary: a seed's figures are per day over the
// endpoints, only those going to zero count toward the net saving, and
// the spread over seeds is the mean [min-max]; the names and windows are
// written as KEDA and people read them.
func TestScaleToZeroSummary(t *testing.T) {
	recs := []ScaleToZero{
		{MinReplicas: 0, Best: Outcome{Days: 2, AlwaysOnGPUHours: 48, SavedGPUHours: 20, ColdStartsPerDay: 3, NetSavingMicros: 2_000_000, P95ExtraLatency: 30 * time.Second},
			Default: Outcome{SavedGPUHours: 10, ColdStartsPerDay: 5, P95ExtraLatency: 60 * time.Second}},
		{MinReplicas: 1, Best: Outcome{Days: 2, AlwaysOnGPUHours: 48, NetSavingMicros: -1_000_000}},
	}
	f := Summarise(recs)
	if f.alwaysOn != 48 || f.bestSaved != 10 || f.defSaved != 5 || f.toZero != 1 || f.net != 30_000_000 || f.bestCold != 3 {
		t.Errorf("summary %+v", f)
	}
	g := f
	g.alwaysOn, g.toZero = 24, 3
	cells := strings.Split(SpreadFigures([]ModelFigures{f, g}), "\t")
	if cells[0] != "36 [24-48]" || cells[7] != "2 [1-3]" || cells[8] != "30" {
		t.Errorf("spread %q", cells)
	}
	if got := PrewarmText([]DailyWindow{{7 * time.Hour, 9 * time.Hour}, {17 * time.Hour, 19 * time.Hour}}); got != "07-09h 17-19h" {
		t.Errorf("pre-warm %q", got)
	}
	if got := KEDAName("Llama_3.1/Client"); got != "llama-3-1-client" {
		t.Errorf("KEDA name %q", got)
	}
}
