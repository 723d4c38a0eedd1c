package simtoreal

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gpuledger/gpuledger/sim"
)

// outcomesHeader is outcomes.csv's first line: Run writes it and
// ReadOutcomes wants it.
var outcomesHeader = []string{"policy", "world", "run", "job", "queue", "gpus", "flavor", "submit_s", "start_s", "finish_s"}

// ReadOutcomes reads the real Kueue's outcomes of policy from an
// outcomes.csv that Run wrote (-kueue.outcomes), by run number: a kept
// run analysed again without running it again. A finish of 0 is a job
// still running at the end, as Run writes it.
func ReadOutcomes(r io.Reader, policy string) (map[int][]sim.JobOutcome, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(outcomesHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("outcomes header: %w; want the outcomes.csv sim-to-real writes", err)
	}
	if !slices.Equal(head, outcomesHeader) {
		return nil, fmt.Errorf("outcomes header %q: want %q (the outcomes.csv sim-to-real writes)", head, outcomesHeader)
	}
	out := map[int][]sim.JobOutcome{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("outcomes: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if rec[0] != policy || rec[1] != "kueue" {
			continue
		}
		run, err := strconv.Atoi(rec[2])
		if err != nil || run < 1 {
			return nil, fmt.Errorf("outcomes line %d: run %q: want a run number from 1", line, rec[2])
		}
		gpus, err := strconv.Atoi(rec[5])
		if err != nil || gpus < 1 {
			return nil, fmt.Errorf("outcomes line %d: gpus %q: want a whole number from 1", line, rec[5])
		}
		var at [3]time.Duration
		for i, name := range outcomesHeader[7:] {
			s, err := strconv.ParseFloat(rec[7+i], 64)
			if err != nil || s < 0 || s > math.MaxInt64/float64(time.Second) || math.IsNaN(s) {
				return nil, fmt.Errorf("outcomes line %d: %s %q: want seconds from the trace's start, 0 or more", line, name, rec[7+i])
			}
			at[i] = time.Duration(s * float64(time.Second))
		}
		if at[1] < at[0] || (at[2] != 0 && at[2] < at[1]) {
			return nil, fmt.Errorf("outcomes line %d: submit %s, start %s, finish %s: want submit ≤ start ≤ finish (finish 0: still running)", line, rec[7], rec[8], rec[9])
		}
		if rec[3] == "" || rec[4] == "" || rec[6] == "" {
			return nil, fmt.Errorf("outcomes line %d: job %q, queue %q, flavor %q: want all three", line, rec[3], rec[4], rec[6])
		}
		out[run] = append(out[run], sim.JobOutcome{ID: rec[3], Queue: rec[4], GPUs: gpus, Flavor: rec[6], Submit: at[0], Start: at[1], Finish: at[2]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("outcomes: no real Kueue run of policy %q (world kueue); want a file from sim-to-real -worlds sim,kueue with that policy", policy)
	}
	return out, nil
}
