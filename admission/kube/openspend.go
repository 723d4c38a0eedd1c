package kube

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// openSpend is what the admitted Workloads have cost since the ledger's
// newest hour ended (settled; zero: since their admission), by team, or by
// ClusterQueue with byCQ: each Workload's GPUs of each flavor at the
// flavor's price, from the later of its admission and settled to the
// earlier of its Finished time and now, decayed with halfLife from the
// middle of that span, as admission.LedgerSpend decays an hour from its
// middle (micros).
//
// The ledger holds an hour once it has ended and been ingested, so the
// weights it alone gives lag the spend by an hour or more: on the
// mechanism scenario at a one-hour half-life that raised costfair's money
// gap in the simulator's model of the controller by 0.027-0.045
// (docs/policy-eval/mechanism-controller.txt). What Kueue says
// was admitted is the next best fact until the hour settles. A Workload
// evicted before it finished, and so no longer Admitted, is not counted:
// its ledger hour counts it when it settles. objectTime maps the times
// Kubernetes wrote onto now's clock (nil: the same clock).
func openSpend(t *Teams, workloads []*unstructured.Unstructured, now, settled time.Time, halfLife time.Duration,
	objectTime func(time.Time) time.Time, byCQ bool) map[string]float64 {
	out := map[string]float64{}
	if halfLife <= 0 {
		return out
	}
	if objectTime == nil {
		objectTime = func(at time.Time) time.Time { return at }
	}
	for _, w := range workloads {
		admittedAt, ok := condition(w, "Admitted")
		if !ok || admittedAt.IsZero() {
			continue
		}
		cq, _, _ := unstructured.NestedString(w.Object, "status", "admission", "clusterQueue")
		key := cq
		if !byCQ {
			key = t.Team(w.GetNamespace(), cq)
		}
		if key == "" {
			continue
		}
		from, to := objectTime(admittedAt), now
		if from.Before(settled) {
			from = settled
		}
		if at, finished := condition(w, "Finished"); finished {
			if at = objectTime(at); at.Before(to) {
				to = at
			}
		}
		if !to.After(from) {
			continue
		}
		mid := from.Add(to.Sub(from) / 2)
		decay := math.Exp2(-now.Sub(mid).Seconds() / halfLife.Seconds())
		for flavor, gpus := range demand(w).GPUsByFlavor {
			out[key] += gpus * float64(t.PriceMicrosPerGPUHour[flavor]) * to.Sub(from).Hours() * decay
		}
	}
	return out
}
