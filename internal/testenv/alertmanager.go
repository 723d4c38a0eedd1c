package testenv

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// AlertmanagerEnv names the folder of the Alertmanager that
// tools/build-alertmanager.sh builds.
const AlertmanagerEnv = "GPULEDGER_ALERTMANAGER"

// StartAlertmanager runs the real Alertmanager on 127.0.0.1 with its state
// in dir (no routes out: alerts are read back through its API), and
// returns its URL and a function that stops it (also called when the test
// ends). Missing ends the test when it is not built.
func StartAlertmanager(t testing.TB, dir string) (string, func()) {
	t.Helper()
	bin := filepath.Join(os.Getenv(AlertmanagerEnv), "alertmanager")
	if _, err := os.Stat(bin); os.Getenv(AlertmanagerEnv) == "" || err != nil {
		Missing(t, "Alertmanager is not built (%s %q); run tools/build-alertmanager.sh and set %s to the folder it prints", AlertmanagerEnv, os.Getenv(AlertmanagerEnv), AlertmanagerEnv)
	}
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route: {receiver: none, group_wait: 1s}\nreceivers: [{name: none}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	logPath := filepath.Join(dir, "alertmanager.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--cluster.listen-address=")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			log.Close()
		}
	}
	t.Cleanup(stop)
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("Alertmanager not ready after 30 s: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
