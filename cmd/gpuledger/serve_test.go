package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger/embedded"
	"github.com/gpuledger/gpuledger/reports"
)

// TestServeNeedsTokens: serve refuses to start without API tokens unless
// told -auth.disabled, and says how to make one.
func TestServeNeedsTokens(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"serve", "-config", "examples/cluster.yaml", "-ledger.path", filepath.Join(dir, "l"),
		"-ingest.dir", filepath.Join(dir, "p"), "-http.listenAddr", "127.0.0.1:0"}, &out)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "gpuledger token") || !strings.Contains(err.Error(), "-auth.disabled") {
		t.Errorf("serve without tokens: %v", err)
	}
}

// TestServeMaxBuffered: a bound of no samples is refused with the flag,
// its value and what is wanted, before anything is opened.
func TestServeMaxBuffered(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	for _, v := range []string{"0", "-5"} {
		// Were the flag taken, serve would run: until this ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := run(ctx, []string{"serve", "-config", "examples/cluster.yaml", "-ledger.path", filepath.Join(dir, "l"),
			"-ingest.dir", filepath.Join(dir, "p"), "-http.listenAddr", "127.0.0.1:0", "-auth.disabled", "-ingest.maxBuffered", v}, new(bytes.Buffer))
		cancel()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-ingest.maxBuffered="+v) || !strings.Contains(err.Error(), "positive") {
			t.Errorf("serve -ingest.maxBuffered=%s: %v; want a usage error naming the flag and its value", v, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "p")); !os.IsNotExist(err) {
		t.Errorf("the pipeline's directory was made before the flags were checked: %v", err)
	}
}

// TestTokenServes: the entry gpuledger token prints, put in a token file,
// lets its secret through serve, and no other.
func TestTokenServes(t *testing.T) {
	chdirRoot(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "-name", "finops", "-scope", "viewer"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	secret := strings.TrimSpace(lines[1])
	var entry string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "- {name: finops") {
			entry = strings.TrimSpace(l)
		}
	}
	if !strings.HasPrefix(secret, "glt_") || entry == "" {
		t.Fatalf("token output:\n%s", out.String())
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("tokens:\n  "+entry+"\n"), 0o600)
	addr := testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-config", "examples/cluster.yaml", "-ledger.path", filepath.Join(dir, "l"),
			"-ingest.dir", filepath.Join(dir, "p"), "-http.listenAddr", addr, "-auth.tokensFile", tokens, "-log.level", "error"}, &bytes.Buffer{})
	}()
	get := func(token string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/cost?from=2026-10&to=2026-11", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for get(secret) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if code := get(secret); code != http.StatusOK {
		t.Errorf("the token's secret: %d, want 200", code)
	}
	if code := get("glt_wrong"); code != http.StatusUnauthorized {
		t.Errorf("another secret: %d, want 401", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// TestReportEmptyMonth: a report of a month the ledger has nothing of is
// an error that says so, not an invoice of zeros.
func TestReportEmptyMonth(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	empty, err := embedded.Open(filepath.Join(dir, "l"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty.Close()
	err = run(context.Background(), []string{"report", "-month", "2026-09", "-ledger.path", filepath.Join(dir, "l"), "-out", dir}, &bytes.Buffer{})
	if !errors.Is(err, reports.ErrNoData) || !strings.Contains(err.Error(), "holds no rows for 2026-09") {
		t.Errorf("report of an empty month: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "chargeback-*")); len(files) != 0 {
		t.Errorf("wrote %v", files)
	}
}
