package simtoreal

import (
	"context"
	"fmt"
	"io"
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
	prev  loadSample
}

// loadSample is what the control plane had done by a moment.
type loadSample struct {
	// kueue are Kueue's metrics (kubetest.SeriesSums); nil when they
	// could not be read. A counter Kueue does not show yet is 0.
	kueue map[string]float64
	// cpu is each process's CPU seconds by name, gpuledger this one.
	cpu map[string]float64
}

func newLoadLog(s *kubetest.Stack, w io.Writer, warn func(error)) *loadLog {
	l := &loadLog{stack: s, w: w, warn: warn}
	fmt.Fprintln(w, loadHeader)
	// Kueue may serve its metrics a moment after its webhooks, by which
	// the stack is ready: the first read gets 10 s.
	for try := 0; try < 20 && l.prev.kueue == nil; try++ {
		if try > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		l.last = time.Now()
		l.prev = l.sample(context.Background())
	}
	return l
}

// sample reads Kueue's metrics and the processes' CPU seconds.
func (l *loadLog) sample(ctx context.Context) loadSample {
	m, err := l.stack.KueueMetrics(ctx)
	if err != nil {
		l.warn(err)
	}
	cpu := l.stack.CPUSeconds()
	if sec, err := kubetest.ProcessCPUSeconds(0); err == nil {
		cpu["gpuledger"] = sec
	}
	return loadSample{kueue: m, cpu: cpu}
}

// hour writes the row of the trace hour that just ended.
func (l *loadLog) hour(ctx context.Context, h int) {
	// The last hour ends as the replay does: its figures are read all
	// the same.
	now := time.Now()
	cur := l.sample(context.WithoutCancel(ctx))
	wall := now.Sub(l.last).Seconds()
	kueueRead := l.prev.kueue != nil && cur.kueue != nil
	delta := func(k string) string {
		if !kueueRead {
			return ""
		}
		return fmt.Sprintf("%.4g", cur.kueue[k]-l.prev.kueue[k])
	}
	perSecond := func(c, p float64, ok bool) string {
		if !ok || wall <= 0 {
			return ""
		}
		return fmt.Sprintf("%.3f", (c-p)/wall)
	}
	gauge := func(k string) string {
		if cur.kueue == nil {
			return ""
		}
		return fmt.Sprintf("%g", cur.kueue[k])
	}
	cores := func(name string) string {
		c, ok := cur.cpu[name]
		p, had := l.prev.cpu[name]
		return perSecond(c, p, ok && had)
	}
	const cycleSeconds = "kueue_admission_attempt_duration_seconds_sum"
	fmt.Fprintf(l.w, "%d,%.1f,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", h, wall,
		delta("kueue_admission_attempts_total"), delta(`kueue_admission_attempts_total{result="success"}`),
		delta(cycleSeconds), perSecond(cur.kueue[cycleSeconds], l.prev.kueue[cycleSeconds], kueueRead),
		gauge(`kueue_pending_workloads{status="active"}`), gauge(`kueue_pending_workloads{status="inadmissible"}`),
		cores("etcd"), cores("kube-apiserver"), cores("kueue"), cores("gpuledger"))
	l.last, l.prev = now, cur
}
