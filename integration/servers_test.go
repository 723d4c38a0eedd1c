// Package integration_test runs gpuledger against real components on
// 127.0.0.1: VictoriaMetrics single-node and vmagent, built from the Go module
// proxy at the version tools/victoriametrics pins (tools/build-victoriametrics.sh).
// Outside CI a missing binary skips a test; under CI=true it fails it.
package integration_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
)

// vmBinary returns the path of a VictoriaMetrics binary (victoria-metrics,
// vmagent): from $GPULEDGER_VICTORIAMETRICS, else the build script's cache.
func vmBinary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("GPULEDGER_VICTORIAMETRICS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		matches, _ := filepath.Glob(filepath.Join(home, ".cache", "gpuledger", "victoriametrics-v*"))
		if len(matches) > 0 {
			dir = matches[len(matches)-1]
		}
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil || dir == "" {
		msg := fmt.Sprintf("%s not found (%v); build it with tools/build-victoriametrics.sh and set GPULEDGER_VICTORIAMETRICS to the folder it prints", name, err)
		testenv.Missing(t, "%s", msg)
	}
	return path
}

// start runs a server until the test ends and waits until ready answers 200.
func start(t testing.TB, ready string, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	logPath := filepath.Join(t.TempDir(), filepath.Base(bin)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log (last 3000 bytes):\n%s", filepath.Base(bin), tail(string(b), 3000))
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not get ready at %s in 30s", bin, ready)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// startVictoriaMetrics starts a single-node VictoriaMetrics with its own
// storage and returns its base URL.
func startVictoriaMetrics(t testing.TB) string {
	t.Helper()
	bin := vmBinary(t, "victoria-metrics")
	addr := testenv.FreeAddr(t)
	start(t, "http://"+addr+"/health", bin,
		"-httpListenAddr="+addr,
		"-storageDataPath="+t.TempDir(),
		"-retentionPeriod=100y",
		"-search.disableCache",
		"-search.latencyOffset=0s",
		"-loggerLevel=WARN")
	return "http://" + addr
}

// post sends body to url and fails the test unless it is accepted.
func post(t *testing.T, url, ctype string, body []byte) {
	t.Helper()
	resp, err := http.Post(url, ctype, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}
