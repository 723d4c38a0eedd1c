// Package clickhouse is the ledger.Store for scale: ledger rows in a
// ClickHouse ReplacingMergeTree, written with clickhouse-go/v2 over the native
// protocol, on one server or a cluster (deploy/clickhouse). Money is
// Decimal(18, 6), read back exactly as text. When the server cannot be
// reached, writes go to a local durable spool and are replayed in order once
// it is back (spool.go).
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal" // clickhouse-go's value type for Decimal columns

	"github.com/gpuledger/gpuledger/ledger"
)

// Options configures Open.
type Options struct {
	// DSN is the server, as clickhouse-go parses it:
	// clickhouse://user:password@127.0.0.1:9000/database?dial_timeout=5s.
	DSN string
	// Tables override the table names: on a ClickHouse cluster, point them
	// at the Distributed tables of deploy/clickhouse/cluster.sql and set
	// SkipMigrations. Defaults ledger_rows, workload_rows, checkpoints,
	// audit.
	LedgerTable, WorkloadTable, CheckpointTable, AuditTable, QueueTable, TimesTable, EndpointTable, DayTable, MonthTable, FlagTable string
	RestateTable, CloseTable, LineTable, LineHourTable                                                                              string
	// SkipMigrations leaves the schema to the operator (cluster DDL).
	SkipMigrations bool
	// SpoolDir, when set, holds writes that could not reach the server;
	// they are replayed in order when it is back. Without it a write fails
	// while the server is down.
	SpoolDir string
	// SpoolMaxBytes bounds the spool; past it writes fail. Default 1 GiB.
	SpoolMaxBytes int64
	// BatchRows caps the rows of one INSERT, bounding memory. Default 100,000.
	BatchRows int
	// ReplayEvery is how often a pending spool is retried. Default 1 s.
	ReplayEvery time.Duration
	// ComparePeers compares each hour written with the hour's newest rows
	// when another writer wrote them (active-active serve replicas), and
	// counts the hours that were the same and those that differed
	// (PeerStats). It costs a read of the hours before each write.
	ComparePeers bool
	Logger       *slog.Logger
}

// UseDistributed points every table at the Distributed table of
// deploy/clickhouse/cluster.sql (its name and _all) and leaves the schema
// to that DDL.
func (o *Options) UseDistributed() {
	o.LedgerTable, o.WorkloadTable, o.CheckpointTable, o.AuditTable, o.QueueTable = "ledger_rows_all", "workload_rows_all", "checkpoints_all", "audit_all", "queue_rows_all"
	o.TimesTable, o.EndpointTable, o.DayTable, o.MonthTable, o.FlagTable = "workload_times_all", "endpoint_rows_all", "ledger_days_all", "ledger_months_all", "hour_flags_all"
	o.RestateTable, o.CloseTable, o.LineTable, o.LineHourTable = "restatements_all", "month_closes_all", "line_rows_all", "line_hours_all"
	o.SkipMigrations = true
}

// Store is the ClickHouse ledger.Store.
type Store struct {
	conn  driver.Conn
	db    string
	opts  Options
	log   *slog.Logger
	spool *spool

	writeMu sync.Mutex // orders direct writes and spool replays
	lastVer atomic.Uint64
	// version and versionAt cache DataVersion.
	version   atomic.Uint64
	versionAt atomic.Int64
	peers     peers
	stop      chan struct{}
	done      chan struct{}
}

var _ ledger.Store = (*Store)(nil)

