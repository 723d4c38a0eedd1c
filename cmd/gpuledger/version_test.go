package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoConfigOutsideACheckout: a command run where no configuration is to
// be found says what to do, with a usage error.
func TestNoConfigOutsideACheckout(t *testing.T) {
	t.Setenv("GPULEDGER_CONFIG", "")
	t.Chdir(t.TempDir())
	err := run(context.Background(), []string{"report", "-month=2026-10", "-ledger.path=" + filepath.Join(t.TempDir(), "l")}, &bytes.Buffer{})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no configuration found") {
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
