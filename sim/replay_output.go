package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/gpuledger/gpuledger/ledger"
)

// WriteReplayTable prints one row per policy: JCT, waits per size class
// (or Kueue class), utilisation, fairness, partial gangs and preemptions.
func WriteReplayTable(w io.Writer, results []ReplayResult, classes []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "policy\tavg JCT s\tp95 JCT s\t")
	for _, c := range classes {
		fmt.Fprintf(tw, "wait %s s\t", c)
	}
	fmt.Fprintln(tw, "max wait s\tutil\tutil (window)\tJain backlogged\tmoney gap\tmoney gap p95\tFTF mean\tFTF worst queue\tpartial GPU-h\tevictions\tpreemptions\tlost GPU-h\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t", r.Policy, r.AvgJCTSeconds, r.P95JCTSeconds)
		for _, c := range classes {
			fmt.Fprintf(tw, "%.1f\t", r.WaitBySize[c])
		}
		fmt.Fprintf(tw, "%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%.1f\t%d\t%d\t%.1f\t\n", r.MaxWaitSeconds, r.Utilization, r.UtilizationWindow, r.JainBacklogged,
			r.MoneyGap, r.MoneyGapP95, r.FTFMean, r.FTFMaxQueue,
			r.PartialGangGPUHours, r.Evictions, r.Preemptions, r.PreemptedGPUHours)
	}
	return tw.Flush()
}

// SaveReplayResults writes the results to dir as simulate.json and
// simulate.csv (one CSV row per policy and queue, with the queue's cost)
// and returns their paths.
func SaveReplayResults(dir string, results []ReplayResult, classes []string) (jsonPath, csvPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	jsonPath, csvPath = filepath.Join(dir, "simulate.json"), filepath.Join(dir, "simulate.csv")
	b, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
		return "", "", err
	}
	f, err := os.Create(csvPath)
	if err != nil {
		return "", "", err
	}
	w := csv.NewWriter(f)
	header := []string{"policy", "gating", "jobs", "finished", "avg_jct_s", "p95_jct_s"}
	for _, c := range classes {
		header = append(header, "wait_"+c+"_s")
	}
	w.Write(append(header, "max_wait_s", "utilization", "utilization_window", "jain", "jain_cost", "jain_backlogged", "money_gap", "money_gap_p95", "ftf_mean", "ftf_worst_queue", "partial_gang_gpu_hours",
		"evictions", "preemptions", "preempted_gpu_hours", "queue", "queue_max_wait_s", "cost"))
	for _, r := range results {
		qs := make([]string, 0, len(r.CostMicrosByQueue))
		for q := range r.CostMicrosByQueue {
			qs = append(qs, q)
		}
		sort.Strings(qs)
		for _, q := range qs {
			rec := []string{r.Policy, strconv.FormatBool(r.Gating), strconv.Itoa(r.Jobs), strconv.Itoa(r.Finished),
				ff(r.AvgJCTSeconds), ff(r.P95JCTSeconds)}
			for _, c := range classes {
				rec = append(rec, ff(r.WaitBySize[c]))
			}
			rec = append(rec, ff(r.MaxWaitSeconds), ff(r.Utilization), ff(r.UtilizationWindow), ff(r.Jain), ff(r.JainCost), ff(r.JainBacklogged), ff(r.MoneyGap), ff(r.MoneyGapP95),
				ff(r.FTFMean), ff(r.FTFMaxQueue), ff(r.PartialGangGPUHours), strconv.Itoa(r.Evictions), strconv.Itoa(r.Preemptions), ff(r.PreemptedGPUHours), q,
				ff(r.MaxWaitByQueue[q]), ledger.FormatMicros(r.CostMicrosByQueue[q]))
			w.Write(rec)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return "", "", err
	}
	return jsonPath, csvPath, f.Close()
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
