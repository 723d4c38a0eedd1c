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

// TestLiveStreamFollowsTheCycle: under Kueue's dominant resource share,
// once a queue borrows in a cycle its later workloads go behind a queue
// within its quota, as Kueue orders a cycle on the shares its admissions
// leave; a stream whose shares are taken once at the cycle's start lets
// the borrower take the rest first.
func TestLiveStreamFollowsTheCycle(t *testing.T) {
	run := func(live bool) string {
		s := &Snapshot{
			Queues: map[string]*ClusterQueue{
				"a": {Name: "a", Cohort: "all", Flavors: []string{"h100"}, Quotas: map[FlavorResource]Quota{fr("h100"): {Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}}},
				"b": {Name: "b", Cohort: "all", Flavors: []string{"h100"}, Quotas: map[FlavorResource]Quota{fr("h100"): {Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}}},
			},
			Usage: map[string]map[FlavorResource]int64{},
			Nodes: []Node{{Name: "n1", Flavor: "h100", Domain: "r", Free: 8}, {Name: "n2", Flavor: "h100", Domain: "r", Free: 8}},
		}
		q := NewQueues(0)
		for _, w := range []*Workload{wl("a1", "a", 1, 4, 1), wl("a2", "a", 1, 4, 2), wl("a3", "a", 1, 4, 3), wl("a4", "a", 1, 4, 4),
			wl("b1", "b", 1, 4, 10), wl("b2", "b", 1, 4, 11)} {
			q.Push(w)
		}
		p := KueueFairSharing{}
		pending := q.Stream(p.QueueShares(s))
		if live {
			pending = q.LiveStream(p.QueueShares(s), func(queue string) float64 { return p.QueueShare(s, queue) })
		}
		return admitted(AdmitInOrder(s, pending, Options{Policy: p}))
	}
	if got := run(true); got != "a1,a2,a3,b1" {
		t.Errorf("live: admitted %s; want a1,a2,a3 (a borrows 4) then b1 ahead of a4", got)
	}
	if got := run(false); got != "a1,a2,a3,a4" {
		t.Errorf("shares taken once: admitted %s; want a1-a4 (the test shows the difference)", got)
	}
}
