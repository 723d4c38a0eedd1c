package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// LineKind says what a Line is.
type LineKind string

const (
	// LineUsage is a GPU's hour held by one pod.
	LineUsage LineKind = "usage"
	// LineUnallocated is a GPU's hour, or the part of it, held by nobody.
	LineUnallocated LineKind = "unallocated"
	// LineUnallocatedShare is a team's share of a flavor's unallocated
	// cost under the configured unallocated policy (by quota or by usage).
	LineUnallocatedShare LineKind = "unallocated-share"
	// LineSharedOut takes from TeamUnallocated what the shares gave to the
	// teams (negative money), so that its lines sum to its rows.
	LineSharedOut LineKind = "shared-out"
)

// Line is the finest grain of the ledger: one GPU's hour for one holder
// (LineUsage), for nobody (LineUnallocated), or one team's share of a
// flavor's unallocated cost. Key is the row the line is part of (Borrowed
// is always false: the borrowed split is made on rows, within a team). A
// team's lines of an hour sum to its rows of that hour, every money
// field to the micro-unit (CheckLines): they explain a bill line.
type Line struct {
	Key
	Kind LineKind
	// Node and GPU (its index on the node) name the device; MIG lists its
	// MIG profiles, "+"-joined, when it is partitioned. Empty for shares.
	Node, GPU, MIG string
	// Pod holds the GPU; WorkloadKind and Workload own the pod (Kind "Pod"
	// when no owner is known). Empty but for LineUsage.
	Pod, WorkloadKind, Workload string
	// RateMicrosPerHour is the whole GPU's hourly price; RateSource says
	// where it comes from (config.PriceSource: the price book entry, the
	// on-prem amortisation, or a configured price).
	RateMicrosPerHour int64
	RateSource        string
	// GPU-seconds held by the pod (all of the GPU's for LineUnallocated),
	// those DCGM measured busy, and those with no measurement.
	GPUSeconds, ActiveGPUSeconds, UnmeasuredGPUSeconds float64
	// The money, as on Row.
	CostMicros, IdleCostMicros, UnmeasuredCostMicros, UnallocatedCostMicros, EnergyCostMicros int64
}

// LineStore stores lines. A Store that implements it keeps the lines of
// the hours it is written; reports and the explain API read them.
type LineStore interface {
	// WriteLineHours atomically replaces the lines of every (cluster,
	// hour) that appears in lines.
	WriteLineHours(ctx context.Context, lines []Line) error
	// Lines returns the lines of [q.From, q.To) of q.Cluster and q.Team
	// (each: all when empty), summed over the range per line identity
	// (every field but the hour and the figures), ordered by cost, largest
	// first, then by identity. Each line's Hour is q.From.
	Lines(ctx context.Context, q LineQuery) ([]Line, error)
}

// LineQuery selects lines.
type LineQuery struct {
	From, To time.Time
	Cluster  string
	Team     string
	// Namespace and Workload narrow to one workload's lines (Workload is
	// its name; both empty: every line).
	Namespace, Workload string
}

// lineIdentity is a line but for its hour and figures.
type lineIdentity struct {
	Cluster, Team, Namespace, LocalQueue, ClusterQueue, Flavor string
	Kind                                                       LineKind
	Node, GPU, MIG, Pod, WorkloadKind, Workload                string
	Rate                                                       int64
	RateSource                                                 string
}

func identityOf(l *Line) lineIdentity {
	return lineIdentity{l.Cluster, l.Team, l.Namespace, l.LocalQueue, l.ClusterQueue, l.Flavor, l.Kind,
		l.Node, l.GPU, l.MIG, l.Pod, l.WorkloadKind, l.Workload, l.RateMicrosPerHour, l.RateSource}
}

// SumLines sums lines per identity over their hours, each with Hour from,
// ordered as LineStore.Lines orders them: what a store that keeps lines
// as they were written answers.
func SumLines(lines []Line, from time.Time) []Line {
	idx := map[lineIdentity]int{}
	var out []Line
	for i := range lines {
		l := &lines[i]
		id := identityOf(l)
		j, ok := idx[id]
		if !ok {
			j = len(out)
			idx[id] = j
			s := *l
			s.Hour = from
			s.GPUSeconds, s.ActiveGPUSeconds, s.UnmeasuredGPUSeconds = 0, 0, 0
			s.CostMicros, s.IdleCostMicros, s.UnmeasuredCostMicros, s.UnallocatedCostMicros, s.EnergyCostMicros = 0, 0, 0, 0, 0
			out = append(out, s)
		}
		out[j].AddFigures(l)
	}
	SortLines(out)
	return out
}

