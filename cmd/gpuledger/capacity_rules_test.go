package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRulesCommand: gpuledger rules on the example configuration records
// every flavor's held and busy GPUs (the MIG flavor's slices as whole-GPU
// equivalents), and each ClusterQueue's held
// and busy devices over the namespaces of its LocalQueues (MIG slices
// too, for the notebooks queue on h100-mig), and writes both alerts.
func TestRulesCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rules", "-config=../../examples/cluster.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	doc := out.String()
	for _, want := range []string{
		`resource=\"nvidia_com_mig_3g_40gb\"`, `GPU_I_PROFILE=\"1g.10gb\"`,
		"record: gpuledger:gpus:active_ratio",
		"alert: GPUCapacityReclaim",
		`namespace=~\"research|research-exp\"`,
		`resource=~\"nvidia_com_gpu|nvidia_com_mig_.+\",namespace=~\"ds-notebooks\"`,
		"labels: {cluster: \"", "trigger: queue_wait",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("rules lack %q", want)
		}
	}
	if n := strings.Count(doc, "record: gpuledger:cluster_queue:busy_gpus"); n != 4 {
		t.Errorf("%d queues' busy devices recorded, want the 4 ClusterQueues with LocalQueues", n)
	}
}
