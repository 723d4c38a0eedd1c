package ingest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// item is a stamped value; seq tells equal stamps apart, so that a
// comparison with a stable sort checks the order of ties too.
type item struct {
	ms  int64
	seq int
}

// TestTimeQueueOrderIsAStableSort: merging each batch into the waiting
// items gives what a stable sort of all of them gives, whatever the
// batches (in order or not, late by a little or a lot, ties), with
// releases from the head between them.
func TestTimeQueueOrderIsAStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	at := func(x *item) int64 { return x.ms }
	for run := range 300 {
		var q timeQueue[item]
		var want []item
		seq := 0
		for range 1 + rng.IntN(30) {
			base := rng.Int64N(1000)
			n := rng.IntN(20)
			batch := make([]item, n)
			for i := range batch {
				batch[i] = item{base + rng.Int64N(50), seq}
				seq++
			}
			if rng.IntN(4) > 0 {
				slices.SortStableFunc(batch, func(a, b item) int { return cmp.Compare(a.ms, b.ms) })
			}
			q.items = append(q.items, batch...)
			want = append(want, batch...)
			q.order(at)
			slices.SortStableFunc(want, func(a, b item) int { return cmp.Compare(a.ms, b.ms) })
			if diff := gocmp.Diff(want, q.peek(), gocmp.AllowUnexported(item{})); diff != "" {
				t.Fatalf("run %d: (-stable sort +queue)\n%s", run, diff)
			}
			// Release a few from the head, as the window passes.
			r := rng.IntN(len(want) + 1)
			q.head += r
			want = want[r:]
			q.compact()
		}
	}
}
