// Package ledger owns gpuledger's hourly cost rows and the Store contract that
// every ledger backend implements. It holds no cost logic: rows are computed by
// package attribution and read by reports, api, admission and capacity.
//
// Money is always integer micro-units of the configured currency (1 USD =
// 1,000,000 micros); usage quantities are float64 GPU-seconds, because a MIG
// slice or a time-slice share is a fraction of a GPU.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Team names that the ledger reserves. Configured team names are DNS-1123
// labels, which cannot contain '_', so these never collide with a real team.
const (
	// TeamUnallocated marks capacity held by nobody: GPUs or MIG slices that no
	// pod held, and GPU time for which no telemetry arrived.
	TeamUnallocated = "_unallocated"
	// TeamUnowned marks capacity held by a pod whose namespace and queue
	// belong to no configured team.
	TeamUnowned = "_unowned"
)

// Key is the identity of a ledger row: one hour of one cluster's GPU capacity
// for one combination of owner dimensions. Two rows with equal keys are the
// same row.
type Key struct {
	// Hour is the start of the hour, in UTC.
	Hour time.Time
	// Cluster is the configured cluster name.
	Cluster string
	// Team is the owning team, TeamUnallocated or TeamUnowned.
	Team string
	// Namespace of the pod that held the GPU; empty for unallocated capacity.
	Namespace string
	// LocalQueue is the Kueue LocalQueue name (in Namespace); empty when the
	// pod carried no queue label.
	LocalQueue string
	// ClusterQueue the LocalQueue points to; empty when unknown.
	ClusterQueue string
	// Flavor is the ResourceFlavor of the node whose GPU was held.
	Flavor string
	// Borrowed is true for the part of a ClusterQueue's usage that went
	// beyond its nominal quota in the flavor that hour, run on capacity
	// borrowed from its cohort.
	Borrowed bool
}

// Row is one ledger row. For every cluster and hour, the sum of CostMicros
// over all rows equals the cluster's GPU cost for that hour, to the micro,
// and the sum of EnergyCostMicros equals the cost of the energy its GPUs
// drew.
//
// CostMicros is kept apart four ways: active (held and busy), allocated
// idle (IdleCostMicros: held but inactive), unmeasured
// (UnmeasuredCostMicros: held, by what Kubernetes allocated, while no
// telemetry said how busy the device was) and unallocated
// (UnallocatedCostMicros: capacity nobody held, on TeamUnallocated rows or
// shared out to teams by the configured policy).
type Row struct {
	Key
	// GPUSeconds is the GPU time held, in whole-GPU equivalents: a 3g.40gb
	// MIG slice held for an hour counts 3/7 × 3600, a quarter of a
	// time-sliced GPU 900. On TeamUnallocated rows: the time nobody held.
	GPUSeconds float64
	// ActiveGPUSeconds is the part of GPUSeconds during which the GPU was
	// busy (GPUSeconds × DCGM activity).
	ActiveGPUSeconds float64
	// UnmeasuredGPUSeconds is the part of GPUSeconds for which no DCGM
	// activity was reported: the pod held the device by Kubernetes'
	// allocation (kube-state-metrics) while DCGM was silent about it, or
	// DCGM reported the device without an activity field.
	UnmeasuredGPUSeconds float64
	// CostMicros is the row's whole cost at the flavor's rate:
	// ActiveCostMicros() + IdleCostMicros + UnmeasuredCostMicros +
	// UnallocatedCostMicros.
	CostMicros int64
	// IdleCostMicros is the part of CostMicros paid while the GPU was held
	// but inactive.
	IdleCostMicros int64
	// UnmeasuredCostMicros is the part of CostMicros paid for
	// UnmeasuredGPUSeconds: held, but of unknown activity. It is neither
	// active nor idle.
	UnmeasuredCostMicros int64
	// UnallocatedCostMicros is the part of CostMicros for capacity nobody
	// held.
	UnallocatedCostMicros int64
	// EnergyJoules is the energy the GPUs drew, from DCGM's energy counter
	// or integrated power.
	EnergyJoules float64
	// EnergyCostMicros prices EnergyJoules at the electricity price × PUE.
	// It is a measured figure beside CostMicros, not part of it.
	EnergyCostMicros int64
}

// ActiveCostMicros is the part of CostMicros paid while the GPU was busy.
func (r *Row) ActiveCostMicros() int64 {
	return r.CostMicros - r.IdleCostMicros - r.UnmeasuredCostMicros - r.UnallocatedCostMicros
}

