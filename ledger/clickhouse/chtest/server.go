package chtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// Server is a clickhouse-server process of a test's own, on free ports of
// 127.0.0.1, so that the test can stop and start it.
type Server struct {
	t         testing.TB
	Dir       string
	TCP, HTTP int
	extra     string
	// Profile is spliced into the default user's profile at the next
	// start (settings).
	Profile string
}

// NewServer prepares a clickhouse-server of the test's own without
// starting it; it is killed when the test ends. Outside CI a missing
// clickhouse-server skips the test; under CI=true it fails it.
func NewServer(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		testenv.Missing(t, "clickhouse-server not installed (apt-get install -y clickhouse-server)")
	}
	s := &Server{t: t, Dir: t.TempDir(), TCP: testenv.FreePort(t), HTTP: testenv.FreePort(t)}
	t.Cleanup(s.Kill)
	return s
}

// StartServer is NewServer with extraXML spliced into its config (if not
// empty), started.
func StartServer(t testing.TB, extraXML string) *Server {
	t.Helper()
	s := NewServer(t)
	if extraXML != "" {
		s.SetExtra(extraXML)
	}
	s.Start()
	return s
}

// SetExtra splices xml into the server's config.xml at its next start.
func (s *Server) SetExtra(xml string) {
	s.extra = filepath.Join(s.Dir, "extra.xml")
	if err := os.WriteFile(s.extra, []byte(xml), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// DSN is the server's default database.
func (s *Server) DSN() string { return s.DSNOf("default") }

// DSNOf is the server's database db.
func (s *Server) DSNOf(db string) string {
	return "clickhouse://127.0.0.1:" + strconv.Itoa(s.TCP) + "/" + db
}

// Start starts the server with tools/clickhouse-test-server.sh and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	args := []string{filepath.Join(testenv.Root(), "tools", "clickhouse-test-server.sh"), filepath.Join(s.Dir, "srv"), strconv.Itoa(s.TCP), strconv.Itoa(s.HTTP)}
	if s.extra != "" {
		args = append(args, s.extra)
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "CLICKHOUSE_PROFILE_XML="+s.Profile)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("start clickhouse-server: %v\n%s", err, out)
	}
}

// Kill stops the server the hard way, as a crash or an outage would, and
// waits until its port is free.
func (s *Server) Kill() {
	killPidFile(filepath.Join(s.Dir, "srv", "server.pid"))
	waitClosed(s.TCP)
}

func killPidFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if p, err := os.FindProcess(pid); err == nil && pid > 0 {
		p.Signal(syscall.SIGKILL)
		p.Wait()
	}
}

func waitClosed(port int) {
	within(5*time.Second, 50*time.Millisecond, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
}

// within calls ok every period until it says true (within then does) or
// d has passed (then false).
func within(d, period time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(period) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// ZooKeeper is a standalone ZooKeeper server (Debian's package) of a
// test's own on 127.0.0.1, for replicated tables and ON CLUSTER DDL.
type ZooKeeper struct {
	Port int
	cmd  *exec.Cmd
}

// zooKeeperClassPath is where Debian's zookeeper package puts its jar;
// $GPULEDGER_ZOOKEEPER_CLASSPATH overrides it.
func zooKeeperClassPath() string {
	if c := os.Getenv("GPULEDGER_ZOOKEEPER_CLASSPATH"); c != "" {
		return c
	}
	return "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
}

// StartZooKeeper starts ZooKeeper on a free port and waits until it
// answers "ruok"; it is stopped when the test ends. Outside CI a missing
// java or zookeeper skips the test; under CI=true it fails it.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	java, err := exec.LookPath("java")
	cp := zooKeeperClassPath()
	if err == nil {
		for _, p := range strings.Split(cp, ":") {
			if _, err = os.Stat(p); err != nil {
				break
			}
		}
	}
	if err != nil {
		testenv.Missing(t, "ZooKeeper is not installed (%v): apt-get install -y zookeeper, or set GPULEDGER_ZOOKEEPER_CLASSPATH", err)
	}
	dir := t.TempDir()
	z := &ZooKeeper{Port: testenv.FreePort(t)}
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n4lw.commands.whitelist=srvr\n",
		filepath.Join(dir, "data"), z.Port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	z.cmd = exec.Command(java, "-Xmx256m", "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	z.cmd.Stdout, z.cmd.Stderr = log, log
	if err := z.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		z.cmd.Process.Kill()
		z.cmd.Wait()
		log.Close()
	})
	if within(60*time.Second, 100*time.Millisecond, z.serving) {
		return z
	}
	b, _ := os.ReadFile(log.Name())
	t.Fatalf("ZooKeeper did not answer on 127.0.0.1:%d in 60 s; its log:\n%s", z.Port, b)
	return nil
}

