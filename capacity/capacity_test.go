package capacity

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded/embeddedtest"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// hours makes days of hourly facts of a flavor of gpus GPUs ending at
// now's hour, each hour with the allocated share share(day) (day 0 the
// first) and half of it active.
func hours(flavor string, gpus float64, days int, share func(day int) float64) []FlavorHour {
	return busyHours(flavor, gpus, days, share, 0.5)
}

// busyHours is hours with busy of the allocated time active.
func busyHours(flavor string, gpus float64, days int, share func(day int) float64, busy float64) []FlavorHour {
	end := now.Truncate(time.Hour)
	start := end.Add(-time.Duration(days) * 24 * time.Hour)
	var out []FlavorHour
	for h := start; h.Before(end); h = h.Add(time.Hour) {
		s := share(int(h.Sub(start).Hours() / 24))
		out = append(out, FlavorHour{Hour: h, Flavor: flavor, Existing: gpus * 3600, Allocated: s * gpus * 3600, Active: s * busy * gpus * 3600})
	}
	return out
}

func constant(s float64) func(int) float64 { return func(int) float64 { return s } }

var prices = map[string]int64{"h100": 6_880_000, "t4": 526_000}

// TestExpansionFiresOnlyOverAWholeWindow: the trigger buys when the GPUs
// were held and busy at least 80% of the time over the whole window, says
// reclaim when they were held but not busy, and nothing without enough
// history. (It bought 72 H100s for MIG slices 80% held and 12.8% busy.)
func TestExpansionFiresOnlyOverAWholeWindow(t *testing.T) {
	allocatedRule := DefaultRule
	allocatedRule.Measure = MeasureAllocated
	for _, tc := range []struct {
		name    string
		facts   []FlavorHour
		rule    Rule
		action  string
		why     string
		forcast bool
	}{
		{"31 days at 90%, 95% busy", busyHours("h100", 64, 31, constant(0.9), 0.95), DefaultRule, ActionBuy, "90.0% allocated (daily 90.0%-90.0%) and 85.5% active", false},
		{"exactly 30 days at 90%, 95% busy", busyHours("h100", 64, 30, constant(0.9), 0.95), DefaultRule, ActionBuy, "active at or above 80%", false},
		{"31 days at 90%, half busy", hours("h100", 64, 31, constant(0.9)), DefaultRule, ActionReclaim, "90.0% allocated but 45.0% active", false},
		{"31 days at 90%, half busy, by allocation", hours("h100", 64, 31, constant(0.9)), allocatedRule, ActionBuy, "allocated at or above 80%", false},
		{"29 days at 90%", busyHours("h100", 64, 29, constant(0.9), 0.95), DefaultRule, "", "not enough history", false},
		{"3 days at 100%", hours("h100", 64, 3, constant(1)), DefaultRule, "", "3.0 days; the rule needs 30", false},
		{"31 days at 79%", busyHours("h100", 64, 31, constant(0.79), 1), DefaultRule, "", "79.0% allocated and 79.0% active over the window: active below 80%", false},
		{"31 days rising from 50%", busyHours("h100", 64, 31, func(d int) float64 { return 0.5 + 0.005*float64(d) }, 1), DefaultRule, "", "below 80%", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := Expansion(tc.facts, nil, now, tc.rule, prices)
			if len(recs) != 1 {
				t.Fatalf("%d recommendations, want 1", len(recs))
			}
			r := recs[0]
			if r.Action != tc.action || r.Fired != (tc.action == ActionBuy) || !strings.Contains(r.Why, tc.why) {
				t.Errorf("action %q, fired %v (%s), want %q (%q)", r.Action, r.Fired, r.Why, tc.action, tc.why)
			}
			if (r.Reclaim != nil) != (tc.action == ActionReclaim) {
				t.Errorf("reclaim evidence %+v", r.Reclaim)
			}
			if !r.Forecast.IsZero() != tc.forcast {
				t.Errorf("forecast %v, want one: %v", r.Forecast, tc.forcast)
			}
			if r.PurchaseGPUs != 72 || r.MonthlyCostMicros != 72*6_880_000*730 {
				t.Errorf("purchase %d GPUs at %d a month", r.PurchaseGPUs, r.MonthlyCostMicros)
			}
		})
	}
}

// TestExpansionForecast: a share rising half a point a day from 50% on
// day 0 reaches 80% on day 60 of the fit, 30 days after the window's end.
func TestExpansionForecast(t *testing.T) {
	r := Expansion(busyHours("h100", 8, 30, func(d int) float64 { return 0.5 + 0.005*float64(d) }, 1), nil, now, DefaultRule, prices)[0]
	want := now.Truncate(time.Hour).Add(-30 * 24 * time.Hour).Add(60 * 24 * time.Hour).Truncate(24 * time.Hour)
	if math.Abs(r.Forecast.Sub(want).Hours()) > 24 {
		t.Errorf("forecast %s, want about %s", r.Forecast, want)
	}
	if math.Abs(r.Allocated-(0.5+0.005*14.5)) > 1e-9 || math.Abs(r.Active-r.Allocated) > 1e-9 {
		t.Errorf("allocated %g active %g", r.Allocated, r.Active)
	}
}

