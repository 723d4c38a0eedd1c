package integration_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/ledger/clickhouse"
	"github.com/gpuledger/gpuledger/ledger/clickhouse/chtest"
)

// TestActiveActive runs two gpuledger serve replicas, fed by one vmagent
// (a -remoteWrite.url for each), on one replicated ClickHouse cluster (two
// shards of two replicas with ZooKeeper, deploy/clickhouse/cluster.sql as
// shipped), each through a different node. The second replica is killed
// at 0:30 of the clock and is back 20 minutes later; vmagent queues its
// share meanwhile. The first hour read through the Distributed tables is
// the file's, bit for bit: what one serve writes (the chaos tests), with
// nothing counted twice. The second replica settles the hour five
// minutes after the first (its -ingest.settleAfter is longer, as two
// replicas' clocks and loads differ): it finds the hour written by the
// first, does not write it again, and compares its rows with the stored
// ones; no hour differs.
func TestActiveActive(t *testing.T) {
	cl := chtest.StartCluster(t, 2, 2)
	conn := chtest.Conn(t, cl.Nodes[0][0].DSN())
	for _, stmt := range chtest.ClusterSQL(t, "gpuledger", true) {
		if err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%v\n%s", err, stmt)
		}
	}
	dir := t.TempDir()
	entry := []*chtest.Server{cl.Nodes[0][0], cl.Nodes[1][0]}
	dsn := func(i int) string { return entry[i].DSNOf("gpuledger") + "?insert_distributed_sync=1" }
	const lag = 5 * time.Minute
	c := newChaosOpts(t, chaosOptions{minutes: 75, queues: 1, speed: chaosSpeed, replicas: 2, serveArgs: func(i int) []string {
		return []string{"-ledger.store=clickhouse", "-clickhouse.distributed", "-clickhouse.dsn=" + dsn(i),
			"-clickhouse.spoolDir=" + filepath.Join(dir, fmt.Sprint("spool", i)),
			"-ingest.settleAfter=" + (chaosSettle + time.Duration(i)*lag).String()}
	}})
	second := c.replicas[1]
	c.until(chaosStart.Add(30 * time.Minute))
	second.kill()
	c.until(chaosStart.Add(50 * time.Minute))
	second.start()
	c.until(c.settled().Add(lag))
	// Give the second replica's comparison its moment.
	time.Sleep(5 * time.Second)
	var peers [2][3]float64
	for i, r := range c.replicas {
		got := metricSums(t, "http://"+r.addr+"/metrics", "chaos-viewer",
			`gpuledger_clickhouse_peer_hours_total{result="same"}`,
			`gpuledger_clickhouse_peer_hours_total{result="differ"}`,
			`gpuledger_clickhouse_peer_hours_total{result="error"}`)
		copy(peers[i][:], got)
	}
	for _, r := range c.replicas {
		r.stop()
	}
	t.Logf("hours compared with the other replica's (same, differ, error): first %v, second %v", peers[0], peers[1])
	if peers[0][1]+peers[1][1] != 0 || peers[0][2]+peers[1][2] != 0 {
		t.Errorf("replicas fed the same telemetry disagreed or could not compare: first %v, second %v (same, differ, error)", peers[0], peers[1])
	}
	if peers[1][0] == 0 {
		t.Errorf("the second replica did not compare the first hour with the first's: %v (same, differ, error)", peers[1])
	}
	opts := clickhouse.Options{DSN: dsn(0)}
	opts.UseDistributed()
	live, err := clickhouse.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	c.compare(c.reference(nil), live)
}
