package reports

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuledger/gpuledger/ledger"
)

// focus13Columns are the column IDs of FOCUS 1.3's Cost and Usage dataset
// (specification/datasets/cost_and_usage.md), with whether a column is
// Mandatory and whether it allows nulls.
var focus13Columns = map[string]struct{ mandatory, nulls bool }{
	"AllocatedMethodDetails": {false, true}, "AllocatedMethodId": {false, true}, "AllocatedResourceId": {false, true},
	"AllocatedResourceName": {false, true}, "AllocatedTags": {false, true}, "AvailabilityZone": {false, true},
	"BilledCost": {true, false}, "BillingAccountId": {true, false}, "BillingAccountName": {true, true},
	"BillingAccountType": {false, false}, "BillingCurrency": {true, false}, "BillingPeriodEnd": {true, false},
	"BillingPeriodStart": {true, false}, "CapacityReservationId": {false, true}, "CapacityReservationStatus": {false, true},
	"ChargeCategory": {true, false}, "ChargeClass": {true, true}, "ChargeDescription": {true, true},
	"ChargeFrequency": {false, false}, "ChargePeriodEnd": {true, false}, "ChargePeriodStart": {true, false},
	"CommitmentDiscountCategory": {false, true}, "CommitmentDiscountId": {false, true}, "CommitmentDiscountName": {false, true},
	"CommitmentDiscountQuantity": {false, true}, "CommitmentDiscountStatus": {false, true}, "CommitmentDiscountType": {false, true},
	"CommitmentDiscountUnit": {false, true}, "ConsumedQuantity": {false, true}, "ConsumedUnit": {false, true},
	"ContractApplied": {false, true}, "ContractedCost": {true, false}, "ContractedUnitPrice": {false, true},
	"EffectiveCost": {true, false}, "HostProviderName": {true, false}, "InvoiceId": {false, true},
	"InvoiceIssuerName": {true, false}, "ListCost": {true, false}, "ListUnitPrice": {false, true},
	"PricingCategory": {false, true}, "PricingCurrency": {false, true}, "PricingCurrencyContractedUnitPrice": {false, true},
	"PricingCurrencyEffectiveCost": {false, true}, "PricingCurrencyListUnitPrice": {false, true},
	"PricingQuantity": {true, true}, "PricingUnit": {true, true}, "ProviderName": {true, false}, "PublisherName": {true, false},
	"RegionId": {false, true}, "RegionName": {false, true}, "ResourceId": {false, true}, "ResourceName": {false, true},
	"ResourceType": {false, true}, "ServiceCategory": {true, false}, "ServiceName": {true, false},
	"ServiceProviderName": {true, false}, "ServiceSubcategory": {false, false}, "SkuId": {false, true},
	"SkuMeter": {false, true}, "SkuPriceDetails": {false, true}, "SkuPriceId": {false, true}, "SubAccountId": {false, true},
	"SubAccountName": {false, true}, "SubAccountType": {false, true}, "Tags": {false, true},
}

var (
	focusDecimal = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	focusDate    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	focusPascal  = regexp.MustCompile(`^x_[A-Z][A-Za-z0-9]*$`)
)

