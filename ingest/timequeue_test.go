package ingest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// item is a stamped value; seq tells equal stamps apart, so that a
// comparison with a stable sort checks the order of ties too.
type item struct {
	ms  int64
	seq int
}

// TestTimeQueueOrderIsAStableSort: the queue gives its items out in the
// order a stable sort of all of them gives, whatever the batches (in
// order or not, late by a little or a lot, ties), with items taken out
// between them; and all (the snapshot) lists them in that order.
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
			q.pending = append(q.pending, batch...)
			want = append(want, batch...)
			q.order(at, func(*item) int64 { return 1 })
			slices.SortStableFunc(want, func(a, b item) int { return cmp.Compare(a.ms, b.ms) })
			if diff := gocmp.Diff(want, q.all(), gocmp.AllowUnexported(item{}), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("run %d: (-stable sort +queue)\n%s", run, diff)
			}
			if q.len() != len(want) {
				t.Fatalf("run %d: len %d, want %d", run, q.len(), len(want))
			}
			// Take a few out, as the window passes: oldest first, ties in
			// the order they came.
			for range rng.IntN(len(want) + 1) {
				if got := *q.first(); got != want[0] {
					t.Fatalf("run %d: first %+v, want %+v", run, got, want[0])
				}
				q.pop()
				want = want[1:]
			}
			if len(want) == 0 && q.first() != nil {
				t.Fatalf("run %d: empty queue has a first item", run)
			}
		}
	}
}

// TestTimeQueueReusesRuns: once runs have been taken out, a request's
// items go into the slices they held: adding a request of the size seen
// before allocates nothing for its items.
func TestTimeQueueReusesRuns(t *testing.T) {
	var q timeQueue[item]
	at := func(x *item) int64 { return x.ms }
	ms := int64(0)
	cycle := func() {
		for range 4 { // a scrape's requests
			for range 1000 {
				q.pending = append(q.pending, item{ms: ms})
			}
			q.order(at, func(*item) int64 { return 1 })
		}
		ms++
		for q.len() > 0 { // the window passes
			q.pop()
		}
	}
	cycle()
	// What is left is the heap's slice of runs, grown once, and one
	// timeRun a request.
	if allocs := testing.AllocsPerRun(20, cycle); allocs > 4 {
		t.Errorf("%.0f allocations a scrape of 4 requests of 1,000 items each: their items are not put in the slices of runs taken out", allocs)
	}
}

// all returns the waiting items in the order they will be taken out.
func (q *timeQueue[T]) all() []T {
	type pos struct {
		seq uint64
		i   int
		r   *timeRun[T]
	}
	var ps []pos
	for _, r := range q.heap {
		for i := r.head; i < len(r.items); i++ {
			ps = append(ps, pos{r.seq, i, r})
		}
	}
	at := q.at
	slices.SortFunc(ps, func(a, b pos) int {
		return cmp.Or(cmp.Compare(at(&a.r.items[a.i]), at(&b.r.items[b.i])), cmp.Compare(a.seq, b.seq), cmp.Compare(a.i, b.i))
	})
	out := make([]T, len(ps))
	for k, p := range ps {
		out[k] = p.r.items[p.i]
	}
	return out
}
