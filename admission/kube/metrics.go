package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
)

// queueWeight is what the controller last decided for one LocalQueue or
// ClusterQueue.
type queueWeight struct {
	team    string
	cohort  string  // a ClusterQueue's cohort, a Cohort's parent
	weight  float64 // the target, written or (dry run) not
	changes int64   // writes (or, dry run, would-be writes)
}

// labelValue escapes a Prometheus label value.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// weightSamples are the change-count and weight samples (labels and value)
// of the queues in m, by key, labelled by label. Called with c.mu held.
func weightSamples(m map[string]*queueWeight, label func(k string, qw *queueWeight) string) (changes, weights []string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l := label(k, m[k])
		changes = append(changes, fmt.Sprintf("%s %d", l, m[k].changes))
		weights = append(weights, fmt.Sprintf("%s %g", l, m[k].weight))
	}
	return changes, weights
}

// WriteMetrics writes the controller's own metrics in the Prometheus text
// format: what it answered, what it changed, and each LocalQueue's weight.
func (c *Controller) WriteMetrics(w io.Writer) error {
	var b strings.Builder
	counter := func(name, help string, samples ...string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for _, s := range samples {
			b.WriteString(name + s + "\n")
		}
	}
	st := &c.Stats
	counter("gpuledger_controller_budget_checks_total", "Budget AdmissionCheck answers written, by result.",
		fmt.Sprintf(`{result="ready"} %d`, st.ChecksReady.Load()),
		fmt.Sprintf(`{result="held"} %d`, st.ChecksHeld.Load()),
		fmt.Sprintf(`{result="failed_open"} %d`, st.ChecksFailedOpen.Load()))
	counter("gpuledger_controller_errors_total", "Failed API or ledger operations (each is logged).", fmt.Sprintf(" %d", st.Errors.Load()))
	c.mu.Lock()
	changes, weights := weightSamples(c.weights, func(k string, qw *queueWeight) string {
		ns, name, _ := strings.Cut(k, "/")
		return fmt.Sprintf(`{namespace="%s",localqueue="%s",team="%s"}`, labelValue.Replace(ns), labelValue.Replace(name), labelValue.Replace(qw.team))
	})
	cqChanges, cqWeights := weightSamples(c.cqWeights, func(k string, qw *queueWeight) string {
		return fmt.Sprintf(`{clusterqueue="%s",cohort="%s",team="%s"}`, labelValue.Replace(k), labelValue.Replace(qw.cohort), labelValue.Replace(qw.team))
	})
	cohortChanges, cohortWeights := weightSamples(c.cohortWeights, func(k string, qw *queueWeight) string {
		return fmt.Sprintf(`{cohort="%s",parent="%s"}`, labelValue.Replace(k), labelValue.Replace(qw.cohort))
	})
	dry := 0
	if c.o.DryRun {
		dry = 1
	}
	c.writePending(&b)
	c.mu.Unlock()
	counter("gpuledger_controller_weight_changes_total", "fairSharing.weight changes per LocalQueue (in dry-run mode: the changes it would have written).", changes...)
	fmt.Fprintf(&b, "# HELP gpuledger_controller_localqueue_weight The fairSharing.weight gpuledger wants for the LocalQueue.\n# TYPE gpuledger_controller_localqueue_weight gauge\n")
	for _, s := range weights {
		b.WriteString("gpuledger_controller_localqueue_weight" + s + "\n")
	}
	if c.o.ClusterQueueWeights {
		counter("gpuledger_controller_clusterqueue_weight_changes_total", "fairSharing.weight changes per ClusterQueue (in dry-run mode: the changes it would have written).", cqChanges...)
		fmt.Fprintf(&b, "# HELP gpuledger_controller_clusterqueue_weight The fairSharing.weight gpuledger wants for the ClusterQueue in its cohort.\n# TYPE gpuledger_controller_clusterqueue_weight gauge\n")
		for _, s := range cqWeights {
			b.WriteString("gpuledger_controller_clusterqueue_weight" + s + "\n")
		}
		counter("gpuledger_controller_cohort_weight_changes_total", "fairSharing.weight changes per Cohort object under another (in dry-run mode: the changes it would have written).", cohortChanges...)
		fmt.Fprintf(&b, "# HELP gpuledger_controller_cohort_weight The fairSharing.weight gpuledger wants for the Cohort among its parent's children.\n# TYPE gpuledger_controller_cohort_weight gauge\n")
		for _, s := range cohortWeights {
			b.WriteString("gpuledger_controller_cohort_weight" + s + "\n")
		}
	}
	fmt.Fprintf(&b, "# HELP gpuledger_controller_dry_run 1 when weights are computed but not written.\n# TYPE gpuledger_controller_dry_run gauge\ngpuledger_controller_dry_run %d\n", dry)
	_, err := io.WriteString(w, b.String())
	return err
}

// ServeMetrics serves the controller's /metrics and /healthz on addr until
// ctx ends or stop is called.
func (c *Controller) ServeMetrics(ctx context.Context, addr string) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		c.WriteMetrics(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go srv.Serve(l)
	return func() { srv.Close() }, nil
}