// checkFOCUS parses a FOCUS export and holds it to FOCUS 1.3's column
// rules that apply to it; it returns the sum of EffectiveCost in micros.
func checkFOCUS(t *testing.T, data []byte) (effective int64, rows []map[string]string) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("FOCUS export is not CSV: %v", err)
	}
	if len(recs) == 0 {
		t.Fatal("FOCUS export is empty: no header")
	}
	head := recs[0]
	for _, c := range head {
		if _, ok := focus13Columns[c]; !ok && !focusPascal.MatchString(c) {
			t.Errorf("column %q is neither a FOCUS 1.3 column nor a custom x_PascalCase one", c)
		}
	}
	for c, spec := range focus13Columns {
		if spec.mandatory && !slices.Contains(head, c) {
			t.Errorf("mandatory column %s is missing", c)
		}
	}
	origins := map[string]*big.Rat{}
	var billed int64
	for n, rec := range recs[1:] {
		r := make(map[string]string, len(head))
		for i, c := range head {
			r[c] = rec[i]
		}
		rows = append(rows, r)
		errorf := func(format string, args ...any) {
			t.Helper()
			t.Errorf("row %d (%s %s %s): "+format, append([]any{n + 1, r["ResourceId"], r["AllocatedResourceId"], r["ChargePeriodStart"]}, args...)...)
		}
		for c, spec := range focus13Columns {
			if v, ok := r[c]; ok && v == "" && !spec.nulls {
				errorf("%s is null; FOCUS allows no null there", c)
			}
		}
		for _, c := range []string{"BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingQuantity", "ConsumedQuantity", "x_ActiveGPUHours"} {
			if v := r[c]; v != "" && !focusDecimal.MatchString(v) {
				errorf("%s = %q is not in FOCUS's numeric format", c, v)
			}
		}
		for _, c := range []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"} {
			if !focusDate.MatchString(r[c]) {
				errorf("%s = %q is not an ISO 8601 UTC date/time", c, r[c])
			}
		}
		if r["ChargePeriodStart"] >= r["ChargePeriodEnd"] || r["BillingPeriodStart"] >= r["BillingPeriodEnd"] {
			errorf("a period ends before it starts: charge %s-%s, billing %s-%s", r["ChargePeriodStart"], r["ChargePeriodEnd"], r["BillingPeriodStart"], r["BillingPeriodEnd"])
		}
		correction := r["ChargeClass"] == "Correction"
		switch {
		case r["ChargeClass"] != "" && !correction:
			errorf("ChargeClass = %q; want null or Correction", r["ChargeClass"])
		case !correction && (r["ChargePeriodStart"] < r["BillingPeriodStart"] || r["ChargePeriodEnd"] > r["BillingPeriodEnd"]):
			errorf("a charge of this billing period outside it: %s-%s", r["ChargePeriodStart"], r["ChargePeriodEnd"])
		case correction && r["ChargePeriodStart"] >= r["BillingPeriodStart"]:
			errorf("a correction of a previous billing period charged in this one: %s", r["ChargePeriodStart"])
		}
		if !slices.Contains([]string{"Usage", "Purchase", "Tax", "Credit", "Adjustment"}, r["ChargeCategory"]) {
			errorf("ChargeCategory = %q is not an allowed value", r["ChargeCategory"])
		}
		if !slices.Contains([]string{"One-Time", "Recurring", "Usage-Based"}, r["ChargeFrequency"]) {
			errorf("ChargeFrequency = %q is not an allowed value", r["ChargeFrequency"])
		}
		if r["ServiceCategory"] != "Compute" || !slices.Contains([]string{"Containers", "Virtual Machines", "Other (Compute)"}, r["ServiceSubcategory"]) {
			errorf("service category %q / %q is not an allowed pair", r["ServiceCategory"], r["ServiceSubcategory"])
		}
		if v := r["PricingCategory"]; v != "" && !slices.Contains([]string{"Standard", "Dynamic", "Committed", "Other"}, v) {
			errorf("PricingCategory = %q is not an allowed value", v)
		}
		if r["ChargeCategory"] == "Usage" && !correction && (r["PricingQuantity"] == "" || r["ConsumedQuantity"] == "") {
			errorf("a usage charge without PricingQuantity or ConsumedQuantity")
		}
		if (r["PricingQuantity"] == "") != (r["PricingUnit"] == "") || (r["ConsumedQuantity"] == "") != (r["ConsumedUnit"] == "") {
			errorf("a quantity without its unit or a unit without its quantity")
		}
		if (r["ResourceId"] == "") != (r["ResourceType"] == "") {
			errorf("ResourceType must be null exactly when ResourceId is")
		}
		if r["ListUnitPrice"] != "" || r["ContractedUnitPrice"] != "" {
			errorf("unit prices are given, so cost must equal price × quantity; check it or leave them null")
		}
		cost, err := ledger.ParseMicros(r["EffectiveCost"])
		if err != nil {
			errorf("EffectiveCost: %v", err)
		}
		for _, c := range []string{"BilledCost", "ListCost", "ContractedCost"} {
			if r[c] != r["EffectiveCost"] {
				errorf("%s = %s differs from EffectiveCost %s with no discount or commitment", c, r[c], r["EffectiveCost"])
			}
		}
		effective += cost
		b, _ := ledger.ParseMicros(r["BilledCost"])
		billed += b
		tags := jsonObject(t, errorf, "Tags", r["Tags"])
		alloc := jsonObject(t, errorf, "AllocatedTags", r["AllocatedTags"])
		for k := range alloc {
			if _, dup := tags[k]; dup {
				errorf("AllocatedTags repeats the resource tag %q", k)
			}
		}
		// Split cost allocation.
		method, details := r["AllocatedMethodId"], r["AllocatedMethodDetails"]
		if (method == "") != (details == "") {
			errorf("AllocatedMethodId and AllocatedMethodDetails: one is null, the other not")
		}
		if r["AllocatedResourceId"] != "" && method == "" {
			errorf("an allocated charge (AllocatedResourceId %q) without AllocatedMethodId", r["AllocatedResourceId"])
		}
		if (r["AllocatedResourceId"] == "") != (r["AllocatedTags"] == "") {
			errorf("AllocatedTags must be null exactly when AllocatedResourceId is (the unallocated portion, or no split)")
		}
		if details == "" {
			continue
		}
		var d struct {
			Elements []map[string]json.RawMessage
		}
		dec := json.NewDecoder(strings.NewReader(details))
		dec.UseNumber()
		if err := dec.Decode(&d); err != nil || len(d.Elements) == 0 {
			errorf("AllocatedMethodDetails = %q: not an object with an Elements array (%v)", details, err)
			continue
		}
		for _, e := range d.Elements {
			for k := range e {
				if !slices.Contains([]string{"AllocatedRatio", "UsageUnit", "UsageQuantity"}, k) && !focusPascal.MatchString(k) {
					errorf("AllocatedMethodDetails key %q is neither FOCUS's nor x_", k)
				}
			}
			if _, ok := e["UsageQuantity"]; ok && e["UsageUnit"] == nil {
				errorf("UsageQuantity without UsageUnit")
			}
			ratio, ok := new(big.Rat).SetString(string(e["AllocatedRatio"]))
			if !ok || !focusDecimal.MatchString(string(e["AllocatedRatio"])) {
				errorf("AllocatedRatio = %s is not a decimal", e["AllocatedRatio"])
				continue
			}
			key := r["ResourceId"] + " " + r["ChargePeriodStart"]
			if origins[key] == nil {
				origins[key] = new(big.Rat)
			}
			origins[key].Add(origins[key], ratio)
		}
	}
	one := big.NewRat(1, 1)
	for k, sum := range origins {
		if sum.Cmp(one) != 0 {
			t.Errorf("origin charge %s: AllocatedRatio sums to %s, want exactly 1", k, sum.FloatString(12))
		}
	}
	if billed != effective {
		t.Errorf("BilledCost sums to %d, EffectiveCost to %d", billed, effective)
	}
	return effective, rows
}