// Open connects, applies the migrations and, with a spool, starts replaying
// it. It fails when the server cannot be reached at start: the schema must
// be known before anything is accepted.
func Open(ctx context.Context, opts Options) (*Store, error) {
	copts, err := ch.ParseDSN(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse -clickhouse.dsn %q: %w; want clickhouse://host:9000/database", redactDSN(opts.DSN), err)
	}
	if copts.DialTimeout == 0 {
		copts.DialTimeout = 5 * time.Second
	}
	conn, err := ch.Open(copts)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %s: %w", redactDSN(opts.DSN), err)
	}
	s := &Store{conn: conn, db: copts.Auth.Database, opts: opts, log: opts.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	if s.db == "" {
		s.db = "default"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.LedgerTable == "" {
		s.opts.LedgerTable = "ledger_rows"
	}
	if s.opts.WorkloadTable == "" {
		s.opts.WorkloadTable = "workload_rows"
	}
	if s.opts.CheckpointTable == "" {
		s.opts.CheckpointTable = "checkpoints"
	}
	if s.opts.AuditTable == "" {
		s.opts.AuditTable = "audit"
	}
	if s.opts.QueueTable == "" {
		s.opts.QueueTable = "queue_rows"
	}
	if s.opts.TimesTable == "" {
		s.opts.TimesTable = "workload_times"
	}
	if s.opts.EndpointTable == "" {
		s.opts.EndpointTable = "endpoint_rows"
	}
	if s.opts.DayTable == "" {
		s.opts.DayTable = "ledger_days"
	}
	if s.opts.MonthTable == "" {
		s.opts.MonthTable = "ledger_months"
	}
	if s.opts.FlagTable == "" {
		s.opts.FlagTable = "hour_flags"
	}
	if s.opts.RestateTable == "" {
		s.opts.RestateTable = "restatements"
	}
	if s.opts.CloseTable == "" {
		s.opts.CloseTable = "month_closes"
	}
	if s.opts.LineTable == "" {
		s.opts.LineTable = "line_rows"
	}
	if s.opts.LineHourTable == "" {
		s.opts.LineHourTable = "line_hours"
	}
	if s.opts.BatchRows <= 0 {
		s.opts.BatchRows = 100_000
	}
	if s.opts.ReplayEvery <= 0 {
		s.opts.ReplayEvery = time.Second
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reach clickhouse %s: %w; is the server running?", redactDSN(opts.DSN), err)
	}
	if !opts.SkipMigrations {
		if err := s.migrate(ctx); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if opts.SpoolDir != "" {
		if s.spool, err = openSpool(opts.SpoolDir, opts.SpoolMaxBytes, s.log); err != nil {
			conn.Close()
			return nil, err
		}
		go s.replayLoop()
	} else {
		close(s.done)
	}
	return s, nil
}

func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			return dsn[:j+3] + "…" + dsn[i:]
		}
	}
	return dsn
}

func (s *Store) migrate(ctx context.Context) error {
	if err := s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.db+`.gpuledger_schema (version UInt32, applied DateTime) ENGINE = Log`); err != nil {
		return fmt.Errorf("create schema table: %w", err)
	}
	var applied uint32
	row := s.conn.QueryRow(ctx, `SELECT max(version) FROM `+s.db+`.gpuledger_schema`)
	if err := row.Scan(&applied); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if int(applied) >= len(migrations) {
		if int(applied) > len(migrations)-1 {
			return fmt.Errorf("schema version %d is newer than this binary's %d; upgrade gpuledger", applied, len(migrations)-1)
		}
	}
	for v := int(applied) + 1; v < len(migrations); v++ {
		q := strings.ReplaceAll(migrations[v], "{db}", s.db)
		if err := s.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("apply migration %d: %w", v, err)
		}
		if err := s.insertOne(ctx, `INSERT INTO `+s.db+`.gpuledger_schema (version, applied)`, uint32(v), time.Now().UTC()); err != nil {
			return fmt.Errorf("record migration %d: %w", v, err)
		}
		s.log.Info("clickhouse migration applied", "version", v)
	}
	return nil
}

// Close stops the replayer and closes the connection; a pending spool stays
// on disk for the next Open.
func (s *Store) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	var errs []error
	if s.spool != nil {
		errs = append(errs, s.spool.close())
	}
	errs = append(errs, s.conn.Close())
	return errors.Join(errs...)
}

// nextVersion returns a version greater than any this process used.
func (s *Store) nextVersion() uint64 {
	for {
		last := s.lastVer.Load()
		v := max(uint64(time.Now().UnixNano()), last+1)
		if s.lastVer.CompareAndSwap(last, v) {
			return v
		}
	}
}

// record is one write: rows and workload rows that replace their hours, or
// a checkpoint. It is what the spool keeps.
type record struct {
	Version    uint64                `json:"v"`
	Rows       []ledger.Row          `json:"r,omitempty"`
	Workloads  []ledger.WorkloadRow  `json:"w,omitempty"`
	Queues     []ledger.QueueRow     `json:"q,omitempty"`
	Times      []ledger.WorkloadTime `json:"t,omitempty"`
	Endpoints  []ledger.EndpointRow  `json:"e,omitempty"`
	Lines      []ledger.Line         `json:"l,omitempty"`
	Checkpoint *checkpoint           `json:"c,omitempty"`
}

