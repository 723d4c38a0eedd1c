package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Gavel generates Gavel's synthetic job mix for the given queues: sizes of
// 1, 2, 4 or 8 GPUs with probabilities 0.7, 0.1, 0.15 and 0.05; durations
// 60·10^U(1.5, 3) s with probability 0.8, else 60·10^U(3, 4) s; Poisson
// arrivals at jobsPerHour in all, spread over the queues in proportion to
// their quotas, for span. The same seed gives the same jobs.
func Gavel(queues []TraceQueue, jobsPerHour float64, span time.Duration, seed uint64) []TraceJob {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	var total int
	for _, q := range queues {
		total += q.NominalGPUs
	}
	var jobs []TraceJob
	t := time.Duration(0)
	for n := 0; ; n++ {
		t += time.Duration(rng.ExpFloat64() / jobsPerHour * float64(time.Hour))
		if t >= span || total == 0 {
			break
		}
		// A queue, in proportion to its quota.
		pick := rng.IntN(total)
		q := queues[0]
		for _, c := range queues {
			if pick < c.NominalGPUs {
				q = c
				break
			}
			pick -= c.NominalGPUs
		}
		size := gavelSize(rng, GPUsPerNode)
		dur := gavelDuration(rng)
		jobs = append(jobs, TraceJob{ID: fmt.Sprintf("gavel-%06d", n), Queue: q.Name, Submit: t, Duration: dur,
			GPUs: size, Pods: size, PerPod: 1})
	}
	return jobs
}
