package reports

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// The FOCUS export: the month's chargeback as a FOCUS 1.3 Cost and Usage
// dataset (the FinOps Foundation's FinOps Open Cost and Usage
// Specification), for the FinOps tools that ingest it.
//
// Each day of one flavor's GPUs in one cluster is an origin charge: what
// the pool cost that day. gpuledger splits it (FOCUS's data
// generator-calculated split cost allocation) into one allocated charge
// per holder, a team's namespace and queues, and one for the capacity
// nobody held (_unallocated, the origin's unallocated portion:
// AllocatedResourceId null). Every allocated charge names the method
// (FocusMethodID) and its share of the origin, AllocatedRatio, whose
// values over an origin sum to exactly 1. Adjustments billed this month
// (corrections of closed months, ledger.Rewrite) are rows of ChargeClass
// "Correction", charged in the hour they correct. The EffectiveCost of
// all rows is the chargeback's TOTAL charge, to the micro-unit.

// FocusMethodID names gpuledger's split: a pool's cost goes to each
// holder by the GPU time it held at the flavor's rate (a MIG slice by its
// compute share), and capacity nobody held to _unallocated, or to the
// teams by the configured unallocated policy (docs/cost-model.md).
const FocusMethodID = "gpuledger-gpu-time-v1"

// focusTagPrefix prefixes the keys of the tags gpuledger defines, as
// FOCUS asks of a provider's tags.
const focusTagPrefix = "gpuledger.io/"

// focusColumns are the FOCUS 1.3 Cost and Usage columns written, in the
// specification's (alphabetical) order, then gpuledger's own x_ columns.
// Conditional columns whose condition never holds here (commitment
// discounts, capacity reservations, SKUs, regions, contracts, pricing
// currencies) are left out, as FOCUS allows.
var focusColumns = []string{
	"AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
	"BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
	"ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart",
	"ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "HostProviderName",
	"InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
	"ProviderName", "PublisherName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName",
	"ServiceProviderName", "ServiceSubcategory", "Tags",
	"x_ActiveGPUHours", "x_IdleCost", "x_UnmeasuredCost", "x_UnallocatedCost",
}

// FocusRow is one row of the FOCUS export. Amounts are micro-units; a
// nil pointer or an empty string is a null.
type FocusRow struct {
	Cluster, Flavor string
	// Team, Namespace, LocalQueue and ClusterQueue are the holder; Team
	// is ledger.TeamUnallocated for the origin's unallocated portion.
	Team, Namespace, LocalQueue, ClusterQueue string
	ChargeStart, ChargeEnd                    time.Time
	CostMicros                                int64
	IdleMicros, UnmeasuredMicros              int64
	UnallocatedMicros                         int64
	GPUHours, ActiveGPUHours                  float64
	// Ratio is the row's share of its origin charge, in units of
	// 10^-RatioDigits: the ratios of one origin sum to exactly
	// 10^RatioDigits.
	Ratio uint64
	// Correction is set for adjustments of a closed month billed this
	// month: a run of hours of one team that one rewrite corrected; the
	// charge period is those hours.
	Correction *RestatementGroup
}

// RatioDigits is the number of decimals of an AllocatedRatio.
const RatioDigits = 12

const ratioOne = 1_000_000_000_000 // 10^RatioDigits