type checkpoint struct {
	Name string `json:"n"`
	AtMs int64  `json:"t"`
}

// WriteHours writes rows and workloads with a new version, replacing their
// hours. When the server is unreachable and a spool is configured, they go
// to the spool and WriteHours succeeds: the spool replays them in order.
func (s *Store) WriteHours(ctx context.Context, rows []ledger.Row, workloads []ledger.WorkloadRow) error {
	for i := range rows {
		if err := checkHour(rows[i].Hour); err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
	}
	for i := range workloads {
		if err := checkHour(workloads[i].Hour); err != nil {
			return fmt.Errorf("workload row %d: %w", i, err)
		}
	}
	if len(rows) == 0 && len(workloads) == 0 {
		return nil
	}
	return s.write(ctx, &record{Version: s.nextVersion(), Rows: rows, Workloads: workloads})
}

// WriteQueueHours writes queue rows with a new version, replacing their
// hours (through the spool when the server is unreachable, like
// WriteHours).
func (s *Store) WriteQueueHours(ctx context.Context, rows []ledger.QueueRow) error {
	for i := range rows {
		if err := rows[i].Check(); err != nil {
			return fmt.Errorf("queue row %d: %w", i, err)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return s.write(ctx, &record{Version: s.nextVersion(), Queues: rows})
}

// WriteEndpointHours writes endpoint rows with a new version, replacing
// their hours (through the spool like WriteHours).
func (s *Store) WriteEndpointHours(ctx context.Context, rows []ledger.EndpointRow) error {
	for i := range rows {
		if err := rows[i].Check(); err != nil {
			return fmt.Errorf("endpoint row %d: %w", i, err)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return s.write(ctx, &record{Version: s.nextVersion(), Endpoints: rows})
}

// WriteWorkloadTimes writes workloads' times with a new version: reads
// keep each workload's newest (through the spool like WriteHours).
func (s *Store) WriteWorkloadTimes(ctx context.Context, ws []ledger.WorkloadTime) error {
	for i := range ws {
		if err := ws[i].Check(); err != nil {
			return fmt.Errorf("workload time %d: %w", i, err)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	return s.write(ctx, &record{Version: s.nextVersion(), Times: ws})
}

// SetCheckpoint records how far a source has been written, after the hours
// it covers (through the spool too, in order).
func (s *Store) SetCheckpoint(ctx context.Context, name string, t time.Time) error {
	return s.write(ctx, &record{Version: s.nextVersion(), Checkpoint: &checkpoint{Name: name, AtMs: t.UnixMilli()}})
}

func (s *Store) write(ctx context.Context, rec *record) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// Nothing overtakes what is spooled: while the spool is not empty,
	// new writes queue behind it.
	if s.spool != nil && s.spool.pending() {
		return s.spool.append(rec)
	}
	err := s.apply(ctx, rec)
	if err == nil || s.spool == nil || !unreachable(err) {
		return err
	}
	s.log.Warn("clickhouse unreachable; spooling", "err", err)
	return s.spool.append(rec)
}

// unreachable says whether err means the server could not be reached (or
// went away mid-write), or could not reach the shard or replica it writes
// through, or ZooKeeper: what a later replay can get past. Errors the server
// itself returns (bad SQL, wrong types) are not. A replayed record carries
// its version, so a part of it that did get in is replaced, not added to.
func unreachable(err error) bool {
	var ex *ch.Exception
	if !errors.As(err, &ex) {
		return true
	}
	if transientCodes[ex.Code] {
		return true
	}
	// A peer that dies mid-insert through a Distributed table surfaces as
	// ATTEMPT_TO_READ_AFTER_EOF (32) or a POCO_EXCEPTION (1000) naming the
	// peer's socket. From the entry node's own input the same codes mean a
	// malformed block, which a replay would only repeat; so they count as
	// unreachable only when the message says they came from a peer.
	if ex.Code == 32 || ex.Code == 1000 {
		return strings.Contains(ex.Message, "while receiving packet from") ||
			strings.Contains(ex.Message, "Connection refused") ||
			strings.Contains(ex.Message, "Connection reset by peer")
	}
	return false
}

// transientCodes are the server's errors of another server, not of the
// query: SOCKET_TIMEOUT, NETWORK_ERROR, ALL_CONNECTION_TRIES_FAILED,
// TIMEOUT_EXCEEDED, TABLE_IS_READ_ONLY (a replica without ZooKeeper),
// NO_ZOOKEEPER, ALL_REPLICAS_ARE_STALE, KEEPER_EXCEPTION.
var transientCodes = map[int32]bool{209: true, 210: true, 279: true, 159: true, 242: true, 225: true, 369: true, 999: true}

func checkHour(h time.Time) error {
	if !h.Equal(h.Truncate(time.Hour)) {
		return fmt.Errorf("hour %s is not the start of an hour", h)
	}
	return nil
}

func micros(v int64) decimal.Decimal { return decimal.New(v, -6) }

// apply inserts a record, in batches of at most BatchRows rows.
func (s *Store) apply(ctx context.Context, rec *record) error {
	if c := rec.Checkpoint; c != nil {
		return s.insertOne(ctx, `INSERT INTO `+s.table(s.opts.CheckpointTable)+` (name, at_ms, version)`, c.Name, c.AtMs, rec.Version)
	}
	if len(rec.Queues) > 0 {
		return s.insertQueues(ctx, rec)
	}
	if len(rec.Times) > 0 {
		return s.insertTimes(ctx, rec)
	}
	if len(rec.Endpoints) > 0 {
		return s.insertEndpoints(ctx, rec)
	}
	if len(rec.Lines) > 0 {
		return s.insertLines(ctx, rec)
	}
	if s.opts.ComparePeers && len(rec.Rows) > 0 {
		s.comparePeers(ctx, rec)
	}
	for start := 0; start < len(rec.Rows); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.LedgerTable)+` (hour, cluster, team, namespace, local_queue, cluster_queue, flavor, borrowed, version,
			gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost, idle_cost, unmeasured_cost, unallocated_cost, energy_joules, energy_cost)`)
		if err != nil {
			return fmt.Errorf("prepare ledger insert: %w", err)
		}
		for _, r := range rec.Rows[start:min(start+s.opts.BatchRows, len(rec.Rows))] {
			var borrowed uint8
			if r.Borrowed {
				borrowed = 1
			}
			if err := b.Append(r.Hour.UTC(), r.Cluster, r.Team, r.Namespace, r.LocalQueue, r.ClusterQueue, r.Flavor, borrowed, rec.Version,
				r.GPUSeconds, r.ActiveGPUSeconds, r.UnmeasuredGPUSeconds, micros(r.CostMicros), micros(r.IdleCostMicros),
				micros(r.UnmeasuredCostMicros), micros(r.UnallocatedCostMicros), r.EnergyJoules, micros(r.EnergyCostMicros)); err != nil {
				b.Abort()
				return fmt.Errorf("append ledger row: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d ledger rows: %w", b.Rows(), err)
		}
	}
	for start := 0; start < len(rec.Workloads); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.WorkloadTable)+` (hour, cluster, team, namespace, kind, name, version,
			gpu_seconds, active_gpu_seconds, unmeasured_gpu_seconds, cost, idle_cost, unmeasured_cost)`)
		if err != nil {
			return fmt.Errorf("prepare workload insert: %w", err)
		}
		for _, w := range rec.Workloads[start:min(start+s.opts.BatchRows, len(rec.Workloads))] {
			if err := b.Append(w.Hour.UTC(), w.Cluster, w.Team, w.Namespace, w.Kind, w.Name, rec.Version,
				w.GPUSeconds, w.ActiveGPUSeconds, w.UnmeasuredGPUSeconds, micros(w.CostMicros), micros(w.IdleCostMicros),
				micros(w.UnmeasuredCostMicros)); err != nil {
				b.Abort()
				return fmt.Errorf("append workload row: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d workload rows: %w", b.Rows(), err)
		}
	}
	// An hour written with no workload rows (or no ledger rows) must still
	// replace the older version's: a marker row with the new version and
	// nothing in it keeps the newest-version filter right.
	if err := s.markHours(ctx, rec); err != nil {
		return err
	}
	if err := s.rollUp(ctx, rec); err != nil {
		return err
	}
	if s.opts.ComparePeers {
		s.notePeerWrites(rec)
	}
	return nil
}

// insertQueues inserts a record's queue rows, in batches.
func (s *Store) insertQueues(ctx context.Context, rec *record) error {
	for start := 0; start < len(rec.Queues); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.QueueTable)+` (hour, cluster, cluster_queue, version,
			pending_workloads, pending_gpus, admitted, admitted_wait_le, admitted_wait_n, pending_wait_le, pending_wait_n)`)
		if err != nil {
			return fmt.Errorf("prepare queue insert: %w", err)
		}
		for _, r := range rec.Queues[start:min(start+s.opts.BatchRows, len(rec.Queues))] {
			if err := b.Append(r.Hour.UTC(), r.Cluster, r.ClusterQueue, rec.Version, r.PendingWorkloads, r.PendingGPUs, r.Admitted,
				floats(r.AdmittedWait.Bounds), floats(r.AdmittedWait.Counts), floats(r.PendingWait.Bounds), floats(r.PendingWait.Counts)); err != nil {
				b.Abort()
				return fmt.Errorf("append queue row: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d queue rows: %w", b.Rows(), err)
		}
	}
	return nil
}

