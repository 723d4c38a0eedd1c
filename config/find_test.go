package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gpuledger/gpuledger/internal/flagutil"
)

// TestFind: -config, then $GPULEDGER_CONFIG, then the standard path, then
// the example of a checkout; outside a checkout with none of them, a
// usage error that says what to do.
func TestFind(t *testing.T) {
	t.Setenv(Env, "")
	if p, why, err := Find("x.yaml"); p != "x.yaml" || why != "-config" || err != nil {
		t.Errorf("flag: %s %s %v", p, why, err)
	}
	t.Setenv(Env, "/cfg/from-env.yaml")
	if p, why, _ := Find(""); p != "/cfg/from-env.yaml" || why != "$GPULEDGER_CONFIG" {
		t.Errorf("env: %s %s", p, why)
	}
	t.Setenv(Env, "")
	if _, err := os.Stat(Standard); err == nil {
		t.Skip(Standard + " exists on this machine")
	}
	t.Chdir("..")
	if p, why, _ := Find(""); p != Example || !strings.Contains(why, "example") {
		t.Errorf("checkout: %s %s", p, why)
	}
	var sb strings.Builder
	if cfg, path, err := Locate("", &sb); err != nil || path != Example || len(cfg.Clusters) == 0 || !strings.Contains(sb.String(), "configuration examples/cluster.yaml (from the example of this checkout)") {
		t.Errorf("Locate in a checkout: %v %s %q", err, path, sb.String())
	}
	t.Chdir(t.TempDir())
	var ue flagutil.UsageError
	if _, _, err := Find(""); !errors.As(err, &ue) || !strings.Contains(err.Error(), "pass -config, set GPULEDGER_CONFIG") {
		t.Errorf("nowhere: %v", err)
	}
}
