package admission

import (
	"math"
	"testing"
)

// drain takes everything a stream offers.
func drain(p Pending) string {
	var ids string
	for w := p.Next(); w != nil; w = p.Next() {
		if ids != "" {
			ids += ","
		}
		ids += w.ID
	}
	return ids
}

func TestQueues(t *testing.T) {
	q := NewQueues(0)
	if q.Len() != 0 || q.Smallest() != math.MaxInt64 {
		t.Fatalf("empty: %d waiting, smallest %d", q.Len(), q.Smallest())
	}
	a1, a2, b1 := wl("a1", "a", 1, 4, 10), wl("a2", "a", 1, 1, 5), wl("b1", "b", 2, 2, 1)
	a2.Priority = 1
	for _, w := range []*Workload{a1, a2, b1} {
		q.Push(w)
	}
	// Inside a queue: priority, then creation; between queues: the shares.
	if got := drain(q.Stream(map[string]float64{"a": 0, "b": 1})); got != "a2,a1,b1" {
		t.Errorf("order %s", got)
	}
	if q.Len() != 3 || q.In("a") != 2 || q.Smallest() != 1 {
		t.Errorf("%d waiting, %d in a, smallest %d", q.Len(), q.In("a"), q.Smallest())
	}
	q.Remove(a2)
	q.Remove(a2) // twice: nothing more
	if got := drain(q.Stream(nil)); got != "b1,a1" || q.Len() != 2 || q.Smallest() != 4 {
		t.Errorf("after removing a2: %s, %d waiting, smallest %d", got, q.Len(), q.Smallest())
	}
	// Evicted and pushed again: once in its queue, not twice.
	q.Push(a2)
	if got := drain(q.Stream(map[string]float64{"b": 1})); got != "a2,a1,b1" {
		t.Errorf("pushed again: %s", got)
	}
}

func TestQueuesAging(t *testing.T) {
	q := NewQueues(100)
	old, young := wl("old", "a", 1, 8, 0), wl("young", "a", 1, 1, 50)
	young.Priority = 5 // ahead in the queue while neither is aged
	q.Push(old)
	q.Push(young)
	if n := q.Age(99); n != 0 {
		t.Errorf("aged %d before 100 ms", n)
	}
	if n := q.Age(100); n != 1 {
		t.Fatalf("aged %d at 100 ms", n)
	}
	if got := drain(q.AgedStream(nil)); got != "old" {
		t.Errorf("aged tier %s", got)
	}
	if got := drain(q.Stream(nil)); got != "young" {
		t.Errorf("the rest %s", got)
	}
	q.Remove(old)
	if q.Len() != 1 || drain(q.AgedStream(nil)) != "" || q.Age(1000) != 1 {
		t.Errorf("after admitting the aged one: %d waiting", q.Len())
	}
}

// TestQueuesDeferAndWake: an evicted workload waits out its backoff
// (base × 2^(evictions−1), capped), then queues behind the ones already
// waiting, as if created when it woke.
func TestQueuesDeferAndWake(t *testing.T) {
	for _, c := range []struct {
		base, max int64
		n         int
		want      int64
	}{{60_000, 0, 1, 60_000}, {60_000, 0, 3, 240_000}, {60_000, 3_600_000, 8, 3_600_000}, {1, 0, 100, 1 << 20}} {
		if got := Backoff(c.base, c.max, c.n); got != c.want {
			t.Errorf("Backoff(%d, %d, %d) = %d, want %d", c.base, c.max, c.n, got, c.want)
		}
	}
	q := NewQueues(0)
	old, evicted := wl("old", "a", 1, 1, 500), wl("evicted", "a", 1, 1, 100)
	q.Push(old)
	q.Defer(evicted, 1_000)
	if at, ok := q.NextWake(); !ok || at != 1_000 || q.Deferred() != 1 || q.Len() != 1 {
		t.Fatalf("deferred: next wake %d %v, %d deferred, %d waiting", at, ok, q.Deferred(), q.Len())
	}
	q.Wake(999)
	if q.Len() != 1 {
		t.Fatalf("woke early: %d waiting", q.Len())
	}
	q.Wake(1_000)
	if _, ok := q.NextWake(); ok || q.Len() != 2 || evicted.SubmittedMs != 1_000 {
		t.Fatalf("after wake: %d waiting, submitted %d", q.Len(), evicted.SubmittedMs)
	}
	if got := drain(q.Stream(nil)); got != "old,evicted" {
		t.Errorf("order %s, want old,evicted (requeued by eviction time)", got)
	}
}
