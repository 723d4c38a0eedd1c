package reports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// RestatementGroup is a run of consecutive hours of one cluster and team
// that one rewrite (same At, source, who and why) changed.
type RestatementGroup struct {
	Cluster, Team      string
	From, To           time.Time
	At                 time.Time
	Source, By, Reason string
	BilledIn           time.Time
	BeforeMicros       int64
	AfterMicros        int64
	Hours              int
	BeforeGPUHours     float64
	AfterGPUHours      float64
}

// DeltaMicros is the change the group made.
func (g *RestatementGroup) DeltaMicros() int64 { return g.AfterMicros - g.BeforeMicros }

// Describe says what the group changed, in words.
func (g *RestatementGroup) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s to %s (%d hour(s)): %s before, %s after (%+.6f), %.3f to %.3f GPU-hours",
		g.Cluster, g.From.Format("2006-01-02T15:04Z"), g.To.Format("2006-01-02T15:04Z"), g.Hours,
		ledger.FormatMicros(g.BeforeMicros), ledger.FormatMicros(g.AfterMicros), float64(g.DeltaMicros())/1e6, g.BeforeGPUHours, g.AfterGPUHours)
	if !g.BilledIn.IsZero() {
		fmt.Fprintf(&b, "; billed in %s", g.BilledIn.Format("2006-01"))
	}
	fmt.Fprintf(&b, "; by %s with %s at %s", orUnknown(g.By), g.Source, g.At.Format(time.RFC3339))
	if g.Reason != "" {
		fmt.Fprintf(&b, ": %s", g.Reason)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "(not said)"
	}
	return s
}

// GroupRestatements groups rs (in the stores' order: cluster, hour,
// team, At) into runs of consecutive hours per cluster, team and rewrite,
// ordered by team, cluster and first hour.
func GroupRestatements(rs []ledger.Restatement) []RestatementGroup {
	type key struct {
		cluster, team, source, by, reason string
		at, billed                        time.Time
	}
	open := map[key]int{}
	var out []RestatementGroup
	for _, r := range rs {
		k := key{r.Cluster, r.Team, r.Source, r.By, r.Reason, r.At, r.BilledIn}
		if i, ok := open[k]; ok && out[i].To.Equal(r.Hour) {
			g := &out[i]
			g.To = r.Hour.Add(time.Hour)
			g.BeforeMicros += r.BeforeMicros
			g.AfterMicros += r.AfterMicros
			g.BeforeGPUHours += r.BeforeGPUSeconds / 3600
			g.AfterGPUHours += r.AfterGPUSeconds / 3600
			g.Hours++
			continue
		}
		open[k] = len(out)
		out = append(out, RestatementGroup{Cluster: r.Cluster, Team: r.Team, From: r.Hour, To: r.Hour.Add(time.Hour), At: r.At,
			Source: r.Source, By: r.By, Reason: r.Reason, BilledIn: r.BilledIn, BeforeMicros: r.BeforeMicros, AfterMicros: r.AfterMicros,
			BeforeGPUHours: r.BeforeGPUSeconds / 3600, AfterGPUHours: r.AfterGPUSeconds / 3600, Hours: 1})
	}
	slices.SortStableFunc(out, func(a, b RestatementGroup) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Cluster, b.Cluster), a.From.Compare(b.From))
	})
	return out
}