// WorkloadRow is one hour of one workload (the Job, JobSet, RayCluster or
// PyTorchJob that owns the pods), for drill-down into who wastes the most.
// Its costs are the same money as the team rows', grouped by owner; the
// unallocated share is not in them.
type WorkloadRow struct {
	Hour      time.Time
	Cluster   string
	Team      string
	Namespace string
	// Kind and Name of the pods' owner, such as Job/train-0042; Kind "Pod"
	// when no owner is known.
	Kind, Name           string
	GPUSeconds           float64
	ActiveGPUSeconds     float64
	UnmeasuredGPUSeconds float64
	CostMicros           int64
	IdleCostMicros       int64
	UnmeasuredCostMicros int64
}

// IdleGPUSeconds is the part of the GPU time held that DCGM measured
// idle: held, neither active nor unmeasured (never below 0).
func (w *WorkloadRow) IdleGPUSeconds() float64 {
	return max(w.GPUSeconds-w.ActiveGPUSeconds-w.UnmeasuredGPUSeconds, 0)
}

// Step is the width of the buckets a query aggregates into.
type Step int

// Steps a query can aggregate into. Buckets are aligned in UTC.
const (
	StepHour Step = iota + 1
	StepDay
	StepMonth
)

// ParseStep parses "hour", "day" or "month".
func ParseStep(s string) (Step, bool) {
	switch s {
	case "hour":
		return StepHour, true
	case "day":
		return StepDay, true
	case "month":
		return StepMonth, true
	}
	return 0, false
}

// String returns the name ParseStep accepts.
func (s Step) String() string {
	switch s {
	case StepHour:
		return "hour"
	case StepDay:
		return "day"
	case StepMonth:
		return "month"
	}
	return "unknown"
}

