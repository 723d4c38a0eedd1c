package config

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"

	"github.com/gpuledger/gpuledger/ledger"
)

//go:embed pricebook.csv
var pricebookCSV string

// CatalogCurrency is the currency of the built-in price book.
const CatalogCurrency = "USD"

// CatalogEntry is one cloud instance type of the built-in price book.
type CatalogEntry struct {
	Provider, InstanceType, GPUModel string
	GPUs                             int
	OnDemandMicros                   int64 // per GPU-hour
	SpotMicros                       int64 // per GPU-hour; 0 when unknown
}

var (
	catalogOnce sync.Once
	catalog     map[string]CatalogEntry
)

// Catalog returns the built-in price book, keyed by <provider>/<instance type>.
func Catalog() map[string]CatalogEntry {
	catalogOnce.Do(func() {
		catalog = make(map[string]CatalogEntry)
		var lines []string
		for _, l := range strings.Split(pricebookCSV, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		recs, err := csv.NewReader(strings.NewReader(strings.Join(lines, "\n"))).ReadAll()
		if err != nil {
			panic(fmt.Sprintf("config: built-in price book: %v", err))
		}
		for _, r := range recs[1:] {
			e := CatalogEntry{Provider: r[0], InstanceType: r[1], GPUModel: r[2]}
			fmt.Sscan(r[3], &e.GPUs)
			e.OnDemandMicros, _ = ledger.ParseMicros(r[4])
			if r[5] != "" {
				e.SpotMicros, _ = ledger.ParseMicros(r[5])
			}
			catalog[e.Provider+"/"+e.InstanceType] = e
		}
	})
	return catalog
}

func catalogKeys() string {
	keys := make([]string, 0, len(Catalog()))
	for k := range Catalog() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// HoursPerMonth is the average month that amortisation divides by.
const HoursPerMonth = 730

// RateMicros returns the on-premises price per GPU-hour (see OnPrem),
// rounded to the nearest micro-unit.
func (o *OnPrem) RateMicros() int64 {
	r := new(big.Rat).SetFrac64(o.PurchasePerGPU.Micros, int64(o.DepreciationMonths)*HoursPerMonth)
	pue := o.PUE.Micros
	if !o.PUE.Set {
		pue = ledger.MicrosPerUnit
	}
	// W/1000 × (pue/1e6) × price(µ/kWh)
	power := new(big.Rat).SetFrac(
		new(big.Int).Mul(big.NewInt(int64(o.PowerWattsPerGPU)), new(big.Int).Mul(big.NewInt(pue), big.NewInt(o.ElectricityPerKWh.Micros))),
		big.NewInt(1000*ledger.MicrosPerUnit))
	r.Add(r, power)
	r.Add(r, new(big.Rat).SetFrac64(o.OverheadPerGPUMonth.Micros, HoursPerMonth))
	// Round half up.
	num := new(big.Int).Mul(r.Num(), big.NewInt(2))
	num.Add(num, r.Denom())
	return num.Quo(num, new(big.Int).Mul(r.Denom(), big.NewInt(2))).Int64()
}
