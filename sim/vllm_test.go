package sim

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/config"
)

// TestVLLMSeries: the modelled cluster's inference pods serve vLLM's
// series, one of each family per pod, with counters that never fall, and
// requests running by day while the nights have idle scrapes.
func TestVLLMSeries(t *testing.T) {
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	if _, err := m.Run(GenerateMix(cfg, start, 24*time.Hour, 0.85, 3), start, start.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	tel := NewTelemetry(m.Cluster, start, start.Add(24*time.Hour), time.Minute)
	lastTokens := map[string]float64{}
	idle, busy := 0, 0
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		pods := bytes.Count(body, []byte("\nvllm:num_requests_running{"))
		if pods == 0 {
			t.Fatalf("%s: no vLLM series", at)
		}
		for _, fam := range vllmNames[1:] {
			if n := bytes.Count(body, []byte("\n"+fam+"{")); n != pods {
				t.Fatalf("%s: %d %s series for %d pods", at, n, fam, pods)
			}
		}
		for _, line := range bytes.Split(body, []byte("\n")) {
			switch {
			case bytes.HasPrefix(line, []byte("vllm:generation_tokens_total{")):
				i := bytes.LastIndexByte(line, ' ')
				var v float64
				if _, err := fmt.Sscan(string(line[i+1:]), &v); err != nil {
					t.Fatal(err)
				}
				key := string(line[:i])
				if v < lastTokens[key] {
					t.Fatalf("%s: %s fell from %g to %g", at, key, lastTokens[key], v)
				}
				lastTokens[key] = v
			case bytes.HasPrefix(line, []byte("vllm:num_requests_running{")):
				if bytes.HasSuffix(line, []byte(" 0")) {
					if at.Hour() < 6 {
						idle++
					}
				} else if at.Hour() >= 10 && at.Hour() < 18 {
					busy++
				}
			}
		}
	}
	if idle == 0 || busy == 0 {
		t.Errorf("%d idle scrapes at night, %d busy by day; want both", idle, busy)
	}
}