// buildFocus reads the month's day-by-day rows per holder and flavor and
// splits each origin charge (cluster, flavor, day) into them.
func (cb *Chargeback) buildFocus(ctx context.Context, store ledger.Store, opts Options) error {
	from, to := cb.Month, cb.Month.AddDate(0, 1, 0)
	rows, err := store.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepDay, Cluster: opts.Cluster, Team: opts.Team,
		GroupBy: []ledger.Dimension{ledger.DimCluster, ledger.DimFlavor, ledger.DimTeam, ledger.DimNamespace,
			ledger.DimLocalQueue, ledger.DimClusterQueue}})
	if err != nil {
		return fmt.Errorf("FOCUS rows of %s: %w", from.Format("2006-01"), err)
	}
	// A team's report holds its own rows only; its ratios are of the
	// whole pool, read apart (the pool's cost, not any other team's).
	origins := make(map[focusOrigin]int64)
	if opts.Team != "" {
		pools, err := store.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepDay, Cluster: opts.Cluster,
			GroupBy: []ledger.Dimension{ledger.DimCluster, ledger.DimFlavor}})
		if err != nil {
			return fmt.Errorf("FOCUS origin charges of %s: %w", from.Format("2006-01"), err)
		}
		for _, p := range pools {
			origins[focusOrigin{p.Hour, p.Cluster, p.Flavor}] += p.CostMicros
		}
	}
	slices.SortStableFunc(rows, func(a, b ledger.Row) int {
		return cmpOrigin(focusOrigin{a.Hour, a.Cluster, a.Flavor}, focusOrigin{b.Hour, b.Cluster, b.Flavor})
	})
	cb.Focus = make([]FocusRow, 0, len(rows)+len(cb.Adjustments))
	for i := 0; i < len(rows); {
		o := focusOrigin{rows[i].Hour, rows[i].Cluster, rows[i].Flavor}
		j := i
		var sum int64
		for j < len(rows) && (focusOrigin{rows[j].Hour, rows[j].Cluster, rows[j].Flavor}) == o {
			sum += rows[j].CostMicros
			j++
		}
		total, whole := sum, true
		if opts.Team != "" {
			total, whole = origins[o], false
		}
		group := rows[i:j]
		ratios := splitRatios(group, total, whole)
		for k := range group {
			r := &group[k]
			if r.CostMicros == 0 && r.GPUSeconds == 0 {
				continue
			}
			cb.Focus = append(cb.Focus, FocusRow{
				Cluster: r.Cluster, Flavor: r.Flavor, Team: r.Team, Namespace: r.Namespace,
				LocalQueue: r.LocalQueue, ClusterQueue: r.ClusterQueue,
				ChargeStart: r.Hour, ChargeEnd: r.Hour.AddDate(0, 0, 1),
				CostMicros: r.CostMicros, IdleMicros: r.IdleCostMicros, UnmeasuredMicros: r.UnmeasuredCostMicros,
				UnallocatedMicros: r.UnallocatedCostMicros,
				GPUHours:          r.GPUSeconds / 3600, ActiveGPUHours: r.ActiveGPUSeconds / 3600,
				Ratio: ratios[k],
			})
		}
		i = j
	}
	for _, g := range GroupRestatements(cb.Adjustments) {
		if g.DeltaMicros() == 0 {
			continue
		}
		cb.Focus = append(cb.Focus, FocusRow{Cluster: g.Cluster, Team: g.Team, ChargeStart: g.From, ChargeEnd: g.To,
			CostMicros: g.DeltaMicros(), GPUHours: g.AfterGPUHours - g.BeforeGPUHours, Correction: &g})
	}
	return nil
}

type focusOrigin struct {
	Day             time.Time
	Cluster, Flavor string
}

func cmpOrigin(a, b focusOrigin) int {
	if c := a.Day.Compare(b.Day); c != 0 {
		return c
	}
	if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
		return c
	}
	return strings.Compare(a.Flavor, b.Flavor)
}

// splitRatios gives each row its share of the origin's cost in units of
// 10^-RatioDigits. When the rows are the whole origin (whole), the shares
// are a largest-remainder split (ledger.SplitLargestRemainder), so that
// they sum to exactly 10^RatioDigits; otherwise each is rounded to the
// nearest unit, at most 1. An origin that cost nothing is split by GPU
// time instead.
func splitRatios(rows []ledger.Row, total int64, whole bool) []uint64 {
	w := make([]int64, len(rows))
	var sum int64
	for i := range rows {
		if c := rows[i].CostMicros; c > 0 {
			w[i] = c
			sum += c
		}
	}
	if sum == 0 || total <= 0 {
		// Nothing cost anything: split by GPU time held, in
		// milli-GPU-seconds.
		for i := range rows {
			w[i] = int64(max(rows[i].GPUSeconds, 0) * 1000)
		}
		whole = true
	}
	out := make([]uint64, len(rows))
	if whole {
		for i, v := range ledger.SplitLargestRemainder(ratioOne, w, nil) {
			out[i] = uint64(v)
		}
		return out
	}
	den := uint64(total)
	for i, v := range w {
		hi, lo := bits.Mul64(uint64(v), ratioOne)
		if hi >= den {
			// A row larger than its origin (a team's rows against a
			// pool total that moved): cap at 1.
			out[i] = ratioOne
			continue
		}
		q, r := bits.Div64(hi, lo, den)
		if q < ratioOne && 2*r >= den {
			q++
		}
		out[i] = q
	}
	return out
}

// FormatRatio formats a ratio in units of 10^-RatioDigits as an exact
// decimal, such as "0.250000000000" or "1".
func FormatRatio(r uint64) string {
	if r >= ratioOne {
		return "1"
	}
	s := strconv.FormatUint(r, 10)
	return "0." + strings.Repeat("0", RatioDigits-len(s)) + s
}

// FocusFileName is the FOCUS export's file name: focus-YYYY-MM.csv.
func (cb *Chargeback) FocusFileName() string { return "focus-" + cb.Month.Format("2006-01") + ".csv" }

// focusTime formats a FOCUS date/time: ISO 8601 in UTC.
func focusTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// focusJSON marshals a JSON object column; maps marshal with sorted keys,
// so the output is stable.
func focusJSON(v map[string]string) string {
	b, _ := json.Marshal(v) // a map of strings always marshals
	return string(b)
}

// focusTags returns the key-value pairs whose value is not empty, keys
// prefixed.
func focusTags(kv ...string) map[string]string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			m[focusTagPrefix+kv[i]] = kv[i+1]
		}
	}
	return m
}

