// Package testenv is how tests find what they need from outside the
// repository: real servers (ClickHouse, VictoriaMetrics, vmagent) and the
// reference data of ../shared/data. A test that misses one skips outside
// CI and fails under CI=true, with a message that says what to install or
// set. Only tests import it.
package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// DataEnv names the variable that locates the reference data (the folder
// holding dcgm-exporter/, traces/, pricing/…); by default ../shared/data
// next to the repository.
const DataEnv = "GPULEDGER_SHARED_DATA"

// CI reports whether the tests run under CI (CI=true), where nothing they
// need may be missing.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing ends the test because something it needs is not here: a skip
// outside CI, a failure under CI=true. The message should say what to
// install or set.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatal("missing under CI=true: " + msg)
	}
	t.Skip("skipped: " + msg)
}

// DataDir is the reference data folder: $GPULEDGER_SHARED_DATA, or
// ../shared/data beside the repository root.
func DataDir() string {
	if d := os.Getenv(DataEnv); d != "" {
		return d
	}
	return filepath.Join(Root(), "..", "shared", "data")
}

// Data returns the path of rel inside the reference data, or ends the test
// (Missing) when it is not there.
func Data(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(DataDir(), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		Missing(t, "reference data %s not found (%v); set %s to the shared data folder", rel, err, DataEnv)
	}
	return p
}

// ReadData reads a file of the reference data, or ends the test.
func ReadData(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(Data(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Root is the repository root (where go.mod is), found from this file.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Slow skips a test that takes long (a whole month, a real process tree)
// under go test -short; make test runs it.
func Slow(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short: " + what)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a real server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr is FreePort as host:port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}
