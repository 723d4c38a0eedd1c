package kubetest

import (
	"context"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStackAdmits: the real Kueue admits Workloads within quota: two of
// 4 GPUs in a queue of 8, the third waits. (Which two is Kueue's business:
// creation times are in seconds.)
func TestStackAdmits(t *testing.T) {
	testenv.Slow(t, "a Kubernetes control plane")
	s := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Apply(ctx, ClusterQueue("team-a", "h100", 8, "")+"---\n"+Namespace("team-a", "q", "team-a")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w1", "w2", "w3"} {
		if err := s.Apply(ctx, Workload("team-a", name, "q", 1, 4, 0)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	count := func() (int, map[string]bool) {
		list, err := s.Dynamic.Resource(WorkloadsGVR).Namespace("team-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		admitted := map[string]bool{}
		n := 0
		for _, w := range list.Items {
			admitted[w.GetName()] = Admitted(&w)
			if admitted[w.GetName()] {
				n++
			}
		}
		return n, admitted
	}
	WaitFor(t, time.Minute, "two workloads admitted", func() bool { n, _ := count(); return n >= 2 })
	time.Sleep(2 * time.Second)
	if n, admitted := count(); n != 2 {
		t.Fatalf("%d admitted in a quota of two 4-GPU workloads: %v", n, admitted)
	}
	// Kueue's own metrics say the same: its scheduler's cycles, two of
	// them admitting, and the third workload pending.
	m, err := s.KueueMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := m[`kueue_admission_attempts_total{result="success"}`]; got < 2 {
		t.Errorf("kueue_admission_attempts_total{result=\"success\"} %g, want at least the 2 admissions", got)
	}
	if got := m["kueue_admission_attempt_duration_seconds_sum"]; got <= 0 {
		t.Errorf("kueue_admission_attempt_duration_seconds_sum %g, want the cycles' time", got)
	}
	if got := m["kueue_pending_workloads"]; got != 1 {
		t.Errorf("kueue_pending_workloads %g, want the 1 workload that waits", got)
	}
	cpu := s.CPUSeconds()
	for _, name := range []string{"etcd", "kube-apiserver", "kueue"} {
		if cpu[name] <= 0 {
			t.Errorf("CPU seconds of %s: %g, want its time so far (all: %v)", name, cpu[name], cpu)
		}
	}
}
