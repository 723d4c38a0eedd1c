package clickhouse

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// server is a clickhouse-server process of a test's own, so that the test
// can stop and start it.
type server struct {
	t         testing.TB
	dir       string
	tcp, http int
	extra     string
}

// newServer prepares a clickhouse-server of the test's own, on free ports,
// without starting it. Outside CI a missing clickhouse-server skips the
// test; under CI=true it fails it.
func newServer(t testing.TB) *server {
	t.Helper()
	if _, err := exec.LookPath("clickhouse-server"); err != nil {
		msg := "clickhouse-server not installed (apt-get install -y clickhouse-server)"
		testenv.Missing(t, "%s", msg)
	}
	s := &server{t: t, dir: t.TempDir(), tcp: testenv.FreePort(t), http: testenv.FreePort(t)}
	t.Cleanup(s.kill)
	return s
}

// setExtra splices xml into the server's config.
func (s *server) setExtra(xml string) {
	s.extra = filepath.Join(s.dir, "extra.xml")
	if err := os.WriteFile(s.extra, []byte(xml), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// startServer starts a clickhouse-server with tools/clickhouse-test-server.sh.
func startServer(t testing.TB, extraXML string) *server {
	t.Helper()
	s := newServer(t)
	if extraXML != "" {
		s.setExtra(extraXML)
	}
	s.start()
	return s
}

func (s *server) dsn() string { return "clickhouse://127.0.0.1:" + strconv.Itoa(s.tcp) + "/default" }

func (s *server) start() {
	s.t.Helper()
	args := []string{"../../tools/clickhouse-test-server.sh", filepath.Join(s.dir, "srv"), strconv.Itoa(s.tcp), strconv.Itoa(s.http)}
	if s.extra != "" {
		args = append(args, s.extra)
	}
	if out, err := exec.Command("bash", args...).CombinedOutput(); err != nil {
		s.t.Fatalf("start clickhouse-server: %v\n%s", err, out)
	}
}

// kill stops the server the hard way, as a crash or an outage would.
func (s *server) kill() {
	b, err := os.ReadFile(filepath.Join(s.dir, "srv", "server.pid"))
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if p, err := os.FindProcess(pid); err == nil {
		p.Signal(syscall.SIGKILL)
		p.Wait()
	}
	// Wait until the port is free again.
	for range 100 {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.tcp))
		if err != nil {
			return
		}
		c.Close()
		syscallSleep()
	}
}
