package simtoreal

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/internal/kubetest"
)

// loadHeader heads control-plane.csv: for each trace hour of a real run,
// what Kueue's scheduler did (its cycles, their time, and their share of
// the hour's real time), what it had pending, and the CPU cores each
// process used on average over the hour (gpuledger is this process: the
// replay and the controller).
const loadHeader = "hour,real_s,kueue_cycles,kueue_admitting_cycles,kueue_cycle_s,kueue_busy,pending_active,pending_inadmissible,cores_etcd,cores_kube_apiserver,cores_kueue,cores_gpuledger"

// loadLog writes control-plane.csv: whether the control plane kept up
// with the sped-up clock. A figure that cannot be read is left empty and
// logged once per hour to warn.
type loadLog struct {
	stack *kubetest.Stack
	w     io.Writer
	warn  func(error)
	last  time.Time
	prev  map[string]float64 // Kueue's counters and each process's CPU seconds at last
	read  bool               // whether Kueue's were read then
}

func newLoadLog(s *kubetest.Stack, w io.Writer, warn func(error)) *loadLog {
	l := &loadLog{stack: s, w: w, warn: warn}
	fmt.Fprintln(w, loadHeader)
	// Kueue may serve its metrics a moment after its webhooks, by which
	// the stack is ready: the first read gets 10 s.
	for try := 0; try < 20 && !l.read; try++ {
		if try > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		l.last = time.Now()
		l.prev, l.read = l.sample(context.Background())
	}
	return l
}

// sample reads Kueue's counters and the processes' CPU seconds, and says
// whether Kueue's were read (a counter Kueue does not show yet is 0).
func (l *loadLog) sample(ctx context.Context) (map[string]float64, bool) {
	cur := map[string]float64{}
	m, err := l.stack.KueueMetrics(ctx)
	if err != nil {
		l.warn(err)
	}
	for k, v := range m {
		cur[k] = v
	}
	for name, sec := range l.stack.CPUSeconds() {
		cur["cpu:"+name] = sec
	}
	if sec, err := kubetest.ProcessCPUSeconds(0); err == nil {
		cur["cpu:gpuledger"] = sec
	}
	return cur, err == nil
}

// hour writes the row of the trace hour that just ended.
func (l *loadLog) hour(ctx context.Context, h int) {
	// The last hour ends as the replay does: its figures are read all
	// the same.
	now := time.Now()
	cur, read := l.sample(context.WithoutCancel(ctx))
	wall := now.Sub(l.last).Seconds()
	// Kueue has a counter once it counts: one that was not there an
	// hour ago was 0.
	delta := func(k string) string {
		if !l.read || !read {
			return ""
		}
		return fmt.Sprintf("%.4g", cur[k]-l.prev[k])
	}
	rate := func(k string) string {
		c, ok := cur[k]
		p, had := l.prev[k]
		if strings.HasPrefix(k, "kueue_") {
			ok, had = read, l.read
		}
		if !ok || !had || wall <= 0 {
			return ""
		}
		return fmt.Sprintf("%.3f", (c-p)/wall)
	}
	gauge := func(k string) string {
		if v, ok := cur[k]; ok || read {
			return fmt.Sprintf("%g", v)
		}
		return ""
	}
	fmt.Fprintf(l.w, "%d,%.1f,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", h, wall,
		delta("kueue_admission_attempts_total"), delta(`kueue_admission_attempts_total{result="success"}`),
		delta("kueue_admission_attempt_duration_seconds_sum"), rate("kueue_admission_attempt_duration_seconds_sum"),
		gauge(`kueue_pending_workloads{status="active"}`), gauge(`kueue_pending_workloads{status="inadmissible"}`),
		rate("cpu:etcd"), rate("cpu:kube-apiserver"), rate("cpu:kueue"), rate("cpu:gpuledger"))
	l.last, l.prev, l.read = now, cur, read
}
