package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindConfig: -config, then $GPULEDGER_CONFIG, then the standard path,
// then the example of a checkout; outside a checkout with none of them, an
// error that says what to do.
func TestFindConfig(t *testing.T) {
	t.Setenv(configEnv, "")
	if p, why, err := findConfig("x.yaml"); p != "x.yaml" || why != "-config" || err != nil {
		t.Errorf("flag: %s %s %v", p, why, err)
	}
	t.Setenv(configEnv, "/cfg/from-env.yaml")
	if p, why, _ := findConfig(""); p != "/cfg/from-env.yaml" || why != "$GPULEDGER_CONFIG" {
		t.Errorf("env: %s %s", p, why)
	}
	t.Setenv(configEnv, "")
	if _, err := os.Stat(configStandard); err == nil {
		t.Skip(configStandard + " exists on this machine")
	}
	chdirRoot(t)
	if p, why, _ := findConfig(""); p != configExample || !strings.Contains(why, "example") {
		t.Errorf("checkout: %s %s", p, why)
	}
	t.Chdir(t.TempDir())
	var ue usageError
	if _, _, err := findConfig(""); !errors.As(err, &ue) || !strings.Contains(err.Error(), "pass -config, set GPULEDGER_CONFIG") {
		t.Errorf("nowhere: %v", err)
	}
	// A command outside a checkout says the same.
	err := run(context.Background(), []string{"report", "-month=2026-10", "-ledger.path=" + filepath.Join(t.TempDir(), "l")}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no configuration found") {
		t.Errorf("report outside a checkout: %v", err)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out); err != nil || !strings.HasPrefix(out.String(), "gpuledger dev (") ||
		!strings.Contains(out.String(), "go1.") {
		t.Errorf("version: %v %q", err, out.String())
	}
}