// Device names the line's GPU: node/index, with its MIG profiles; empty
// for a share.
func (l *Line) Device() string {
	if l.Node == "" {
		return ""
	}
	d := l.Node + "/" + l.GPU
	if l.MIG != "" {
		d += " (MIG " + l.MIG + ")"
	}
	return d
}

// Holder names who held the GPU: namespace/pod (kind workload); for a
// share, the ClusterQueue it came by.
func (l *Line) Holder() string {
	switch {
	case l.Pod != "":
		return fmt.Sprintf("%s/%s (%s %s)", l.Namespace, l.Pod, l.WorkloadKind, l.Workload)
	case l.ClusterQueue != "":
		return "ClusterQueue " + l.ClusterQueue
	}
	return ""
}

// AddFigures adds o's GPU-seconds and money to l's.
func (l *Line) AddFigures(o *Line) {
	l.GPUSeconds += o.GPUSeconds
	l.ActiveGPUSeconds += o.ActiveGPUSeconds
	l.UnmeasuredGPUSeconds += o.UnmeasuredGPUSeconds
	l.CostMicros += o.CostMicros
	l.IdleCostMicros += o.IdleCostMicros
	l.UnmeasuredCostMicros += o.UnmeasuredCostMicros
	l.UnallocatedCostMicros += o.UnallocatedCostMicros
	l.EnergyCostMicros += o.EnergyCostMicros
}

// SortLines orders lines by cost, largest first, then by identity.
func SortLines(lines []Line) {
	slices.SortFunc(lines, func(a, b Line) int {
		if c := cmp.Compare(b.CostMicros, a.CostMicros); c != 0 {
			return c
		}
		x, y := identityOf(&a), identityOf(&b)
		for _, p := range [][2]string{{x.Cluster, y.Cluster}, {x.Team, y.Team}, {x.Namespace, y.Namespace}, {x.LocalQueue, y.LocalQueue},
			{x.ClusterQueue, y.ClusterQueue}, {x.Flavor, y.Flavor}, {string(x.Kind), string(y.Kind)}, {x.Node, y.Node}, {x.GPU, y.GPU},
			{x.MIG, y.MIG}, {x.Pod, y.Pod}, {x.WorkloadKind, y.WorkloadKind}, {x.Workload, y.Workload}} {
			if c := cmp.Compare(p[0], p[1]); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(x.Rate, y.Rate), cmp.Compare(x.RateSource, y.RateSource))
	})
}

// CheckLines says whether lines explain rows: per cluster, hour and team,
// every money field of the lines sums to the rows' to the micro-unit. It
// names the first team-hour that does not.
func CheckLines(rows []Row, lines []Line) error {
	type teamHour struct {
		cluster, team string
		hour          int64
	}
	type sums struct{ cost, idle, unmeasured, unallocated, energy int64 }
	got, want := map[teamHour]*sums{}, map[teamHour]*sums{}
	add := func(m map[teamHour]*sums, k teamHour, cost, idle, unmeasured, unallocated, energy int64) {
		s := m[k]
		if s == nil {
			s = &sums{}
			m[k] = s
		}
		s.cost += cost
		s.idle += idle
		s.unmeasured += unmeasured
		s.unallocated += unallocated
		s.energy += energy
	}
	for i := range rows {
		r := &rows[i]
		add(want, teamHour{r.Cluster, r.Team, r.Hour.Unix()}, r.CostMicros, r.IdleCostMicros, r.UnmeasuredCostMicros, r.UnallocatedCostMicros, r.EnergyCostMicros)
	}
	for i := range lines {
		l := &lines[i]
		add(got, teamHour{l.Cluster, l.Team, l.Hour.Unix()}, l.CostMicros, l.IdleCostMicros, l.UnmeasuredCostMicros, l.UnallocatedCostMicros, l.EnergyCostMicros)
	}
	keys := make([]teamHour, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if want[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b teamHour) int {
		return cmp.Or(cmp.Compare(a.hour, b.hour), cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.team, b.team))
	})
	for _, k := range keys {
		w, g := want[k], got[k]
		if w == nil {
			w = &sums{}
		}
		if g == nil {
			g = &sums{}
		}
		if *w != *g {
			return fmt.Errorf("cluster %q team %q hour %s: lines sum to %+v micros, rows to %+v", k.cluster, k.team,
				time.Unix(k.hour, 0).UTC().Format(time.RFC3339), *g, *w)
		}
	}
	return nil
}
