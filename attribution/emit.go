package attribution

import (
	"math"
	"math/big"
	"sort"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Emit closes every hour that ends at or before untilMs (rounded down to an
// hour) and returns their rows and workload rows. For each hour the rows sum
// exactly to the inventory's hourly cost (CostMicros) and to the cost of the
// energy measured (EnergyCostMicros). Samples for closed hours are rejected
// as late afterwards. Rows come sorted by Key, workload rows by hour, team,
// namespace, kind and name.
func (a *Attributor) Emit(untilMs int64) ([]ledger.Row, []ledger.WorkloadRow) {
	until := floorHour(untilMs)
	if a.startMs == 0 || until <= a.emittedUntilMs {
		return nil, nil
	}
	for _, in := range a.instances {
		if in.pending && in.t < until {
			a.finalize(in, a.opts.ScrapeIntervalMs)
		}
	}
	var rows []ledger.Row
	var wls []ledger.WorkloadRow
	for h := a.emittedUntilMs; h < until; h += hourMs {
		rows, wls = a.appendHour(rows, wls, h)
		delete(a.hours, h)
	}
	a.emittedUntilMs = until
	return rows, wls
}

type part struct {
	h              holder
	heldW, activeW int64
	energyMJ       int64
}

type workloadKey struct {
	team, namespace, kind, name string
}

// hourBuild collects one hour's rows.
type hourBuild struct {
	hour  time.Time
	rows  map[ledger.Key]*ledger.Row
	wls   map[workloadKey]*ledger.WorkloadRow
	split []int64
}

func (b *hourBuild) row(k ledger.Key) *ledger.Row {
	r := b.rows[k]
	if r == nil {
		r = &ledger.Row{Key: k}
		b.rows[k] = r
	}
	return r
}

func (a *Attributor) appendHour(rows []ledger.Row, wls []ledger.WorkloadRow, hour int64) ([]ledger.Row, []ledger.WorkloadRow) {
	perUnit := a.hours[hour]
	b := &hourBuild{hour: time.UnixMilli(hour).UTC(), rows: make(map[ledger.Key]*ledger.Row), wls: make(map[workloadKey]*ledger.WorkloadRow)}
	var parts []part
	var weights, costs []int64
	// The hour's energy is priced once for the cluster, then split over
	// the rows it was booked to, so the rows sum to the price of the
	// whole.
	var erows []*ledger.Row
	var eweights []int64
	var totalMJ int64
	for i := range a.units {
		u := &a.units[i]
		parts = parts[:0]
		var nobodyMJ int64
		if perUnit != nil {
			for h, us := range perUnit[i] {
				if h == (holder{}) {
					nobodyMJ += us.energyMJ
					continue
				}
				parts = append(parts, part{h: h, heldW: us.heldW, activeW: us.activeW, energyMJ: us.energyMJ})
			}
		}
		sort.Slice(parts, func(x, y int) bool { return holderLess(parts[x].h, parts[y].h) })

		capacity := u.slices * hourMs * ShareUnits
		unalloc := capacity
		weights = append(weights[:0], 0)
		for _, p := range parts {
			unalloc -= p.heldW
			weights = append(weights, p.activeW, p.heldW-p.activeW)
		}
		weights[0] = unalloc
		costs = splitLargestRemainder(u.gpu.RateMicrosPerHour, weights, costs)

		den := float64(u.slices*ShareUnits) * 1000
		if unalloc > 0 || nobodyMJ > 0 {
			r := b.row(ledger.Key{Hour: b.hour, Cluster: a.model.Cluster, Team: ledger.TeamUnallocated, Flavor: u.gpu.Flavor})
			r.GPUSeconds += float64(unalloc) / den
			r.CostMicros += costs[0]
			r.UnallocatedCostMicros += costs[0]
			r.EnergyJoules += float64(nobodyMJ) / 1000
			erows, eweights, totalMJ = append(erows, r), append(eweights, nobodyMJ), totalMJ+nobodyMJ
		}
		for j, p := range parts {
			k := a.keyFor(b.hour, u.gpu.Flavor, p.h)
			active, idle := costs[1+2*j], costs[2+2*j]
			r := b.row(k)
			r.GPUSeconds += float64(p.heldW) / den
			r.ActiveGPUSeconds += float64(p.activeW) / den
			r.CostMicros += active + idle
			r.IdleCostMicros += idle
			r.EnergyJoules += float64(p.energyMJ) / 1000
			erows, eweights, totalMJ = append(erows, r), append(eweights, p.energyMJ), totalMJ+p.energyMJ

			kind, name := a.ownerOf(p.h)
			wk := workloadKey{k.Team, p.h.namespace, kind, name}
			w := b.wls[wk]
			if w == nil {
				w = &ledger.WorkloadRow{Hour: b.hour, Cluster: a.model.Cluster, Team: k.Team, Namespace: p.h.namespace, Kind: kind, Name: name}
				b.wls[wk] = w
			}
			w.GPUSeconds += float64(p.heldW) / den
			w.ActiveGPUSeconds += float64(p.activeW) / den
			w.CostMicros += active + idle
			w.IdleCostMicros += idle
		}
	}
	for i, c := range splitLargestRemainder(a.energyCostMicros(totalMJ), eweights, nil) {
		erows[i].EnergyCostMicros += c
	}
	a.splitBorrowed(b)
	a.shareUnallocated(b)

	start := len(rows)
	for _, r := range b.rows {
		rows = append(rows, *r)
	}
	SortRows(rows[start:])
	wstart := len(wls)
	for _, w := range b.wls {
		wls = append(wls, *w)
	}
	sort.Slice(wls[wstart:], func(i, j int) bool {
		x, y := &wls[wstart+i], &wls[wstart+j]
		return lessStrings([]string{x.Team, x.Namespace, x.Kind, x.Name}, []string{y.Team, y.Namespace, y.Kind, y.Name})
	})
	return rows, wls
}

// energyCostMicros prices mJ of GPU energy: kWh × price × PUE, rounded to
// the nearest micro-unit (halves up).
func (a *Attributor) energyCostMicros(mJ int64) int64 {
	price := a.model.EnergyPriceMicrosPerKWh
	if price <= 0 || mJ <= 0 {
		return 0
	}
	pue := a.model.PUEMicros
	if pue <= 0 {
		pue = 1_000_000
	}
	// mJ × price × pue / (3.6e9 mJ per kWh × 1e6 for the PUE's micros).
	num := new(big.Int).Mul(big.NewInt(mJ), big.NewInt(price))
	num.Mul(num, big.NewInt(pue))
	den := big.NewInt(3_600_000_000_000_000)
	num.Add(num, new(big.Int).Rsh(den, 1))
	return num.Quo(num, den).Int64()
}

// splitBorrowed marks what each ClusterQueue ran beyond its nominal quota
// in a flavor that hour as borrowed: when its rows hold U GPU-seconds of a
// flavor where its nominal quota is N GPUs, the fraction (U − 3600·N)/U of
// each of its rows moves to a twin row with Borrowed set. The hour is the
// grain: usage over quota in one half and under it in the other nets out.
func (a *Attributor) splitBorrowed(b *hourBuild) {
	groups := make(map[QuotaRef][]*ledger.Row)
	for _, r := range b.rows {
		if r.ClusterQueue == "" || r.Borrowed {
			continue
		}
		ref := QuotaRef{r.ClusterQueue, r.Flavor}
		groups[ref] = append(groups[ref], r)
	}
	refs := make([]QuotaRef, 0, len(groups))
	for ref := range groups {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool {
		return lessStrings([]string{refs[i].ClusterQueue, refs[i].Flavor}, []string{refs[j].ClusterQueue, refs[j].Flavor})
	})
	const scale = 1_000_000_000
	for _, ref := range refs {
		rs := groups[ref]
		sort.Slice(rs, func(i, j int) bool { return keyLess(&rs[i].Key, &rs[j].Key) })
		var used float64
		for _, r := range rs {
			used += r.GPUSeconds
		}
		nominal := float64(a.model.Quotas[ref]) / 1000 * 3600
		if used <= nominal || used == 0 {
			continue
		}
		f := (used - nominal) / used
		fw := int64(math.Round(f * scale))
		if fw == 0 {
			continue
		}
		w := []int64{scale - fw, fw}
		for _, r := range rs {
			k := r.Key
			k.Borrowed = true
			t := b.row(k)
			active := r.ActiveCostMicros()
			mv := func(v int64) (keep, moved int64) {
				b.split = splitLargestRemainder(v, w, b.split)
				return b.split[0], b.split[1]
			}
			ka, ma := mv(active)
			ki, mi := mv(r.IdleCostMicros)
			ku, mu := mv(r.UnallocatedCostMicros)
			r.IdleCostMicros, t.IdleCostMicros = ki, t.IdleCostMicros+mi
			r.UnallocatedCostMicros, t.UnallocatedCostMicros = ku, t.UnallocatedCostMicros+mu
			r.CostMicros, t.CostMicros = ka+ki+ku, t.CostMicros+ma+mi+mu
			ke, me := mv(r.EnergyCostMicros)
			r.EnergyCostMicros, t.EnergyCostMicros = ke, t.EnergyCostMicros+me
			if fw == scale {
				// All of it was borrowed: the row moves whole.
				t.GPUSeconds += r.GPUSeconds
				t.ActiveGPUSeconds += r.ActiveGPUSeconds
				t.EnergyJoules += r.EnergyJoules
				delete(b.rows, r.Key)
				continue
			}
			for _, fl := range []*[2]*float64{{&r.GPUSeconds, &t.GPUSeconds}, {&r.ActiveGPUSeconds, &t.ActiveGPUSeconds}, {&r.EnergyJoules, &t.EnergyJoules}} {
				moved := *fl[0] * f
				*fl[0] -= moved
				*fl[1] += moved
			}
		}
	}
}

// shareUnallocated applies the unallocated policy: each flavor's
// unallocated cost (and its energy cost) moves from the TeamUnallocated row
// to rows of the teams that pay for it, by nominal quota or by the hour's
// usage. The TeamUnallocated row keeps its GPU-seconds and energy; when no
// team qualifies, the cost stays with it.
func (a *Attributor) shareUnallocated(b *hourBuild) {
	if a.model.Unallocated == UnallocatedPlatform {
		return
	}
	type recipient struct {
		key ledger.Key
		w   int64
	}
	var unallocated []*ledger.Row
	for _, r := range b.rows {
		if r.Team == ledger.TeamUnallocated && (r.UnallocatedCostMicros > 0 || r.EnergyCostMicros > 0) {
			unallocated = append(unallocated, r)
		}
	}
	sort.Slice(unallocated, func(i, j int) bool { return keyLess(&unallocated[i].Key, &unallocated[j].Key) })
	for _, u := range unallocated {
		var recips []recipient
		switch a.model.Unallocated {
		case UnallocatedByQuota:
			for ref, q := range a.model.Quotas {
				if ref.Flavor != u.Flavor || q <= 0 {
					continue
				}
				team := a.model.ClusterQueueTeams[ref.ClusterQueue]
				if team == "" {
					team = ledger.TeamUnowned
				}
				recips = append(recips, recipient{ledger.Key{Hour: b.hour, Cluster: u.Cluster, Team: team, ClusterQueue: ref.ClusterQueue, Flavor: u.Flavor}, q})
			}
		case UnallocatedByUsage:
			byKey := make(map[ledger.Key]int64)
			for _, r := range b.rows {
				if r.Flavor != u.Flavor || r.Team == ledger.TeamUnallocated || r.Team == ledger.TeamUnowned || r.CostMicros <= 0 {
					continue
				}
				byKey[ledger.Key{Hour: b.hour, Cluster: u.Cluster, Team: r.Team, ClusterQueue: r.ClusterQueue, Flavor: u.Flavor}] += r.CostMicros
			}
			for k, w := range byKey {
				recips = append(recips, recipient{k, w})
			}
		}
		if len(recips) == 0 {
			continue
		}
		sort.Slice(recips, func(i, j int) bool { return keyLess(&recips[i].key, &recips[j].key) })
		ws := make([]int64, len(recips))
		for i, r := range recips {
			ws[i] = r.w
		}
		costs := splitLargestRemainder(u.UnallocatedCostMicros, ws, nil)
		ecosts := splitLargestRemainder(u.EnergyCostMicros, ws, nil)
		for i, rc := range recips {
			r := b.row(rc.key)
			r.CostMicros += costs[i]
			r.UnallocatedCostMicros += costs[i]
			r.EnergyCostMicros += ecosts[i]
		}
		u.CostMicros -= u.UnallocatedCostMicros
		u.UnallocatedCostMicros = 0
		u.EnergyCostMicros = 0
	}
}

// ownerOf names the workload a pod belongs to, as kube-state-metrics
// reported it; the pod itself when unknown.
func (a *Attributor) ownerOf(h holder) (kind, name string) {
	if st := a.pods[podKey{h.namespace, h.pod}]; st != nil && st.ownerName != "" {
		return st.ownerKind, st.ownerName
	}
	return "Pod", h.pod
}

// keyFor resolves a holder to its owner dimensions: the queue label on the
// DCGM series, else the one kube-state-metrics reported for the pod; the
// queue's ClusterQueue and its team; else the namespace's team; else
// TeamUnowned.
func (a *Attributor) keyFor(hour time.Time, flavor string, h holder) ledger.Key {
	k := ledger.Key{Hour: hour, Cluster: a.model.Cluster, Namespace: h.namespace, Flavor: flavor}
	q := h.queue
	if q == "" {
		if st := a.pods[podKey{h.namespace, h.pod}]; st != nil {
			q = st.queue
		}
	}
	if q != "" {
		k.LocalQueue = q
		k.ClusterQueue = a.model.LocalQueues[QueueRef{h.namespace, q}]
		if k.ClusterQueue != "" {
			k.Team = a.model.ClusterQueueTeams[k.ClusterQueue]
		}
	}
	if k.Team == "" {
		k.Team = a.model.NamespaceTeams[h.namespace]
	}
	if k.Team == "" {
		k.Team = ledger.TeamUnowned
	}
	return k
}

func holderLess(p, q holder) bool {
	return lessStrings([]string{p.namespace, p.pod, p.queue}, []string{q.namespace, q.pod, q.queue})
}

func lessStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// SortRows sorts rows by Key: hour, then cluster, team, namespace,
// LocalQueue, ClusterQueue, flavor and borrowed.
func SortRows(rows []ledger.Row) {
	sort.Slice(rows, func(i, j int) bool { return keyLess(&rows[i].Key, &rows[j].Key) })
}

func keyLess(a, b *ledger.Key) bool {
	if !a.Hour.Equal(b.Hour) {
		return a.Hour.Before(b.Hour)
	}
	for _, p := range [...][2]string{
		{a.Cluster, b.Cluster}, {a.Team, b.Team}, {a.Namespace, b.Namespace},
		{a.LocalQueue, b.LocalQueue}, {a.ClusterQueue, b.ClusterQueue}, {a.Flavor, b.Flavor},
	} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	return !a.Borrowed && b.Borrowed
}
