package attribution

import (
	"cmp"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Lines returns the lines of the hours emitted since the last call, when
// Options.Lines is set, and forgets them: per hour and team they sum to
// the rows Emit and Ready returned for it (ledger.CheckLines).
func (a *Attributor) Lines() []ledger.Line {
	ls := a.outLines
	a.outLines = nil
	return ls
}

// Emit closes every hour that ends at or before untilMs (rounded down to an
// hour), whatever the data, and returns the rows and workload rows of every
// hour closed since the last Emit or Ready. An observation still open at a
// closed hour's end counts at least one scrape interval into it and stays
// open for the next hour. For each hour the rows sum exactly to the
// inventory's hourly cost (CostMicros) and to the cost of the energy
// measured (EnergyCostMicros). Samples for closed hours are rejected as
// late afterwards. Rows come sorted by Key, workload rows by hour, team,
// namespace, kind and name.
func (a *Attributor) Emit(untilMs int64) ([]ledger.Row, []ledger.WorkloadRow) {
	until := floorHour(untilMs)
	if a.startMs != 0 {
		for a.emittedUntilMs < until {
			a.emitHour(a.emittedUntilMs, true)
		}
	}
	return a.Ready()
}

// Ready returns the rows of the hours the data has closed since the last
// Emit or Ready (see Add), and forgets them.
func (a *Attributor) Ready() ([]ledger.Row, []ledger.WorkloadRow) {
	rows, wls := a.outRows, a.outWls
	a.outRows, a.outWls = nil, nil
	return rows, wls
}

// emitHour closes hour h. forced says the data may not be complete: open
// observations are booked up to the hour's end and stay open.
func (a *Attributor) emitHour(h int64, forced bool) {
	end := h + hourMs
	for _, in := range a.insts {
		if in.pending && in.t < end {
			if forced {
				a.bookPartial(in, end)
			} else {
				a.finalize(in, a.opts.ScrapeIntervalMs)
			}
		}
	}
	for k, st := range a.pods {
		if st.obs.pending && st.obs.t < end {
			if forced {
				a.bookPodPartial(k, st, end)
			} else {
				a.finalizePod(k, st, st.obs.interval(a))
			}
		}
	}
	a.outRows, a.outWls = a.appendHour(a.outRows, a.outWls, h)
	a.appendQueueHours(h, forced)
	delete(a.hours, h)
	a.emittedUntilMs = end
	a.prune()
}

type part struct {
	h                           holder
	heldW, activeW, unmeasuredW int64
	energyMJ                    int64
}

type workloadKey struct {
	team, namespace, kind, name string
}

// hourBuild collects one hour's rows.
type hourBuild struct {
	hour time.Time
	rows map[ledger.Key]*ledger.Row
	// normW is each row's held time in whole-GPU units of
	// QuotaUnitsPerGPU × ShareUnits × ms, exact, for the quota arithmetic.
	normW map[ledger.Key]int64
	wls   map[workloadKey]*ledger.WorkloadRow
	split []int64
	// lines are the hour's lines, the i-th energy weight's the i-th line.
	lines []ledger.Line
}

func (b *hourBuild) row(k ledger.Key) *ledger.Row {
	r := b.rows[k]
	if r == nil {
		r = &ledger.Row{Key: k}
		b.rows[k] = r
	}
	return r
}

// addPart merges a holder's usage into a unit's parts.
func addPart(parts []part, h holder, heldW, activeW, unmeasuredW, energyMJ int64) []part {
	for i := range parts {
		if parts[i].h == h {
			p := &parts[i]
			p.heldW += heldW
			p.activeW += activeW
			p.unmeasuredW += unmeasuredW
			p.energyMJ += energyMJ
			return parts
		}
	}
	return append(parts, part{h: h, heldW: heldW, activeW: activeW, unmeasuredW: unmeasuredW, energyMJ: energyMJ})
}

func (a *Attributor) appendHour(rows []ledger.Row, wls []ledger.WorkloadRow, hour int64) ([]ledger.Row, []ledger.WorkloadRow) {
	hs := a.hours[hour]
	if hs == nil {
		hs = &hourState{inst: make([]instHour, len(a.insts))}
	}
	// Pod facts are read as they stood once the hour's data was complete.
	asOf := hour + hourMs + a.opts.StalenessMs
	b := &hourBuild{hour: time.UnixMilli(hour).UTC(), rows: make(map[ledger.Key]*ledger.Row),
		normW: make(map[ledger.Key]int64), wls: make(map[workloadKey]*ledger.WorkloadRow)}

	unitParts := make([][]part, len(a.units))
	nobodyMJ := make([]int64, len(a.units))
	f := newFill(a, hs)
	for i, in := range a.insts {
		ih := &hs.inst[i]
		u := in.u.idx
		nobodyMJ[u] += ih.nobodyMJ
		for _, us := range ih.parts {
			if a.notHolder(us.h, asOf) {
				// An exporter's own pod, or one Kubernetes says requested
				// no GPU: the device was free.
				nobodyMJ[u] += us.energyMJ
				continue
			}
			unitParts[u] = addPart(unitParts[u], us.h, us.heldW, us.activeW, us.unmeasuredW, us.energyMJ)
			f.held(in, us.h, us.heldW)
		}
	}
	for _, fl := range f.place() {
		unitParts[fl.in.u.idx] = addPart(unitParts[fl.in.u.idx], fl.h, fl.w, 0, fl.w, 0)
	}

	var weights, costs []int64
	// The hour's energy is priced once for the cluster, then split over
	// the rows it was booked to, so the rows sum to the price of the
	// whole.
	var erows []*ledger.Row
	var eweights []int64
	var totalMJ int64
	for i := range a.units {
		u := &a.units[i]
		parts := unitParts[i]
		sort.Slice(parts, func(x, y int) bool { return holderLess(parts[x].h, parts[y].h) })

		capacity := u.slices * hourMs * ShareUnits
		unalloc := capacity
		weights = append(weights[:0], 0)
		for _, p := range parts {
			unalloc -= p.heldW
			weights = append(weights, p.activeW, p.heldW-p.activeW-p.unmeasuredW, p.unmeasuredW)
		}
		weights[0] = unalloc
		costs = ledger.SplitLargestRemainder(u.gpu.RateMicrosPerHour, weights, costs)

		den := float64(u.slices*ShareUnits) * 1000
		if unalloc > 0 || nobodyMJ[i] > 0 {
			r := b.row(ledger.Key{Hour: b.hour, Cluster: a.model.Cluster, Team: ledger.TeamUnallocated, Flavor: u.gpu.Flavor})
			r.GPUSeconds += float64(unalloc) / den
			r.CostMicros += costs[0]
			r.UnallocatedCostMicros += costs[0]
			r.EnergyJoules += float64(nobodyMJ[i]) / 1000
			erows, eweights, totalMJ = append(erows, r), append(eweights, nobodyMJ[i]), totalMJ+nobodyMJ[i]
			b.lines = append(b.lines, ledger.Line{Key: r.Key, Kind: ledger.LineUnallocated, Node: u.gpu.Node, GPU: u.gpu.Index,
				MIG: strings.Join(u.gpu.MIG, "+"), RateMicrosPerHour: u.gpu.RateMicrosPerHour, RateSource: u.gpu.RateSource, GPUSeconds: float64(unalloc) / den,
				CostMicros: costs[0], UnallocatedCostMicros: costs[0]})
		}
		norm := QuotaUnitsPerGPU / u.slices
		for j, p := range parts {
			k := a.keyFor(b.hour, u.gpu.Flavor, p.h, asOf)
			active, idle, unmeasured := costs[1+3*j], costs[2+3*j], costs[3+3*j]
			r := b.row(k)
			r.GPUSeconds += float64(p.heldW) / den
			r.ActiveGPUSeconds += float64(p.activeW) / den
			r.UnmeasuredGPUSeconds += float64(p.unmeasuredW) / den
			r.CostMicros += active + idle + unmeasured
			r.IdleCostMicros += idle
			r.UnmeasuredCostMicros += unmeasured
			r.EnergyJoules += float64(p.energyMJ) / 1000
			b.normW[k] += p.heldW * norm
			erows, eweights, totalMJ = append(erows, r), append(eweights, p.energyMJ), totalMJ+p.energyMJ

			kind, name := a.ownerOf(p.h, asOf)
			b.lines = append(b.lines, ledger.Line{Key: k, Kind: ledger.LineUsage, Node: u.gpu.Node, GPU: u.gpu.Index,
				MIG: strings.Join(u.gpu.MIG, "+"), Pod: p.h.pod, WorkloadKind: kind, Workload: name, RateMicrosPerHour: u.gpu.RateMicrosPerHour, RateSource: u.gpu.RateSource,
				GPUSeconds: float64(p.heldW) / den, ActiveGPUSeconds: float64(p.activeW) / den, UnmeasuredGPUSeconds: float64(p.unmeasuredW) / den,
				CostMicros: active + idle + unmeasured, IdleCostMicros: idle, UnmeasuredCostMicros: unmeasured})
			wk := workloadKey{k.Team, p.h.namespace, kind, name}
			w := b.wls[wk]
			if w == nil {
				w = &ledger.WorkloadRow{Hour: b.hour, Cluster: a.model.Cluster, Team: k.Team, Namespace: p.h.namespace, Kind: kind, Name: name}
				b.wls[wk] = w
			}
			w.GPUSeconds += float64(p.heldW) / den
			w.ActiveGPUSeconds += float64(p.activeW) / den
			w.UnmeasuredGPUSeconds += float64(p.unmeasuredW) / den
			w.CostMicros += active + idle + unmeasured
			w.IdleCostMicros += idle
			w.UnmeasuredCostMicros += unmeasured
		}
	}
	for i, c := range ledger.SplitLargestRemainder(a.energyCostMicros(totalMJ), eweights, nil) {
		erows[i].EnergyCostMicros += c
		b.lines[i].EnergyCostMicros += c
	}
	a.splitBorrowed(b)
	a.shareUnallocated(b)
	if a.opts.Lines {
		a.outLines = append(a.outLines, b.lines...)
	}

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
// in a flavor that hour as borrowed: when its rows hold U of a flavor where
// its nominal quota is N (both exact, in QuotaUnitsPerGPU × ShareUnits ×
// ms), the fraction (U − N)/U of each of its rows moves to a twin row with
// Borrowed set; money by largest remainder over the weights N and U − N.
// The hour is the grain: usage over quota in one half and under it in the
// other nets out.
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
	for _, ref := range refs {
		rs := groups[ref]
		sort.Slice(rs, func(i, j int) bool { return keyLess(&rs[i].Key, &rs[j].Key) })
		var used int64
		for _, r := range rs {
			used += b.normW[r.Key]
		}
		nominal := a.model.Quotas[ref] * ShareUnits * hourMs
		if used <= nominal || used == 0 {
			continue
		}
		w := []int64{nominal, used - nominal}
		f := float64(used-nominal) / float64(used)
		for _, r := range rs {
			k := r.Key
			k.Borrowed = true
			t := b.row(k)
			mv := func(v *int64, dst *int64) {
				b.split = ledger.SplitLargestRemainder(*v, w, b.split)
				*v = b.split[0]
				*dst += b.split[1]
			}
			active, tActive := r.ActiveCostMicros(), t.ActiveCostMicros()
			mv(&active, &tActive)
			mv(&r.IdleCostMicros, &t.IdleCostMicros)
			mv(&r.UnmeasuredCostMicros, &t.UnmeasuredCostMicros)
			mv(&r.UnallocatedCostMicros, &t.UnallocatedCostMicros)
			r.CostMicros = active + r.IdleCostMicros + r.UnmeasuredCostMicros + r.UnallocatedCostMicros
			t.CostMicros = tActive + t.IdleCostMicros + t.UnmeasuredCostMicros + t.UnallocatedCostMicros
			mv(&r.EnergyCostMicros, &t.EnergyCostMicros)
			if nominal == 0 {
				// All of it was borrowed: the row moves whole.
				t.GPUSeconds += r.GPUSeconds
				t.ActiveGPUSeconds += r.ActiveGPUSeconds
				t.UnmeasuredGPUSeconds += r.UnmeasuredGPUSeconds
				t.EnergyJoules += r.EnergyJoules
				delete(b.rows, r.Key)
				continue
			}
			for _, fl := range []*[2]*float64{{&r.GPUSeconds, &t.GPUSeconds}, {&r.ActiveGPUSeconds, &t.ActiveGPUSeconds},
				{&r.UnmeasuredGPUSeconds, &t.UnmeasuredGPUSeconds}, {&r.EnergyJoules, &t.EnergyJoules}} {
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
		costs := ledger.SplitLargestRemainder(u.UnallocatedCostMicros, ws, nil)
		ecosts := ledger.SplitLargestRemainder(u.EnergyCostMicros, ws, nil)
		for i, rc := range recips {
			r := b.row(rc.key)
			r.CostMicros += costs[i]
			r.UnallocatedCostMicros += costs[i]
			r.EnergyCostMicros += ecosts[i]
			b.lines = append(b.lines, ledger.Line{Key: rc.key, Kind: ledger.LineUnallocatedShare,
				CostMicros: costs[i], UnallocatedCostMicros: costs[i], EnergyCostMicros: ecosts[i]})
		}
		b.lines = append(b.lines, ledger.Line{Key: u.Key, Kind: ledger.LineSharedOut,
			CostMicros: -u.UnallocatedCostMicros, UnallocatedCostMicros: -u.UnallocatedCostMicros, EnergyCostMicros: -u.EnergyCostMicros})
		u.CostMicros -= u.UnallocatedCostMicros
		u.UnallocatedCostMicros = 0
		u.EnergyCostMicros = 0
	}
}

// ownerOf names the workload a pod belongs to, as kube-state-metrics
// reported it by ms; the pod itself when unknown.
func (a *Attributor) ownerOf(h holder, ms int64) (kind, name string) {
	if st := a.pods[podKey{h.namespace, h.pod}]; st != nil {
		if o, ok, _ := st.owner.at(ms); ok && o.name != "" {
			return o.kind, o.name
		}
	}
	return "Pod", h.pod
}

// keyFor resolves a holder to its owner dimensions: the queue label on the
// DCGM series, else the one kube-state-metrics reported for the pod by ms;
// the queue's ClusterQueue and its team; else the namespace's team; else
// TeamUnowned.
func (a *Attributor) keyFor(hour time.Time, flavor string, h holder, ms int64) ledger.Key {
	k := ledger.Key{Hour: hour, Cluster: a.model.Cluster, Namespace: h.namespace, Flavor: flavor}
	q := h.queue
	if q == "" {
		if st := a.pods[podKey{h.namespace, h.pod}]; st != nil {
			q, _, _ = st.queue.at(ms)
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
	if c := cmp.Or(cmp.Compare(p.namespace, q.namespace), cmp.Compare(p.pod, q.pod), cmp.Compare(p.queue, q.queue)); c != 0 {
		return c < 0
	}
	if p.dra != q.dra {
		return !p.dra
	}
	return p.job < q.job
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
