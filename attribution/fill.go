package attribution

import (
	"cmp"
	"slices"
)

// fill places what kube-state-metrics allocated but DCGM did not show: for
// each running pod, node and request kind, the hour's allocation (ms ×
// request) less what DCGM showed the pod holding on the node's devices of
// that kind is placed on those devices where nobody is shown holding them,
// first where no telemetry covered the device at all, then where DCGM saw
// it free (a device plugin that lost track of its pods). The pod's devices
// of the hour come first, then the node's in order. Placed time is
// unmeasured: no telemetry says how busy it was.
type fill struct {
	a     *Attributor
	hs    *hourState
	heldW []int64 // by instance: weight held by holders
	byPod map[podKey][]instWeight
	// usedUncovered and usedFree are, by instance, the weight placed so
	// far on time no telemetry covered and on time DCGM saw free.
	usedUncovered, usedFree []int64
}

type instWeight struct {
	in *instance
	w  int64
}

// placed is a fill's result: w of device in to holder h.
type placed struct {
	in *instance
	h  holder
	w  int64
}

func newFill(a *Attributor, hs *hourState) *fill {
	return &fill{a: a, hs: hs, heldW: make([]int64, len(a.insts)),
		usedUncovered: make([]int64, len(a.insts)), usedFree: make([]int64, len(a.insts)), byPod: make(map[podKey][]instWeight)}
}

// held records that DCGM showed h holding w of device in.
func (f *fill) held(in *instance, h holder, w int64) {
	f.heldW[in.idx] += w
	if len(f.hs.alloc) == 0 {
		return
	}
	k := podKey{h.namespace, h.pod}
	f.byPod[k] = append(f.byPod[k], instWeight{in, w})
}

// amount converts a weight of device in to request units × ms: one whole
// device (or MIG instance) for 1 ms is 1000; on a GPU shared as R
// replicas, one replica for 1 ms is 1000.
func amount(in *instance, w int64) int64 {
	if r := in.u.replicas; r > 1 {
		return mulDiv(w, r*1000, ShareUnits)
	}
	return mulDiv(w, 1000, in.size*ShareUnits)
}

// weight is amount's inverse, rounded down.
func weight(in *instance, amt int64) int64 {
	if r := in.u.replicas; r > 1 {
		return mulDiv(amt, ShareUnits, r*1000)
	}
	return mulDiv(amt, in.size*ShareUnits, 1000)
}

// place returns the hour's unmeasured allocations, in a stable order.
func (f *fill) place() []placed {
	if len(f.hs.alloc) == 0 {
		return nil
	}
	keys := make([]allocKey, 0, len(f.hs.alloc))
	for k := range f.hs.alloc {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y allocKey) int {
		return cmp.Or(cmp.Compare(x.node, y.node), cmp.Compare(x.namespace, y.namespace), cmp.Compare(x.pod, y.pod), cmp.Compare(x.kind, y.kind))
	})
	var out []placed
	var order []*instance
	for _, k := range keys {
		n := f.a.nodes[k.node]
		pool := n.pools[k.kind]
		demand := f.hs.alloc[k]
		mine := f.byPod[podKey{k.namespace, k.pod}]
		order = order[:0]
		for _, iw := range mine {
			if slices.Contains(pool, iw.in) {
				demand -= amount(iw.in, iw.w)
				if !slices.Contains(order, iw.in) {
					order = append(order, iw.in)
				}
			}
		}
		if demand <= 0 {
			continue
		}
		slices.SortFunc(order, func(x, y *instance) int { return cmp.Compare(x.idx, y.idx) })
		for _, in := range pool {
			if !slices.Contains(order, in) {
				order = append(order, in)
			}
		}
		h := holder{namespace: k.namespace, pod: k.pod}
		// First time no telemetry covered, then time DCGM saw free.
		for pass := 0; pass < 2 && demand > 0; pass++ {
			for _, in := range order {
				if demand <= 0 {
					break
				}
				full := in.size * ShareUnits
				ih := &f.hs.inst[in.idx]
				used := &f.usedUncovered[in.idx]
				room := (hourMs-ih.coveredMs)*full - *used
				if pass == 1 {
					used = &f.usedFree[in.idx]
					room = ih.coveredMs*full - f.heldW[in.idx] - *used
				}
				if room <= 0 {
					continue
				}
				take, w := amount(in, room), room
				if take > demand {
					take, w = demand, weight(in, demand)
				}
				if w <= 0 {
					continue
				}
				demand -= take
				*used += w
				out = append(out, placed{in, h, w})
			}
		}
		if demand > 0 {
			f.a.stats.UnplacedMs += demand / 1000
		}
	}
	return out
}