// insertEndpoints inserts a record's endpoint rows, in batches.
func (s *Store) insertEndpoints(ctx context.Context, rec *record) error {
	for start := 0; start < len(rec.Endpoints); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.EndpointTable)+` (hour, cluster, namespace, model, version, kind, name,
			pods, reported_seconds, busy_seconds, requests, generation_tokens, gaps_n, gaps_s, idle_since_ms, gaps_woken, gaps_wakes, gaps_measured, gaps_unmeasured)`)
		if err != nil {
			return fmt.Errorf("prepare endpoint insert: %w", err)
		}
		for _, r := range rec.Endpoints[start:min(start+s.opts.BatchRows, len(rec.Endpoints))] {
			if err := b.Append(r.Hour.UTC(), r.Cluster, r.Namespace, r.Model, rec.Version, r.Kind, r.Name, int64(r.Pods), r.ReportedSeconds,
				r.BusySeconds, r.Requests, r.GenerationTokens, ints(r.Gaps.Counts), floats(r.Gaps.Seconds), ledger.MilliOrZero(r.IdleSince),
				floats(r.Gaps.Woken), ints(r.Gaps.Wakes), ints(r.Gaps.Measured), ints(r.Gaps.Unmeasured)); err != nil {
				b.Abort()
				return fmt.Errorf("append endpoint row: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d endpoint rows: %w", b.Rows(), err)
		}
	}
	return nil
}

