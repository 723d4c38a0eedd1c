package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
	"github.com/gpuledger/gpuledger/ledger/ledgertest"
)

// TestReplicatedCluster runs deploy/clickhouse/cluster.sql as shipped (ON
// CLUSTER, ReplicatedReplacingMergeTree) on two shards of two replicas
// each with ZooKeeper, then the ledger contract suite through the
// Distributed tables, and stops a replica in the middle of three months of
// writes: nothing written is lost or doubled, the replica catches up when
// it is back, and the ledger equals a single store's.
func TestReplicatedCluster(t *testing.T) {
	testenv.Slow(t, "ZooKeeper and four clickhouse-servers")
	c := chtest.StartCluster(t, 2, 2)
	entry := c.Nodes[0][0]
	start := time.Now()
	stmts := chtest.ClusterSQL(t, "gpuledger", true)
	execAll(t, entry.DSN(), stmts)
	t.Logf("cluster.sql ON CLUSTER on 4 nodes: %s", time.Since(start).Round(time.Millisecond))
	var tables uint64
	for _, s := range stmts {
		if strings.HasPrefix(s, "CREATE TABLE") {
			tables++
		}
	}
	for _, n := range c.All() {
		if got := countRows(t, n.DSN(), "system.tables WHERE database = 'gpuledger'"); got != tables {
			t.Fatalf("node on %d has %d gpuledger tables of cluster.sql's %d: ON CLUSTER did not reach every node", n.TCP, got, tables)
		}
		if got := countRows(t, n.DSN(), "system.replicas WHERE database = 'gpuledger'"); got*2 != tables {
			t.Errorf("node on %d has %d replicated tables of %d", n.TCP, got, tables)
		}
	}

	t.Run("Contract", func(t *testing.T) {
		var n atomic.Int64
		ledgertest.Run(t, func(t *testing.T) ledger.Store {
			db := fmt.Sprintf("contract_%d", n.Add(1))
			return openReplicated(t, c, db)
		})
	})
	t.Run("Lines", func(t *testing.T) {
		ledgertest.RunLines(t, openReplicated(t, c, "lines"))
	})
	t.Run("ReplicaDownMidWrite", func(t *testing.T) {
		replicaDownMidWrite(t, c)
	})
}

// openReplicated creates database db on every node of c (its local and
// Distributed tables from cluster.sql) and opens a store on its
// Distributed tables through the first node.
func openReplicated(t *testing.T, c *chtest.Cluster, db string) *Store {
	t.Helper()
	stmts := chtest.ClusterSQL(t, db, false)
	var wg sync.WaitGroup
	errs := make([]error, len(c.All()))
	for i, n := range c.All() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := chtest.Conn(t, n.DSN())
			for _, s := range stmts {
				if err := conn.Exec(context.Background(), s); err != nil {
					errs[i] = fmt.Errorf("node on %d: %w\n%s", n.TCP, err, s)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{DSN: c.Nodes[0][0].DSNOf(db) + "?insert_distributed_sync=1"}
	opts.UseDistributed()
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// replicaDownMidWrite writes three months of hours through the entry node
// while the second shard's first replica is killed for a stretch of them
// and started again, then waits for replication and compares.
func replicaDownMidWrite(t *testing.T, c *chtest.Cluster) {
	ctx := context.Background()
	opts := Options{DSN: c.Nodes[0][0].DSNOf("gpuledger") + "?insert_distributed_sync=1", SpoolDir: t.TempDir()}
	opts.UseDistributed()
	store, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	victim := c.Nodes[1][0]
	const hours = 24 * 92
	const downFrom, downTo = 24 * 30, 24 * 45
	var written uint64
	for i := 0; i < hours; i += 24 {
		var rows []ledger.Row
		var wls []ledger.WorkloadRow
		for h := i; h < i+24; h++ {
			r, w := hourRows(h)
			rows, wls = append(rows, r...), append(wls, w...)
		}
		written += uint64(len(rows))
		done := make(chan error, 1)
		go func() { done <- store.WriteHours(ctx, rows, wls) }()
		// The replica dies while a write is in flight, and comes back
		// while another is.
		switch i {
		case downFrom:
			time.Sleep(5 * time.Millisecond)
			victim.Kill()
			t.Logf("killed the replica on %d during the write of hours %d-%d", victim.TCP, i, i+23)
		case downTo:
			victim.Start()
			t.Logf("restarted it after hour %d", i)
		}
		if err := <-done; err != nil {
			t.Fatalf("write of hours %d-%d with a replica down: %v", i, i+23, err)
		}
	}
	replayAll(t, store)
	t.Logf("spool: %+v", store.SpoolStats())
	// Every replica of each shard holds the same rows once replication
	// has caught up.
	for _, row := range c.Nodes {
		var counts []uint64
		for _, n := range row {
			for _, table := range []string{"ledger_rows", "workload_rows", "ledger_days", "ledger_months"} {
				conn := chtest.Conn(t, n.DSN())
				if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA gpuledger."+table); err != nil {
					t.Fatalf("sync replica on %d: %v", n.TCP, err)
				}
			}
			counts = append(counts, countRows(t, n.DSN(), "gpuledger.ledger_rows"), countRows(t, n.DSN(), "gpuledger.workload_rows"))
		}
		if fmt.Sprint(counts[:2]) != fmt.Sprint(counts[2:]) || counts[0] == 0 {
			t.Errorf("a shard's replicas hold %v rows (ledger, workloads per replica): they differ", counts)
		}
		t.Logf("shard rows (ledger, workloads) per replica: %v", counts)
	}
	var total uint64
	for _, row := range c.Nodes {
		total += countRows(t, row[0].DSN(), "gpuledger.ledger_rows")
	}
	if total != written {
		t.Errorf("the shards hold %d ledger rows; %d were written", total, written)
	}
	want := reference(t, hours, nil)
	sameAs(t, want, store, hours)
	// Read through each replica in turn: with the others' shard peers
	// killed, the Distributed table has only that replica to read.
	for r := range 2 {
		other := c.Nodes[1][1-r]
		other.Kill()
		sameAs(t, want, store, hours)
		other.Start()
	}
}
