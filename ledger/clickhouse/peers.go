package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuledger/gpuledger/ledger"
)

// Active-active ingest: two or more gpuledger serve replicas fed the same
// telemetry write the same hours. Every write of an hour carries a new
// version and reads keep each hour's newest, so the replicas' writes never
// add up; they only replace one another. That is right only while the
// replicas agree, so with ComparePeers a store compares, before it writes
// an hour's rows, the hour's newest rows in the table when another writer
// (another replica, or this one before a restart) wrote them, with its
// own, and counts the hours that were the same and those that differed
// (PeerStats); a difference is logged with the hour.

// PeerStats counts the hours a store compared with another writer's.
type PeerStats struct {
	// Same is the hours whose newest rows, written by another writer,
	// equalled this store's.
	Same uint64
	// Differ is the hours whose rows did not: replicas fed the same
	// telemetry disagreed (or one was restated by hand in between).
	Differ uint64
	// Errors is the comparisons that could not read the table; the write
	// went ahead.
	Errors uint64
}

// peers keeps the versions this store wrote, per cluster hour, and the
// counts.
type peers struct {
	mu    sync.Mutex
	wrote map[clusterHour]uint64
	stats PeerStats
}

// keepWritten bounds peers.wrote: hours older than this behind the newest
// written are forgotten (a rewrite of one is then compared like another
// writer's, which for the same rows counts as the same).
const keepWritten = 7 * 24 * time.Hour

// PeerStats returns the counts of ComparePeers.
func (s *Store) PeerStats() PeerStats {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return s.peers.stats
}

// comparePeers compares rec's rows, hour by hour, with the hours' newest
// rows in the table where another writer wrote them.
func (s *Store) comparePeers(ctx context.Context, rec *record) {
	mine := map[clusterHour][]ledger.Row{}
	for _, r := range rec.Rows {
		k := clusterHour{r.Cluster, r.Hour.UTC()}
		if r.Team != "" {
			mine[k] = append(mine[k], r)
		} else if _, ok := mine[k]; !ok {
			mine[k] = nil
		}
	}
	byCluster := map[string]ledger.HourSpan{}
	for k := range mine {
		byCluster[k.cluster] = byCluster[k.cluster].Widen(k.hour)
	}
	for cluster, span := range byCluster {
		if err := s.comparePeersOf(ctx, cluster, span.From, span.To, mine, rec.Version); err != nil {
			s.peers.mu.Lock()
			s.peers.stats.Errors++
			s.peers.mu.Unlock()
			s.log.Warn("clickhouse: could not compare hours with the other writers'", "cluster", cluster, "err", err)
		}
	}
}

// notePeerWrites records the version of each hour rec wrote, once written.
func (s *Store) notePeerWrites(rec *record) {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	if s.peers.wrote == nil {
		s.peers.wrote = map[clusterHour]uint64{}
	}
	var newest time.Time
	for _, r := range rec.Rows {
		s.peers.wrote[clusterHour{r.Cluster, r.Hour.UTC()}] = rec.Version
		if r.Hour.After(newest) {
			newest = r.Hour
		}
	}
	for k := range s.peers.wrote {
		if k.hour.Before(newest.Add(-keepWritten)) {
			delete(s.peers.wrote, k)
		}
	}
}

// comparePeersOf compares the hours of [from, to) of cluster in mine whose
// newest stored version is neither one this store last wrote of the hour
// nor own, the version being written (a spool replay finds the part of
// its record that got in before the failure: its own rows, in part).
func (s *Store) comparePeersOf(ctx context.Context, cluster string, from, to time.Time, mine map[clusterHour][]ledger.Row, own uint64) error {
	table := s.table(s.opts.LedgerTable)
	rs, err := s.conn.Query(ctx, `SELECT hour, max(version) FROM `+table+` WHERE cluster = ? AND hour >= ? AND hour < ? GROUP BY hour`, cluster, from, to)
	if err != nil {
		return err
	}
	foreign := map[time.Time]bool{}
	s.peers.mu.Lock()
	for rs.Next() {
		var h time.Time
		var v uint64
		if err := rs.Scan(&h, &v); err != nil {
			s.peers.mu.Unlock()
			rs.Close()
			return err
		}
		k := clusterHour{cluster, h.UTC()}
		if _, ok := mine[k]; ok && s.peers.wrote[k] != v && (own == 0 || v != own) {
			foreign[k.hour] = true
		}
	}
	s.peers.mu.Unlock()
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	if len(foreign) == 0 {
		return nil
	}
	stored, err := s.Query(ctx, ledger.Query{From: from, To: to, Step: ledger.StepHour, Cluster: cluster, GroupBy: ledger.Dimensions})
	if err != nil {
		return err
	}
	theirs := map[time.Time][]ledger.Row{}
	for _, r := range stored {
		if foreign[r.Hour] {
			theirs[r.Hour] = append(theirs[r.Hour], r)
		}
	}
	var same, differ uint64
	for h := range foreign {
		a, b := canonicalRows(mine[clusterHour{cluster, h}]), canonicalRows(theirs[h])
		if slices.Equal(a, b) {
			same++
			continue
		}
		differ++
		s.log.Warn("clickhouse: another writer's rows of this hour differ from this replica's; replicas fed the same telemetry must agree",
			"cluster", cluster, "hour", h.Format(time.RFC3339), "rows", len(a), "theirRows", len(b), "cost", sumCost(mine[clusterHour{cluster, h}]), "theirCost", sumCost(theirs[h]))
	}
	s.peers.mu.Lock()
	s.peers.stats.Same += same
	s.peers.stats.Differ += differ
	s.peers.mu.Unlock()
	return nil
}

// canonicalRows writes rows as sorted strings of every field, floats to
// the bit.
func canonicalRows(rows []ledger.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s|%s|%s|%s|%s|%s|%t|%b|%b|%b|%d|%d|%d|%d|%b|%d", r.Cluster, r.Team, r.Namespace, r.LocalQueue, r.ClusterQueue,
			r.Flavor, r.Borrowed, r.GPUSeconds, r.ActiveGPUSeconds, r.UnmeasuredGPUSeconds, r.CostMicros, r.IdleCostMicros, r.UnmeasuredCostMicros,
			r.UnallocatedCostMicros, r.EnergyJoules, r.EnergyCostMicros))
	}
	slices.Sort(out)
	return out
}

func sumCost(rows []ledger.Row) int64 {
	var n int64
	for _, r := range rows {
		n += r.CostMicros
	}
	return n
}

// CompareHours compares rows, hour by hour, with the hours' newest stored
// rows (another writer's), without writing them. It does nothing without
// ComparePeers.
func (s *Store) CompareHours(ctx context.Context, rows []ledger.Row) {
	if s.opts.ComparePeers && len(rows) > 0 {
		s.comparePeers(ctx, &record{Rows: rows})
	}
}