// focusRecord renders one row in focusColumns' order.
func (cb *Chargeback) focusRecord(r *FocusRow) []string {
	v := make(map[string]string, len(focusColumns))
	cost := ledger.FormatMicros(r.CostMicros)
	for _, c := range []string{"BilledCost", "EffectiveCost", "ListCost", "ContractedCost"} {
		v[c] = cost
	}
	v["BillingAccountId"], v["BillingAccountName"] = r.Cluster, r.Cluster
	v["BillingCurrency"] = cb.Currency
	v["BillingPeriodStart"], v["BillingPeriodEnd"] = focusTime(cb.Month), focusTime(cb.Month.AddDate(0, 1, 0))
	v["ChargeCategory"], v["ChargeFrequency"] = "Usage", "Usage-Based"
	v["ChargePeriodStart"], v["ChargePeriodEnd"] = focusTime(r.ChargeStart), focusTime(r.ChargeEnd)
	v["InvoiceId"] = cb.FileBase()
	if cb.Cluster != "" {
		v["InvoiceId"] += "-" + cb.Cluster
	}
	for _, c := range []string{"HostProviderName", "InvoiceIssuerName", "ProviderName", "PublisherName", "ServiceProviderName"} {
		v[c] = "gpuledger"
	}
	v["ServiceCategory"], v["ServiceSubcategory"], v["ServiceName"] = "Compute", "Containers", "Kubernetes GPU"
	if a := r.Correction; a != nil {
		v["ChargeClass"] = "Correction"
		v["ChargeDescription"] = "Correction of " + a.Team + "'s GPU cost invoiced in a closed month: " + a.Describe()
		v["Tags"] = focusJSON(focusTags("cluster", r.Cluster, "team", r.Team))
		return focusOrder(v)
	}
	hours := strconv.FormatFloat(r.GPUHours, 'f', -1, 64)
	v["PricingQuantity"], v["ConsumedQuantity"] = hours, hours
	v["PricingUnit"], v["ConsumedUnit"] = "GPU-Hours", "GPU-Hours"
	v["PricingCategory"] = "Standard"
	pool := r.Cluster + "/" + r.Flavor
	v["ResourceId"], v["ResourceName"], v["ResourceType"] = "gpuledger://"+pool, pool+" GPUs", "GPU pool"
	v["Tags"] = focusJSON(focusTags("cluster", r.Cluster, "flavor", r.Flavor))
	v["AllocatedMethodId"] = FocusMethodID
	v["AllocatedMethodDetails"] = `{"Elements":[{"AllocatedRatio":` + FormatRatio(r.Ratio) + `,"UsageUnit":"GPU-Hours","UsageQuantity":` + hours + `}]}`
	v["x_ActiveGPUHours"] = strconv.FormatFloat(r.ActiveGPUHours, 'f', -1, 64)
	v["x_IdleCost"], v["x_UnmeasuredCost"] = ledger.FormatMicros(r.IdleMicros), ledger.FormatMicros(r.UnmeasuredMicros)
	v["x_UnallocatedCost"] = ledger.FormatMicros(r.UnallocatedMicros)
	day := r.ChargeStart.UTC().Format("2006-01-02")
	if r.Team == ledger.TeamUnallocated {
		v["ChargeDescription"] = fmt.Sprintf("%s GPU capacity in %s that no pod held on %s", r.Flavor, r.Cluster, day)
		return focusOrder(v)
	}
	id := "namespace/" + r.Namespace
	name := r.Namespace
	if r.LocalQueue != "" {
		id += "/localqueue/" + r.LocalQueue
		name += "/" + r.LocalQueue
	}
	v["AllocatedResourceId"], v["AllocatedResourceName"] = id, name
	v["AllocatedTags"] = focusJSON(focusTags("team", r.Team, "namespace", r.Namespace,
		"localqueue", r.LocalQueue, "clusterqueue", r.ClusterQueue))
	v["ChargeDescription"] = fmt.Sprintf("%s GPU time in %s held by %s (team %s) on %s", r.Flavor, r.Cluster, name, r.Team, day)
	return focusOrder(v)
}

func focusOrder(v map[string]string) []string {
	rec := make([]string, len(focusColumns))
	for i, c := range focusColumns {
		rec[i] = v[c]
	}
	return rec
}

// WriteFOCUS writes the FOCUS export as CSV: the header of focusColumns,
// then one row per FocusRow; a null is an empty field. The chargeback
// must have been built with Options.FOCUS.
func (cb *Chargeback) WriteFOCUS(w io.Writer) error {
	if cb.Focus == nil {
		return fmt.Errorf("the chargeback of %s was built without its FOCUS rows (reports.Options.FOCUS)", cb.Month.Format("2006-01"))
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(focusColumns); err != nil {
		return err
	}
	for i := range cb.Focus {
		if err := cw.Write(cb.focusRecord(&cb.Focus[i])); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
