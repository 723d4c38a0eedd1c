package capacity

import (
	"strconv"
	"strings"
	"testing"
)

// The KEDA object scales the workload that serves the endpoint: a
// ReplicaSet's Deployment (its name less the pod-template hash, only when
// the suffix looks like one), a LeaderWorkerSet as itself, else a
// Deployment named after the model.
func TestKEDATargetForWorkload(t *testing.T) {
	base := KEDATarget{Query: `sum(rate(http_requests_total{service="%s"}[1m]))`}
	for _, tc := range []struct {
		kind, name, model  string
		wantName, wantKind string
	}{
		{"ReplicaSet", "llama-7d9f8b6c5", "meta/llama-3", "llama", ""},
		{"ReplicaSet", "llama-server", "meta/llama-3", "llama-server", ""}, // vowels: not a hash
		{"ReplicaSet", "llama-Ab12c", "m", "llama-Ab12c", ""},
		{"ReplicaSet", "vllm-5c8d94f7b", "m", "vllm", ""},
		{"ReplicaSet", "vllm-abc", "m", "vllm-abc", ""},
		{"Deployment", "vllm", "m", "vllm", ""},
		{"LeaderWorkerSet", "big", "m", "big", "LeaderWorkerSet"},
		{"", "", "Meta/Llama_3.1", "meta-llama-3-1", ""},
	} {
		got := base.ForWorkload("serving", tc.kind, tc.name, tc.model)
		if got.Name != tc.wantName || got.Namespace != "serving" || got.Kind != tc.wantKind {
			t.Errorf("%s/%s (model %s): %s/%s kind %q, want serving/%s kind %q", tc.kind, tc.name, tc.model, got.Namespace, got.Name, got.Kind, tc.wantName, tc.wantKind)
		}
		if tc.wantKind == "LeaderWorkerSet" && got.APIVersion != "leaderworkerset.x-k8s.io/v1" {
			t.Errorf("LeaderWorkerSet's apiVersion: %q", got.APIVersion)
		}
		if want := `sum(rate(http_requests_total{service="` + tc.wantName + `"}[1m]))`; got.Query != want {
			t.Errorf("query %q, want %q", got.Query, want)
		}
	}
}

func TestParseColdStarts(t *testing.T) {
	got, err := ParseColdStarts(" m-small=1:30s, deepseek-r1=8:900s,", 500_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["m-small"].GPUsPerReplica != 1 || got["m-small"].Load.Seconds() != 30 ||
		got["deepseek-r1"].GPUsPerReplica != 8 || got["deepseek-r1"].PenaltyMicros != 500_000 {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"m-small", "m-small=1", "=1:30s", "m=0:30s", "m=x:30s", "m=1:-5s", "m=1:soon"} {
		if _, err := ParseColdStarts(bad, 0); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) || !strings.Contains(err.Error(), "want model=GPUs:load") {
			t.Errorf("%q: %v; want an error naming the item and what was expected", bad, err)
		}
	}
}

func FuzzParseColdStarts(f *testing.F) {
	f.Add("m-small=1:30s,m-mid=2:120s")
	f.Add("x=8:1h")
	f.Fuzz(func(t *testing.T, v string) {
		got, err := ParseColdStarts(v, 1)
		if err != nil {
			return
		}
		for m, c := range got {
			if m == "" || c.GPUsPerReplica < 1 || c.Load < 0 {
				t.Fatalf("%q: accepted %q as %+v", v, m, c)
			}
		}
	})
}
