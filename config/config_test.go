package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestBadConfigs checks that each testdata/*.bad.yaml gets every one of its
// problems listed, as in its .golden file.
func TestBadConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/*.bad.yaml")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := Load(file)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load(%s) = %v, want a config.Error", file, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGoodConfigs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	files = append(files, "../examples/cluster.yaml")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.AttributionModel("")
			if err != nil {
				t.Fatal(err)
			}
			if len(m.GPUs) == 0 || m.HourlyCostMicros() <= 0 {
				t.Errorf("model has %d GPUs costing %d an hour", len(m.GPUs), m.HourlyCostMicros())
			}
		})
	}
}

// TestExampleModel pins the example cluster: 64 GPUs, 48 H100 at 6.88 and
// 16 A100 at 3.4309 per GPU-hour.
func TestExampleModel(t *testing.T) {
	c, err := Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.AttributionModel("gpu-prod-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.HourlyCostMicros(), int64(48*6_880_000+16*3_430_900); got != want {
		t.Errorf("hourly cost %d, want %d", got, want)
	}
	if len(m.GPUs) != 64 {
		t.Errorf("%d GPUs, want 64", len(m.GPUs))
	}
	if got := m.ClusterQueueTeams["nlp-serving"]; got != "nlp" {
		t.Errorf("nlp-serving belongs to %q, want nlp", got)
	}
	if _, err := c.AttributionModel("nope"); err == nil {
		t.Error("unknown cluster accepted")
	}
}

func TestMoneyIsExact(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(mustRead(t, "testdata/minimal.good.yaml"), "perGPUHour: 2.5", "perGPUHour: 0.1", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PriceMicros("a100"); got != 100_000 {
		t.Errorf("price %d micros, want 100000", got)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParse: no input makes Parse panic, and an accepted config builds a
// model.
func FuzzParse(f *testing.F) {
	for _, pat := range []string{"testdata/*.yaml", "../examples/*.yaml"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("error %v is not a config.Error with problems", err)
			}
			return
		}
		for _, cl := range c.Clusters {
			if _, err := c.AttributionModel(cl.Name); err != nil {
				t.Fatalf("valid config, but model for %q: %v", cl.Name, err)
			}
		}
	})
}
