package capacity

import "testing"

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