// Truncate returns the start of the bucket of width s that holds t, in UTC.
func (s Step) Truncate(t time.Time) time.Time {
	t = t.UTC()
	switch s {
	case StepDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case StepMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return t.Truncate(time.Hour)
}

// Dimension names a Key field a query can group by.
type Dimension string

// Dimensions a query can group by.
const (
	DimCluster      Dimension = "cluster"
	DimTeam         Dimension = "team"
	DimNamespace    Dimension = "namespace"
	DimLocalQueue   Dimension = "localQueue"
	DimClusterQueue Dimension = "clusterQueue"
	DimFlavor       Dimension = "flavor"
	DimBorrowed     Dimension = "borrowed"
)

// Dimensions lists every dimension a query can group by, in Key order.
var Dimensions = []Dimension{DimCluster, DimTeam, DimNamespace, DimLocalQueue, DimClusterQueue, DimFlavor, DimBorrowed}

// Query selects rows with From <= Hour < To, keeps those matching every
// non-empty filter, and sums them per Step bucket and GroupBy dimensions.
type Query struct {
	From, To time.Time
	Step     Step
	// GroupBy lists the Key dimensions kept in the result; the others are
	// summed over and left empty.
	GroupBy []Dimension
	// Cluster and Team filter on equality when not empty.
	Cluster string
	Team    string
}

// Validate checks that the query has a step and groups by known
// dimensions; backends call it before building their SQL.
func (q *Query) Validate() error {
	if q.Step < StepHour || q.Step > StepMonth {
		return fmt.Errorf("query step %d: want hour, day or month", q.Step)
	}
	for _, d := range q.GroupBy {
		if !slices.Contains(Dimensions, d) {
			return fmt.Errorf("query groupBy %q: want one of %v", d, Dimensions)
		}
	}
	return nil
}

// Columns names each dimension's column in the SQL backends' tables.
var Columns = map[Dimension]string{
	DimCluster:      "cluster",
	DimTeam:         "team",
	DimNamespace:    "namespace",
	DimLocalQueue:   "local_queue",
	DimClusterQueue: "cluster_queue",
	DimFlavor:       "flavor",
	DimBorrowed:     "borrowed",
}

// DailyRollup says whether a store's daily rollup answers q: day or
// month buckets over whole UTC days.
func (q *Query) DailyRollup() bool {
	return q.Step != StepHour && q.From.Unix()%86400 == 0 && q.To.Unix()%86400 == 0
}

// MonthlyRollup says whether a store's monthly rollup answers q: month
// buckets over whole UTC months.
func (q *Query) MonthlyRollup() bool {
	return q.Step == StepMonth && StepMonth.Truncate(q.From).Equal(q.From) && StepMonth.Truncate(q.To).Equal(q.To)
}

// SQLColumns returns a SQL backend's select and group-by lists for q: the
// bucket expression as b, then every dimension in Dimensions order, as its
// column when grouped, else as a constant (” for text, borrowedZero for the
// borrowed flag) so that every answer has the Row's shape.
func (q *Query) SQLColumns(bucket, borrowedZero string) (sel, group []string) {
	sel, group = []string{bucket + " AS b"}, []string{"b"}
	for _, d := range Dimensions {
		switch {
		case slices.Contains(q.GroupBy, d):
			sel = append(sel, Columns[d])
			group = append(group, Columns[d])
		case d == DimBorrowed:
			sel = append(sel, borrowedZero)
		default:
			sel = append(sel, "''")
		}
	}
	return sel, group
}

// Store is the contract every ledger backend implements (embedded, ClickHouse).
//
// Rows are written per cluster-hour: WriteHours replaces all rows of every
// (cluster, hour) present in rows, so rewriting an hour after a crash or a
// re-run never doubles it. A Store is safe for concurrent use. The caller owns
// the rows it passes and the Store owns nothing it returns after the call.
type Store interface {
	// WriteHours atomically replaces the rows, and the workload rows, of
	// every (cluster, hour) that appears in rows or workloads.
	WriteHours(ctx context.Context, rows []Row, workloads []WorkloadRow) error
	// Query returns the aggregated rows, ordered by Hour then by the Key's
	// dimensions. Each returned Row's Hour is its bucket start.
	Query(ctx context.Context, q Query) ([]Row, error)
	// TopWorkloads returns the workloads of [q.From, q.To) (filtered by
	// q.Cluster and q.Team) summed over the range, most idle cost first,
	// at most limit of them. Each row's Hour is q.From.
	TopWorkloads(ctx context.Context, q Query, limit int) ([]WorkloadRow, error)
	// WriteQueueHours atomically replaces the queue rows of every
	// (cluster, hour) that appears in rows.
	WriteQueueHours(ctx context.Context, rows []QueueRow) error
	// QueueHours returns the queue rows of [from, to) of a cluster (every
	// cluster when it is empty), ordered by cluster, hour and ClusterQueue.
	QueueHours(ctx context.Context, cluster string, from, to time.Time) ([]QueueRow, error)
	// WriteEndpointHours atomically replaces the endpoint rows of every
	// (cluster, hour) that appears in rows.
	WriteEndpointHours(ctx context.Context, rows []EndpointRow) error
	// EndpointHours returns the endpoint rows of [from, to) of a cluster
	// (every cluster when it is empty), ordered by cluster, hour,
	// namespace, model, kind and name.
	EndpointHours(ctx context.Context, cluster string, from, to time.Time) ([]EndpointRow, error)
	// WriteWorkloadTimes records workloads' times: a workload (cluster,
	// namespace, name, submit) written again replaces what was written of
	// it (its admission and finish come later).
	WriteWorkloadTimes(ctx context.Context, ws []WorkloadTime) error
	// WorkloadTimes returns the workloads of a cluster (every cluster when
	// empty) submitted in [from, to), by submit time.
	WorkloadTimes(ctx context.Context, cluster string, from, to time.Time) ([]WorkloadTime, error)
	// Checkpoint returns how far the ingest source called name has been
	// written; the zero time when it has not been.
	Checkpoint(ctx context.Context, name string) (time.Time, error)
	// SetCheckpoint records how far a source has been written. Callers set
	// it after writing the hours it covers: a crash between the two only
	// makes a rerun write those hours again, which replaces them.
	SetCheckpoint(ctx context.Context, name string, t time.Time) error
	// RecordAudit records a rewrite of hours that were already written,
	// such as a backfill over hours the live path had settled.
	RecordAudit(ctx context.Context, e AuditEntry) error
	// Audit returns the entries whose hours overlap [from, to), oldest
	// first.
	Audit(ctx context.Context, from, to time.Time) ([]AuditEntry, error)
	// FlagHours records flags on hours. A flag written again (equal but
	// for At) is kept once, with its first At.
	FlagHours(ctx context.Context, flags []HourFlag) error
	// HourFlags returns the flags of a cluster (every cluster when it is
	// empty) whose hours overlap [from, to), by cluster, From, Reason and
	// Detail.
	HourFlags(ctx context.Context, cluster string, from, to time.Time) ([]HourFlag, error)
	// RecordRestatements records rewrites of team-hours: restatements of
	// open months and adjustments of closed ones (see Rewrite).
	RecordRestatements(ctx context.Context, rs []Restatement) error
	// Restatements returns those of a cluster (every cluster when empty)
	// whose hours are in [from, to), by cluster, hour, team and At.
	Restatements(ctx context.Context, cluster string, from, to time.Time) ([]Restatement, error)
	// Adjustments returns the adjustments of a cluster (every cluster when
	// empty) billed in the month that starts at month, by cluster, hour,
	// team and At.
	Adjustments(ctx context.Context, cluster string, month time.Time) ([]Restatement, error)
	// CloseMonth records a month's close; a month closed already is an
	// error that wraps ErrMonthClosed.
	CloseMonth(ctx context.Context, c MonthClose) error
	// ClosedMonths returns the closes, by month.
	ClosedMonths(ctx context.Context) ([]MonthClose, error)
	// Close releases the Store's resources.
	Close() error
}

// AuditEntry records that hours already written were written again: the
// ledger never changes a settled hour silently.
type AuditEntry struct {
	// At is when the rewrite happened.
	At time.Time
	// Cluster and [From, To) are the hours rewritten.
	Cluster  string
	From, To time.Time
	// Source is what rewrote them, such as backfill:file:///x.jsonl.
	Source string
	// Rows is how many ledger rows the rewrite wrote.
	Rows int
	// Note says why, in words.
	Note string
}

// HourFlag marks hours of a cluster whose rows may not say all that
// happened in them, and why: the rows stand (they hold what was read),
// and every answer over those hours says they are flagged.
type HourFlag struct {
	Cluster string
	// [From, To) are the hours flagged, whole hours.
	From, To time.Time
	// Reason is one of the Flag* constants.
	Reason string
	// Detail says what happened, in words, with what an operator needs
	// to find it (a file, sequence numbers).
	Detail string
	// At is when the flag was first recorded.
	At time.Time
}

// Reasons of an HourFlag.
const (
	// FlagLogLoss: acknowledged records of the live pipeline's
	// write-ahead log could not be read back (damaged or missing on
	// disk); what they held is not in the hours they could have added
	// to.
	FlagLogLoss = "wal_records_lost"
)

// Check says what is wrong with a flag: its hours must be whole, From
// before To, and it needs a cluster and a reason.
func (f *HourFlag) Check() error {
	switch {
	case f.Cluster == "":
		return fmt.Errorf("hour flag %q: no cluster", f.Reason)
	case f.Reason == "":
		return fmt.Errorf("hour flag of %s: no reason", f.Cluster)
	case !f.From.Equal(f.From.Truncate(time.Hour)) || !f.To.Equal(f.To.Truncate(time.Hour)) || !f.From.Before(f.To):
		return fmt.Errorf("hour flag %q of %s: hours [%s, %s) are not whole hours, the first before the end", f.Reason, f.Cluster,
			f.From.Format(time.RFC3339), f.To.Format(time.RFC3339))
	}
	return nil
}

// DamageError is a read that found stored rows damaged: rows failing
// their checks (the embedded store), or data failing the server's own
// checksums (ClickHouse). The ledger answers it as an error, never with a
// changed number.
type DamageError struct {
	// Store is the backend (embedded, clickhouse); Table the table read.
	Store, Table string
	// Rows is how many rows failed their checks; 0 when not known.
	Rows int64
	// From and To are the range read; zero when not known.
	From, To time.Time
	// Err is the backend's own error, if any.
	Err error
}

func (e *DamageError) Error() string {
	msg := fmt.Sprintf("the ledger is damaged: %s table %s", e.Store, e.Table)
	if e.Rows > 0 {
		msg += fmt.Sprintf(": %d row(s) fail their checks", e.Rows)
	}
	if !e.From.IsZero() {
		msg += fmt.Sprintf(" in [%s, %s)", e.From.Format(time.RFC3339), e.To.Format(time.RFC3339))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; run gpuledger verify to see where, then restore the ledger from a backup or write those hours again with gpuledger ingest"
}

func (e *DamageError) Unwrap() error { return e.Err }

// LiveCheckpoint is the checkpoint of the live path (gpuledger serve) of a
// cluster: the end of the hours it has settled. The live path never writes
// before it; a backfill before it rewrites settled hours and records that.
func LiveCheckpoint(cluster string) string { return "live:" + cluster }

// Problem is damage a full check of a ledger found (gpuledger verify):
// where, and what.
type Problem struct {
	Table  string
	Detail string
}

// CompareRollups checks that a store's day and month answers over
// [from, to) (whole UTC months, from its rollups) are the sums of its
// hours: a rollup or an hour damaged, or rows that went missing from one
// and not the other, shows as a bucket whose sums differ. It returns a
// problem per such bucket and cluster, at most limit of them; a read that
// fails for damage is a problem too, and ends the comparison.
func CompareRollups(ctx context.Context, s Store, from, to time.Time, limit int) ([]Problem, error) {
	problems, err := compareRollups(ctx, s, from, to, limit)
	var de *DamageError
	if errors.As(err, &de) {
		return append(problems, Problem{Table: de.Table, Detail: de.Error()}), nil
	}
	return problems, err
}

func compareRollups(ctx context.Context, s Store, from, to time.Time, limit int) ([]Problem, error) {
	var problems []Problem
	for m := StepMonth.Truncate(from); m.Before(to) && len(problems) < limit; m = m.AddDate(0, 1, 0) {
		end := m.AddDate(0, 1, 0)
		// The hours summed per day, the days as they are and summed per
		// month, and the month.
		hours, days, daysOfMonth, month := map[bucketKey]moneySums{}, map[bucketKey]moneySums{}, map[bucketKey]moneySums{}, map[bucketKey]moneySums{}
		for _, step := range []Step{StepHour, StepDay, StepMonth} {
			rows, err := s.Query(ctx, Query{From: m, To: end, Step: step, GroupBy: []Dimension{DimCluster}})
			if err != nil {
				return problems, fmt.Errorf("read %s by the %s: %w", m.Format("2006-01"), step, err)
			}
			for _, r := range rows {
				day, mon := bucketKey{r.Cluster, StepDay.Truncate(r.Hour)}, bucketKey{r.Cluster, m}
				switch step {
				case StepHour:
					hours[day] = hours[day].add(r)
				case StepDay:
					days[day] = days[day].add(r)
					daysOfMonth[mon] = daysOfMonth[mon].add(r)
				case StepMonth:
					month[mon] = month[mon].add(r)
				}
			}
		}
		problems = append(problems, differ("the daily rollup", "its hours", days, hours)...)
		problems = append(problems, differ("the monthly rollup", "its days", month, daysOfMonth)...)
	}
	if len(problems) > limit {
		problems = problems[:limit]
	}
	return problems, nil
}

// bucketKey is a cluster's day or month.
type bucketKey struct {
	cluster string
	bucket  time.Time
}

// moneySums are a bucket's money columns.
type moneySums struct{ cost, idle, unmeasured, unallocated, energy int64 }

func (m moneySums) add(r Row) moneySums {
	return moneySums{m.cost + r.CostMicros, m.idle + r.IdleCostMicros, m.unmeasured + r.UnmeasuredCostMicros,
		m.unallocated + r.UnallocatedCostMicros, m.energy + r.EnergyCostMicros}
}

// differ returns a problem for each bucket where the rollup's sums are not
// the finer rows'.
func differ(rollup, finer string, got, want map[bucketKey]moneySums) []Problem {
	keys := make(map[bucketKey]bool)
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var out []Problem
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b bucketKey) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), a.bucket.Compare(b.bucket))
	}) {
		if g, w := got[k], want[k]; g != w {
			out = append(out, Problem{Table: rollup, Detail: fmt.Sprintf("%s of cluster %s: %s %s where %s sum to %s",
				k.bucket.Format(time.DateOnly), k.cluster, rollup, FormatMicros(g.cost), finer, FormatMicros(w.cost))})
		}
	}
	return out
}

// PeerComparer is a Store that several writers share (active-active serve
// replicas on one ClickHouse cluster). A writer that finds an hour already
// settled by another (past the live checkpoint) does not write it again;
// it hands its rows of the hour to CompareHours, which compares them with
// the stored ones and counts whether they were the same.
type PeerComparer interface {
	CompareHours(ctx context.Context, rows []Row)
}
