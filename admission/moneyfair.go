package admission

import (
	"math"
	"slices"
)

// MoneyTargets keeps queues to a money-fair split of the flavors
// (Options.Targets). Kueue assigns a workload the first flavor of its
// queue that fits; counting money, that lets a team that may run anywhere
// take the flavor another team cannot do without (research on the A100s
// vision's models need, while H100s it could use are busy): the order by
// share then cannot make up for it, because the team that lost out has no
// other flavor to spend on. With targets, a queue takes a flavor beyond
// its share of it only when no backlogged queue under its share of that
// flavor could use it (work-conserving for flavors no one else wants).
type MoneyTargets struct {
	// Target is each backlogged queue's money of each flavor per unit of
	// time (MoneyFairTargets; the unit its capacity was given in).
	Target map[string]map[string]float64
	// Flavors are the flavors each backlogged queue's work may use.
	Flavors map[string][]string
	// Rate is what one unit of a flavor's resource costs per second.
	Rate map[FlavorResource]float64
}

// NewMoneyTargets computes the targets of the backlogged queues
// (MoneyFairTargets) for a cluster whose flavors offer units of
// resources at rates.
func NewMoneyTargets(demands []MoneyDemand, units map[FlavorResource]int64, rate map[FlavorResource]float64) *MoneyTargets {
	capacity := map[string]float64{}
	for fr, n := range units {
		capacity[fr.Flavor] += float64(n) * rate[fr]
	}
	t := &MoneyTargets{Target: MoneyFairTargets(demands, capacity), Flavors: map[string][]string{}, Rate: rate}
	for _, d := range demands {
		t.Flavors[d.Queue] = d.Flavors
	}
	return t
}

// Allows says whether queue may take want more of flavor now (money per
// unit of time): holding it brings the queue nearer its target of the
// flavor than it is (it holds less than its target less half of want), or
// no other backlogged queue that could use the flavor holds less than its
// own target.
func (t *MoneyTargets) Allows(s *Snapshot, queue, flavor string, want float64) bool {
	return t.AllowsHeld(queue, flavor, want, func(q, f string) float64 {
		var held float64
		for fr, u := range s.Usage[q] {
			if fr.Flavor == f {
				held += float64(u) * t.Rate[fr]
			}
		}
		return held
	})
}

// AllowsHeld is Allows with what each queue holds of a flavor, in the
// targets' money per unit of time, given by held.
func (t *MoneyTargets) AllowsHeld(queue, flavor string, want float64, held func(queue, flavor string) float64) bool {
	if held(queue, flavor)+want/2 < t.Target[queue][flavor] {
		return true
	}
	_, other := t.Under(queue, flavor, held)
	return !other
}

// Under returns a backlogged queue other than queue that could use
// flavor and holds less of it than its target, if there is one.
func (t *MoneyTargets) Under(queue, flavor string, held func(queue, flavor string) float64) (string, bool) {
	names := make([]string, 0, len(t.Flavors))
	for q := range t.Flavors {
		names = append(names, q)
	}
	slices.Sort(names)
	for _, q := range names {
		if q != queue && slices.Contains(t.Flavors[q], flavor) && held(q, flavor) < t.Target[q][flavor] {
			return q, true
		}
	}
	return "", false
}

// MoneyDemand is one backlogged queue of a money-fair allocation: its
// weight (what its entitlement is worth) and the flavors its pending
// work may run on.
type MoneyDemand struct {
	Queue   string
	Weight  float64
	Flavors []string
}

// MoneyFairTargets is the weighted max-min fair allocation of money among
// backlogged queues that may each run only on some flavors: every queue's
// spend over its weight is raised together until a set of flavors is full
// for the queues that can use only them, those queues are fixed, and the
// rest go on rising. capacity is each flavor's money per unit of time (its
// units × its price). It returns the money of each flavor each queue gets
// at the fair levels: one feasible split of the flavors among the queues
// (a max flow), which a policy follows so that a queue with other choices
// leaves a flavor to a queue that has none.
//
// It is the fluid allocation, without jobs' sizes: a target, not a plan.
func MoneyFairTargets(demands []MoneyDemand, capacity map[string]float64) map[string]map[string]float64 {
	flavors := make([]string, 0, len(capacity))
	for f := range capacity {
		flavors = append(flavors, f)
	}
	slices.Sort(flavors)
	n := len(demands)
	level := make([]float64, n) // fixed levels; NaN while rising
	for i := range level {
		level[i] = math.NaN()
	}
	var total float64
	for _, c := range capacity {
		total += c
	}
	minW := math.Inf(1)
	for _, d := range demands {
		minW = min(minW, d.Weight)
	}
	if n == 0 || total <= 0 || minW <= 0 {
		return nil
	}
	net := newMoneyNet(demands, flavors, capacity)
	// feasible says whether every queue can spend its level × its weight.
	at := make([]float64, n)
	feasible := func() bool {
		var want float64
		for i, d := range demands {
			net.source[i] = at[i] * d.Weight
			want += at[i] * d.Weight
		}
		return net.maxFlow() >= want*(1-1e-9)
	}
	set := func(lambda float64) {
		for i := range at {
			at[i] = level[i]
			if math.IsNaN(level[i]) {
				at[i] = lambda
			}
		}
	}
	for rising := n; rising > 0; {
		// The highest common level the rising queues reach.
		lo, hi := 0.0, total/minW
		for range 50 {
			mid := (lo + hi) / 2
			if set(mid); feasible() {
				lo = mid
			} else {
				hi = mid
			}
		}
		// Fix the rising queues that cannot go higher while the others
		// stay at that level.
		var fix []int
		for i := range demands {
			if !math.IsNaN(level[i]) {
				continue
			}
			set(lo)
			at[i] = lo*(1+1e-6) + 1e-12
			if !feasible() {
				fix = append(fix, i)
			}
		}
		if len(fix) == 0 { // rounding: fix them all
			for i := range level {
				if math.IsNaN(level[i]) {
					fix = append(fix, i)
				}
			}
		}
		for _, i := range fix {
			level[i] = lo
		}
		rising -= len(fix)
	}
	set(0)
	feasible()
	out := make(map[string]map[string]float64, n)
	for i, d := range demands {
		out[d.Queue] = map[string]float64{}
		for k, f := range flavors {
			// Below a billionth of the cluster is the bisection's
			// rounding, not a share.
			if v := net.edge[i][k]; v > total*1e-9 {
				out[d.Queue][f] = v
			}
		}
	}
	return out
}