// insertTimes inserts a record's workload times, in batches.
func (s *Store) insertTimes(ctx context.Context, rec *record) error {
	for start := 0; start < len(rec.Times); start += s.opts.BatchRows {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO `+s.table(s.opts.TimesTable)+` (cluster, namespace, name, submit_ms, version,
			local_queue, resource, count, admit_ms, finish_ms)`)
		if err != nil {
			return fmt.Errorf("prepare workload times insert: %w", err)
		}
		for _, w := range rec.Times[start:min(start+s.opts.BatchRows, len(rec.Times))] {
			if err := b.Append(w.Cluster, w.Namespace, w.Name, w.Submit.UnixMilli(), rec.Version, w.LocalQueue, w.Resource, int64(w.Count),
				ledger.MilliOrZero(w.Admit), ledger.MilliOrZero(w.Finish)); err != nil {
				b.Abort()
				return fmt.Errorf("append workload time: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert %d workload times: %w", b.Rows(), err)
		}
	}
	return nil
}

// floats is never nil: the driver writes a nil slice as an empty array
// only for some column types.
func floats(v []float64) []float64 {
	if v == nil {
		return []float64{}
	}
	return v
}

func ints(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

func (s *Store) table(name string) string { return s.db + "." + name }

// insertOne inserts one row through the batch protocol: ClickHouse 18.16
// answers INSERT … VALUES with bound arguments sent as a query by waiting
// for data, so every insert goes as a batch with explicit columns.
func (s *Store) insertOne(ctx context.Context, insert string, vals ...any) error {
	b, err := s.conn.PrepareBatch(ctx, insert)
	if err != nil {
		return err
	}
	if err := b.Append(vals...); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}

func contextWithStop(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