// TestExpansionNeedsCoverage: a week missing from the window keeps the
// rule from firing, however full the rest.
func TestExpansionNeedsCoverage(t *testing.T) {
	var facts []FlavorHour
	for _, h := range hours("h100", 8, 31, constant(1)) {
		if d := now.Sub(h.Hour); d < 10*24*time.Hour || d > 17*24*time.Hour {
			facts = append(facts, h)
		}
	}
	r := Expansion(facts, nil, now, DefaultRule, prices)[0]
	if r.Fired || !strings.Contains(r.Why, "not enough data") {
		t.Errorf("fired %v: %s", r.Fired, r.Why)
	}
}

func TestBudgetLevels(t *testing.T) {
	for _, tc := range []struct {
		spent, budget int64
		want          int
	}{{0, 100, 0}, {49, 100, 0}, {50, 100, 50}, {79, 100, 50}, {80, 100, 80}, {99, 100, 80}, {100, 100, 100}, {500, 100, 100}} {
		if got := level(tc.spent, tc.budget); got != tc.want {
			t.Errorf("level(%d, %d) = %d, want %d", tc.spent, tc.budget, got, tc.want)
		}
	}
}

// saturated is days of ledger hours of a ClusterQueue of 64 H100s whose
// team holds 58 (90.6%), 56 of them busy (87.5%), and leaves 6
// unallocated, ending at now's hour.
func saturated(cluster string, days int) []ledger.Row {
	var rows []ledger.Row
	end := now.Truncate(time.Hour)
	for h := end.Add(-time.Duration(days) * 24 * time.Hour); h.Before(end); h = h.Add(time.Hour) {
		k := ledger.Key{Hour: h, Cluster: cluster, Team: "nlp", Namespace: "nlp", LocalQueue: "q", ClusterQueue: "train", Flavor: "h100"}
		rows = append(rows, ledger.Row{Key: k, GPUSeconds: 58 * 3600, ActiveGPUSeconds: 56 * 3600, CostMicros: 58 * 6_880_000})
		k.Team, k.Namespace, k.LocalQueue, k.ClusterQueue = ledger.TeamUnallocated, "", "", ""
		rows = append(rows, ledger.Row{Key: k, GPUSeconds: 6 * 3600, CostMicros: 6 * 6_880_000, UnallocatedCostMicros: 6 * 6_880_000})
	}
	return rows
}