// serving reports whether ZooKeeper takes sessions: its port opens, and
// answers ruok, before it has loaded its data, and a session asked for
// then is dropped mid-handshake (which ClickHouse 18.16's DDL worker does
// not survive).
func (z *ZooKeeper) serving() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(z.Port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: ")
}

// Cluster is a replicated ClickHouse cluster of the test's own: Shards x
// Replicas clickhouse-server processes on one ZooKeeper, named gpuledger in
// every node's <remote_servers> (internal replication: a Distributed table
// writes one replica and replication copies it), with the {shard} and
// {replica} macros deploy/clickhouse/cluster.sql's tables use, and ON
// CLUSTER DDL. Its users read and write each shard's first live replica
// (load_balancing in_order), as deploy/clickhouse/README.md asks: a read
// then sees what was just written, which replication copies a moment
// later.
type Cluster struct {
	ZooKeeper *ZooKeeper
	// Nodes[shard][replica].
	Nodes [][]*Server
}

// StartCluster starts ZooKeeper and shards x replicas servers.
func StartCluster(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	c := &Cluster{ZooKeeper: StartZooKeeper(t)}
	var remote strings.Builder
	remote.WriteString("<remote_servers><gpuledger>")
	for range shards {
		var row []*Server
		remote.WriteString("<shard><internal_replication>true</internal_replication>")
		for range replicas {
			s := NewServer(t)
			s.Profile = "<load_balancing>in_order</load_balancing>"
			row = append(row, s)
			fmt.Fprintf(&remote, "<replica><host>127.0.0.1</host><port>%d</port></replica>", s.TCP)
		}
		remote.WriteString("</shard>")
		c.Nodes = append(c.Nodes, row)
	}
	remote.WriteString("</gpuledger></remote_servers>")
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range c.All() {
				b, _ := os.ReadFile(filepath.Join(s.Dir, "srv", "error.log"))
				t.Logf("the error log of the node on %d ends:\n%s", s.TCP, b[max(0, len(b)-3000):])
			}
		}
	})
	for i, row := range c.Nodes {
		for j, s := range row {
			s.SetExtra(remote.String() + fmt.Sprintf(`
<interserver_http_host>127.0.0.1</interserver_http_host><interserver_http_port>%d</interserver_http_port>
<zookeeper><node><host>127.0.0.1</host><port>%d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>
<macros><shard>%02d</shard><replica>r%d-%d</replica></macros>
<distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>`, testenv.FreePort(t), c.ZooKeeper.Port, i+1, i+1, j+1))
			s.Start()
		}
	}
	for _, s := range c.All() {
		if !s.zooKeeperReady() {
			// A node that lost its first ZooKeeper session may have
			// crashed or be waiting; one restart settles it.
			s.Kill()
			s.Start()
			if !s.zooKeeperReady() {
				t.Fatalf("the ClickHouse node on %d did not reach ZooKeeper on %d in 30 s", s.TCP, c.ZooKeeper.Port)
			}
		}
	}
	return c
}

// zooKeeperReady waits up to 30 s for the node to answer a query that
// reads ZooKeeper.
func (s *Server) zooKeeperReady() bool {
	q := url.Values{"query": {"SELECT count() FROM system.zookeeper WHERE path = '/'"}}
	u := "http://127.0.0.1:" + strconv.Itoa(s.HTTP) + "/?" + q.Encode()
	client := &http.Client{Timeout: 5 * time.Second}
	return within(30*time.Second, 200*time.Millisecond, func() bool {
		resp, err := client.Get(u)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// All is every node, shard by shard.
func (c *Cluster) All() []*Server {
	var all []*Server
	for _, row := range c.Nodes {
		all = append(all, row...)
	}
	return all
}

// ClusterSQL is deploy/clickhouse/cluster.sql's statements for a database
// named db (its tables' ZooKeeper paths under /db/ so that databases do not
// share replicas). With onCluster false the ON CLUSTER clauses are dropped:
// the statements are then run on every node.
func ClusterSQL(t testing.TB, db string, onCluster bool) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "deploy", "clickhouse", "cluster.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	r := strings.NewReplacer(
		"DATABASE IF NOT EXISTS gpuledger ", "DATABASE IF NOT EXISTS "+db+" ",
		" gpuledger.", " "+db+".",
		"Distributed(gpuledger, gpuledger, ", "Distributed(gpuledger, "+db+", ",
		"/gpuledger/", "/"+db+"/")
	var out []string
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		stmt = strings.TrimSpace(r.Replace(stmt))
		if !onCluster {
			stmt = strings.ReplaceAll(stmt, " ON CLUSTER gpuledger", "")
		}
		if stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}