func jsonObject(t *testing.T, errorf func(string, ...any), column, v string) map[string]any {
	t.Helper()
	if v == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		errorf("%s = %q is not a JSON object: %v", column, v, err)
	}
	for k, val := range m {
		if !strings.HasPrefix(k, focusTagPrefix) {
			errorf("%s key %q lacks gpuledger's prefix %q", column, k, focusTagPrefix)
		}
		if _, ok := val.(string); !ok {
			errorf("%s[%q] = %v is not a string", column, k, val)
		}
	}
	return m
}

func writeFOCUS(t *testing.T, cb *Chargeback) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := cb.WriteFOCUS(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFOCUS(t *testing.T) {
	cb := testChargeback(t)
	data := writeFOCUS(t, cb)
	golden(t, "focus.csv", string(data))
	sum, rows := checkFOCUS(t, data)
	if sum != cb.Total.ChargeMicros() {
		t.Errorf("EffectiveCost sums to %s; the chargeback's TOTAL charge is %s", ledger.FormatMicros(sum), ledger.FormatMicros(cb.Total.ChargeMicros()))
	}
	// Day 1's h100 pool: ml 13.76, ds 6.88, _unowned 3.44, _unallocated
	// 3.44 of 27.52.
	want := map[string]string{"namespace/ml": "0.500000000000", "namespace/ds": "0.250000000000", "namespace/_unowned": "0.125000000000", "": "0.125000000000"}
	got := map[string]string{}
	for _, r := range rows {
		if r["ResourceId"] == "gpuledger://c1/h100" && r["ChargePeriodStart"] == "2026-10-01T00:00:00Z" {
			var d struct {
				Elements []struct{ AllocatedRatio json.Number }
			}
			if err := json.Unmarshal([]byte(r["AllocatedMethodDetails"]), &d); err != nil || len(d.Elements) != 1 {
				t.Fatalf("AllocatedMethodDetails %q: %v", r["AllocatedMethodDetails"], err)
			}
			got[r["AllocatedResourceId"]] = d.Elements[0].AllocatedRatio.String()
		}
	}
	if len(got) != len(want) {
		t.Errorf("day 1's h100 pool: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("day 1's h100 pool, %q: ratio %s, want %s", k, got[k], v)
		}
	}

	var empty Chargeback
	empty.Month = cb.Month
	if err := empty.WriteFOCUS(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "Options.FOCUS") {
		t.Errorf("a chargeback built without FOCUS rows: %v, want an error naming Options.FOCUS", err)
	}
}

// TestFOCUSCorrections: adjustments of a closed month are Correction rows
// of the month they are billed in, and the export still sums to the
// chargeback's TOTAL charge; a team's export holds its rows only.
func TestFOCUSCorrections(t *testing.T) {
	ctx := context.Background()
	s, _, nov, _, _ := closedOctober(t)
	cb, err := Build(ctx, s, nov, Options{Currency: "USD", Teams: []string{"ml", "ds"}, FOCUS: true})
	if err != nil {
		t.Fatal(err)
	}
	sum, rows := checkFOCUS(t, writeFOCUS(t, cb))
	if sum != cb.Total.ChargeMicros() {
		t.Errorf("EffectiveCost sums to %s; the TOTAL charge is %s", ledger.FormatMicros(sum), ledger.FormatMicros(cb.Total.ChargeMicros()))
	}
	var corrections []string
	for _, r := range rows {
		if r["ChargeClass"] == "Correction" {
			corrections = append(corrections, r["Tags"]+" "+r["ChargePeriodStart"]+" "+r["BilledCost"])
		}
	}
	slices.Sort(corrections)
	want := []string{
		`{"gpuledger.io/cluster":"c1","gpuledger.io/team":"_unallocated"} 2026-10-01T05:00:00Z -3.440000`,
		`{"gpuledger.io/cluster":"c1","gpuledger.io/team":"ds"} 2026-10-01T05:00:00Z -3.440000`,
		`{"gpuledger.io/cluster":"c1","gpuledger.io/team":"ml"} 2026-10-01T05:00:00Z 6.880000`,
	}
	if !slices.Equal(corrections, want) {
		t.Errorf("corrections:\n%s\nwant:\n%s", strings.Join(corrections, "\n"), strings.Join(want, "\n"))
	}

	mine, err := Build(ctx, s, nov, Options{Currency: "USD", Team: "ml", FOCUS: true})
	if err != nil {
		t.Fatal(err)
	}
	data := writeFOCUS(t, mine)
	if bytes.Contains(data, []byte(`"ds"`)) || bytes.Contains(data, []byte("_unallocated")) {
		t.Errorf("ml's FOCUS export shows other teams' rows:\n%s", data)
	}
	// ml held 6.88 of the pool's 27.52 on November 1: a quarter.
	if !bytes.Contains(data, []byte(`""AllocatedRatio"":0.250000000000`)) {
		t.Errorf("ml's FOCUS export lacks its ratio of the pool (0.25):\n%s", data)
	}
}

// TestSplitRatios: a whole origin's ratios sum to exactly one, and each
// is within one unit of its exact share.
func TestSplitRatios(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(12)
		rows := make([]ledger.Row, n)
		var total int64
		for i := range rows {
			switch rng.IntN(4) {
			case 0:
				rows[i].CostMicros = rng.Int64N(10) // tiny
			case 1:
				rows[i].CostMicros = rng.Int64N(1 << 50) // huge: overflows a naive cost × 10^12
			default:
				rows[i].CostMicros = rng.Int64N(100_000_000)
			}
			rows[i].GPUSeconds = rng.Float64() * 3600
			total += rows[i].CostMicros
		}
		ratios := splitRatios(rows, total, true)
		var sum uint64
		for i, r := range ratios {
			sum += r
			exact := new(big.Rat).SetFrac(big.NewInt(rows[i].CostMicros), big.NewInt(max(total, 1)))
			if total == 0 {
				continue
			}
			got := new(big.Rat).SetFrac(new(big.Int).SetUint64(r), big.NewInt(ratioOne))
			diff := new(big.Rat).Sub(got, exact)
			if diff.Abs(diff).Cmp(big.NewRat(1, ratioOne)) > 0 {
				t.Fatalf("costs %v: ratio %d = %s, exact %s", rows, i, got.FloatString(14), exact.FloatString(14))
			}
		}
		if sum != ratioOne && !(total == 0 && allZeroTime(rows)) {
			t.Fatalf("costs %v: ratios %v sum to %d, want %d", rows, ratios, sum, uint64(ratioOne))
		}
	}
	if got := FormatRatio(ratioOne); got != "1" {
		t.Errorf("FormatRatio(1) = %q", got)
	}
	if got := FormatRatio(5); got != "0.000000000005" {
		t.Errorf("FormatRatio(5e-12) = %q", got)
	}
}

func allZeroTime(rows []ledger.Row) bool {
	for _, r := range rows {
		if uint64(r.GPUSeconds*1000) != 0 {
			return false
		}
	}
	return true
}

// TestWriteFilesFOCUS: -format focus writes focus-YYYY-MM.csv; an unknown
// format writes nothing.
func TestWriteFilesFOCUS(t *testing.T) {
	cb := testChargeback(t)
	dir := t.TempDir()
	if _, err := cb.WriteFiles(dir, []string{"csv", "pdf"}); err == nil || !strings.Contains(err.Error(), `"pdf"`) {
		t.Errorf("format pdf: %v, want an error naming it", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused format still wrote %v", ents)
	}
	paths, err := cb.WriteFiles(dir, []string{"focus"})
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != "focus-2026-10.csv" {
		t.Fatalf("focus: %v %v", paths, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	checkFOCUS(t, data)
}