// TestReadFactsAndBudgets: the facts and the budgets come from the
// ledger's rows.
func TestReadFactsAndBudgets(t *testing.T) {
	s := embeddedtest.Open(t, saturated("prod", 31)...)
	facts, err := ReadFacts(context.Background(), s, "prod", now.Add(-40*24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 31*24 {
		t.Fatalf("%d hours, want %d", len(facts), 31*24)
	}
	if f := facts[0]; f.Existing != 64*3600 || f.Allocated != 58*3600 || f.Active != 56*3600 || f.Flavor != "h100" {
		t.Errorf("first hour %+v", f)
	}
	// November to now (the 30th, 12:00): 29.5 days of 58 H100s at 6.88.
	budgets, err := Budgets(context.Background(), s, "prod", map[string]int64{"nlp": 300_000_000_000, "cv": 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	mtd := int64(29*24+12) * 58 * 6_880_000
	if len(budgets) != 2 || budgets[1].Team != "nlp" || budgets[1].MonthToDateMicros != mtd || budgets[1].Level != 80 {
		t.Fatalf("budgets %+v, want nlp at %d (80%%)", budgets, mtd)
	}
	if want := int64(math.Round(float64(mtd) * 720 / 708)); budgets[1].ForecastMicros != want || budgets[1].ForecastLevel != 80 {
		t.Errorf("forecast %d (level %d), want %d", budgets[1].ForecastMicros, budgets[1].ForecastLevel, want)
	}
	if budgets[0].Team != "cv" || budgets[0].Level != 0 {
		t.Errorf("cv spent nothing: %+v", budgets[0])
	}
	alerts := BudgetAlerts("prod", "USD", budgets)
	if len(alerts) != 1 || alerts[0].Labels["threshold"] != "80" || alerts[0].Labels["severity"] != "warning" || !strings.Contains(alerts[0].Annotations["evidence"], fmt.Sprintf("%s USD spent", ledger.FormatCents(mtd))) {
		t.Errorf("budget alerts %+v", alerts)
	}
}

// TestBudgetsForAnyMonth: a month's budgets read right whenever they are
// asked: before it (nothing), in it (to date, and a forecast), at its end
// and after (its whole spend, final, the forecast the same). (The
// overview asked for a finished month with the next month's start and
// showed every budget at 0.00.)
func TestBudgetsForAnyMonth(t *testing.T) {
	// The ledger has November 2026 to the 30th, 12:00: 58 H100s at 6.88.
	s := embeddedtest.Open(t, saturated("prod", 31)...)
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	budgets := map[string]int64{"nlp": 300_000_000_000}
	hourly := int64(58 * 6_880_000)
	whole := int64(29*24+12) * hourly // what the ledger has of November
	for _, c := range []struct {
		name          string
		now           time.Time
		spent, fcast  int64
		final         bool
		level, flevel int
	}{
		{"before the month", nov.Add(-time.Hour), 0, 0, false, 0, 0},
		{"its first hour", nov, 0, 0, false, 0, 0},
		{"the 15th, noon", nov.Add(14*24*time.Hour + 12*time.Hour), (14*24 + 12) * hourly, int64(math.Round(float64((14*24+12)*hourly) * 720 / 348)), false, 0, 80},
		{"its end", nov.AddDate(0, 1, 0), whole, whole, true, 80, 80},
		{"two months on", nov.AddDate(0, 3, 0), whole, whole, true, 80, 80},
	} {
		got, err := BudgetsFor(context.Background(), s, "prod", budgets, nov, c.now)
		if err != nil {
			t.Fatal(err)
		}
		b := got[0]
		if b.MonthToDateMicros != c.spent || b.ForecastMicros != c.fcast || b.Final != c.final || b.Level != c.level || b.ForecastLevel != c.flevel {
			t.Errorf("%s: %+v; want spent %d, forecast %d, final %v, levels %d/%d", c.name, b, c.spent, c.fcast, c.final, c.level, c.flevel)
		}
	}
}

// TestReclaimVerdict: MIG slices 80% held and 12.8% busy over 30 days (the
// demo's h100-mig) are not a reason to buy 72 GPUs: the verdict and its
// alert say reclaim, with the GPUs held idle, what they cost a month, the
// namespaces that hold them and their most idle workloads.
func TestReclaimVerdict(t *testing.T) {
	facts := busyHours("h100-mig", 8, 31, constant(0.8), 0.16)
	holders := map[string][]IdleHolder{"h100-mig": {
		{Team: "data-science", Namespace: "ds-notebooks", ClusterQueue: "notebooks", IdleGPUs: 3.5, HeldGPUs: 4, IdleCostMonthlyMicros: 17_582_800_000,
			Workloads: []ledger.WorkloadRow{{Kind: "StatefulSet", Name: "nb-7", GPUSeconds: 90_000, ActiveGPUSeconds: 18_000, IdleCostMicros: 137_600_000}}},
		{Team: "nlp", Namespace: "nlp-serving", ClusterQueue: "nlp-serving", IdleGPUs: 1.9, HeldGPUs: 2.4, IdleCostMonthlyMicros: 9_544_000_000},
	}}
	r := Expansion(facts, holders, now, DefaultRule, map[string]int64{"h100-mig": 6_880_000})[0]
	if r.Action != ActionReclaim || r.Fired || r.Reclaim == nil {
		t.Fatalf("%s: %s", r.Action, r.Why)
	}
	// 8 GPUs 80% held, 16% of that busy: 5.376 held idle on average.
	if math.Abs(r.Reclaim.IdleGPUs-5.376) > 1e-9 || r.Reclaim.IdleCostMonthlyMicros != int64(math.Round(5.376*6_880_000*730)) || len(r.Reclaim.Holders) != 2 {
		t.Errorf("reclaim %+v", r.Reclaim)
	}
	alerts := ExpansionAlerts("prod", "USD", []Recommendation{r})
	if len(alerts) != 1 || alerts[0].Labels["alertname"] != AlertReclaim || alerts[0].Labels["action"] != "reclaim" {
		t.Fatalf("alerts %+v", alerts)
	}
	for k, want := range map[string]string{"summary": "Reclaim 5.4 idle h100-mig GPUs before buying: 80.0% of them were held but 12.8% busy",
		"recommendation": "give back 5.4 GPUs held idle (27000.42 USD a month) before buying; most idle: data-science/ds-notebooks 3.5 idle of 4.0 held (17582.80 USD a month), its most idle workloads: StatefulSet/nb-7 20 idle GPU-h (137.60 USD)"} {
		if got := alerts[0].Annotations[k]; !strings.Contains(got, want) {
			t.Errorf("%s %q lacks %q", k, got, want)
		}
	}
}