// moneyNet is the flow network source → queue → flavor → sink, small
// enough to solve by augmenting paths (Edmonds-Karp).
type moneyNet struct {
	source  []float64   // source → queue capacities
	allowed [][]bool    // queue → flavor
	sink    []float64   // flavor → sink capacities
	edge    [][]float64 // queue → flavor flow of the last maxFlow
}

func newMoneyNet(demands []MoneyDemand, flavors []string, capacity map[string]float64) *moneyNet {
	m := &moneyNet{source: make([]float64, len(demands)), sink: make([]float64, len(flavors))}
	for k, f := range flavors {
		m.sink[k] = capacity[f]
	}
	for _, d := range demands {
		row := make([]bool, len(flavors))
		for k, f := range flavors {
			row[k] = slices.Contains(d.Flavors, f)
		}
		m.allowed = append(m.allowed, row)
		m.edge = append(m.edge, make([]float64, len(flavors)))
	}
	return m
}

// maxFlow computes the maximum flow, leaving the queue → flavor flows in
// edge.
func (m *moneyNet) maxFlow() float64 {
	nq, nf := len(m.source), len(m.sink)
	fs := make([]float64, nq) // source → queue flow
	ft := make([]float64, nf) // flavor → sink flow
	for i := range m.edge {
		clear(m.edge[i])
	}
	// Nodes: 0 source, 1..nq queues, nq+1..nq+nf flavors, nq+nf+1 sink.
	const eps = 1e-12
	var total float64
	prev := make([]int, nq+nf+2)
	for {
		for i := range prev {
			prev[i] = -2
		}
		prev[0] = -1
		queue := []int{0}
		sink := nq + nf + 1
		for len(queue) > 0 && prev[sink] == -2 {
			u := queue[0]
			queue = queue[1:]
			switch {
			case u == 0:
				for i := range nq {
					if prev[1+i] == -2 && m.source[i]-fs[i] > eps {
						prev[1+i] = 0
						queue = append(queue, 1+i)
					}
				}
			case u <= nq:
				i := u - 1
				for k := range nf {
					if prev[nq+1+k] == -2 && m.allowed[i][k] {
						prev[nq+1+k] = u
						queue = append(queue, nq+1+k)
					}
				}
			default:
				k := u - nq - 1
				if prev[sink] == -2 && m.sink[k]-ft[k] > eps {
					prev[sink] = u
					queue = append(queue, sink)
				}
				for i := range nq { // residual back along a used edge
					if prev[1+i] == -2 && m.edge[i][k] > eps {
						prev[1+i] = u
						queue = append(queue, 1+i)
					}
				}
			}
		}
		if prev[sink] == -2 {
			return total
		}
		// Bottleneck.
		b := math.Inf(1)
		for v := sink; v != 0; v = prev[v] {
			u := prev[v]
			switch {
			case u == 0:
				b = min(b, m.source[v-1]-fs[v-1])
			case v == sink:
				b = min(b, m.sink[u-nq-1]-ft[u-nq-1])
			case u <= nq: // queue → flavor: unbounded
			default: // flavor → queue: undo
				b = min(b, m.edge[v-1][u-nq-1])
			}
		}
		for v := sink; v != 0; v = prev[v] {
			u := prev[v]
			switch {
			case u == 0:
				fs[v-1] += b
			case v == sink:
				ft[u-nq-1] += b
			case u <= nq:
				m.edge[u-1][v-nq-1] += b
			default:
				m.edge[v-1][u-nq-1] -= b
			}
		}
		total += b
	}
}
