package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// cohort3: queues a, b, c in one cohort, nominal 4 GPUs each, no limits,
// all reclaiming from borrowers; three 4-GPU nodes.
func cohort3() *Snapshot {
	s := &Snapshot{Queues: map[string]*ClusterQueue{}, Usage: map[string]map[FlavorResource]int64{},
		Running: map[string][]*Running{}, Share: map[string]float64{}}
	for _, n := range []string{"a", "b", "c"} {
		s.Queues[n] = &ClusterQueue{Name: n, Cohort: "all", Flavors: []string{"h100"},
			Quotas:     map[FlavorResource]Quota{fr("h100"): {Nominal: 4, BorrowingLimit: -1, LendingLimit: -1}},
			Preemption: Preemption{WithinClusterQueue: LowerPriority, ReclaimWithinCohort: Any}}
		s.Nodes = append(s.Nodes, Node{Name: "n-" + n, Flavor: "h100", Domain: "r", Free: 4})
	}
	return s
}

// run admits ws at time now and fails the test unless exactly the IDs in
// want were admitted.
func run(t *testing.T, s *Snapshot, p Policy, now int64, want string, ws ...*Workload) []Decision {
	t.Helper()
	s.NowMs = now
	ds := Admit(s, p, ws, Options{Policy: p, FairSharing: []FairSharingStrategy{LessThanOrEqualToFinalShare, LessThanInitialShare}})
	if got := admitted(ds); got != want {
		t.Fatalf("at %d admitted %q, want %q; decisions: %s", now, got, want, describe(ds))
	}
	checkBooks(t, s)
	return ds
}

func describe(ds []Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  %s admitted=%v %s", d.Workload.ID, d.Admitted, d.Reason)
		for _, p := range d.Preempted {
			fmt.Fprintf(&b, "\n    evicts %s: %s", p.Running.Workload.ID, p.Reason)
		}
	}
	return b.String()
}

// checkBooks: usage equals what the running workloads hold, and the nodes'
// free capacity is what they do not hold.
func checkBooks(t *testing.T, s *Snapshot) {
	t.Helper()
	held := map[string]int64{}
	for q, rs := range s.Running {
		var sum int64
		for _, r := range rs {
			sum += r.Workload.Units()
			for k, n := range r.Nodes {
				held[n] += r.Workload.podUnits()[k]
			}
		}
		if u := s.Usage[q][fr("h100")]; u != sum {
			t.Errorf("queue %s: usage %d, running workloads hold %d", q, u, sum)
		}
	}
	for _, n := range s.Nodes {
		if n.Free+held[n.Name] != 4 {
			t.Errorf("node %s: %d free + %d held != 4", n.Name, n.Free, held[n.Name])
		}
	}
}

func victims(ds []Decision) string {
	var ids []string
	for _, d := range ds {
		for _, p := range d.Preempted {
			ids = append(ids, p.Running.Workload.ID)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

func TestReclaimWithinCohort(t *testing.T) {
	s := cohort3()
	// b borrows everything: four 2-GPU and four 1-GPU workloads.
	var bs []*Workload
	for i := range 4 {
		bs = append(bs, wl(fmt.Sprintf("b2-%d", i), "b", 1, 2, int64(i)), wl(fmt.Sprintf("b1-%d", i), "b", 1, 1, int64(10+i)))
	}
	for i, w := range bs {
		run(t, s, FIFO{}, int64(i), w.ID, w)
	}
	// a reclaims 2 GPUs of its nominal 4: the newest started go first
	// (b1-3, then b2-3) and then every victim that is not needed is put
	// back (b1-3).
	ds := run(t, s, FIFO{}, 100, "a1", wl("a1", "a", 1, 2, 100))
	if got := victims(ds); got != "b2-3" {
		t.Fatalf("victims %s, want b2-3%s", got, describe(ds))
	}
	if !strings.Contains(ds[0].Preempted[0].Reason, "reclaimed by ClusterQueue a") {
		t.Errorf("reason: %s", ds[0].Preempted[0].Reason)
	}
	// a asks for 3 more: that would borrow 1, and classic preemption only
	// reclaims nominal quota.
	ds = Admit(s, FIFO{}, []*Workload{wl("a2", "a", 1, 3, 101)}, Options{Policy: FIFO{}})
	if ds[0].Admitted || !strings.Contains(ds[0].Reason, "no workload may be preempted") {
		t.Fatalf("a2: %s", describe(ds))
	}
	checkBooks(t, s)
	// c reclaims its whole nominal quota: 4 GPUs.
	ds = run(t, s, FIFO{}, 102, "c1", wl("c1", "c", 2, 2, 102))
	if got := victims(ds); got != "b1-2,b1-3,b2-2" {
		t.Fatalf("victims %s%s", got, describe(ds))
	}
	// b is now at 6 of 12 GPUs, 2 over nominal; nothing is left to reclaim
	// once a and c sit at their nominal quota.
	if u := s.Usage["b"][fr("h100")]; u != 6 {
		t.Errorf("b holds %d, want 6", u)
	}
}

func TestPreemptWithinClusterQueueByPriority(t *testing.T) {
	s := cohort3()
	delete(s.Queues, "b")
	delete(s.Queues, "c")
	s.Queues["a"].Cohort = ""
	s.Nodes = s.Nodes[:1]
	low := wl("low", "a", 1, 4, 1)
	run(t, s, FIFO{}, 1, "low", low)
	same := wl("same", "a", 1, 2, 2)
	ds := run(t, s, FIFO{}, 2, "", same)
	if !strings.Contains(ds[0].Reason, "no workload may be preempted") {
		t.Errorf("equal priority: %s", describe(ds))
	}
	high := wl("high", "a", 1, 2, 3)
	high.Priority = 10
	ds = run(t, s, FIFO{}, 3, "high", high)
	if got := victims(ds); got != "low" || !strings.Contains(ds[0].Preempted[0].Reason, "higher-priority high") {
		t.Fatalf("victims %s%s", got, describe(ds))
	}
}

// TestFairSharingPreemption: Kueue's fair sharing reclaims from the queue
// with the largest share, and a queue it preempted cannot preempt back.
func TestFairSharingPreemption(t *testing.T) {
	for _, p := range []Policy{KueueFairSharing{}, ShareOrder{PolicyName: "costfair", DefaultRate: 1, HalfLifeMs: 3_600_000}} {
		t.Run(p.Name(), func(t *testing.T) {
			s := cohort3()
			// b borrows 4 and c 2, in one-GPU workloads; a has 2 of its own.
			for i := range 8 {
				run(t, s, p, int64(i), fmt.Sprintf("b%d", i), wl(fmt.Sprintf("b%d", i), "b", 1, 1, int64(i)))
			}
			run(t, s, p, 8, "c0,c1,c2,c3", wl("c0", "c", 1, 1, 8), wl("c1", "c", 1, 1, 9), wl("c2", "c", 1, 1, 10), wl("c3", "c", 1, 1, 11))
			// Nothing is free; a wants 2. b has the larger share and gives
			// up its newest.
			ds := run(t, s, p, 20, "a0", wl("a0", "a", 1, 2, 20))
			if got := victims(ds); got != "b6,b7" {
				t.Fatalf("victims %s%s", got, describe(ds))
			}
			if !strings.Contains(ds[0].Preempted[0].Reason, string(LessThanOrEqualToFinalShare)) {
				t.Errorf("reason: %s", ds[0].Preempted[0].Reason)
			}
			// b wants one back: its share with it is above a's, so no; and
			// the failed search leaves the snapshot as it was.
			before := maps.Clone(s.Usage)
			ds = run(t, s, p, 21, "", wl("b8", "b", 1, 1, 21))
			if !strings.Contains(ds[0].Reason, "preemption") {
				t.Errorf("b8: %s", describe(ds))
			}
			for q, u := range before {
				if !maps.Equal(u, s.Usage[q]) {
					t.Errorf("a failed preemption changed %s's usage: %v, was %v", q, s.Usage[q], u)
				}
			}
		})
	}
}

// FuzzAdmit drives random cycles of submissions, completions and
// admissions with preemption through the core and checks what must always
// hold: usage equals what the running workloads hold, no node is over or
// under-committed, no queue holds more than nominal + borrowing limit, a
// workload is evicted only from a queue that borrows or for a
// higher-priority workload of its own queue, and a failed search leaves
// the snapshot as it was.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, uint8(0))
	f.Add([]byte("preempt everything you can find here"), uint8(1))
	f.Add([]byte{0xff, 0, 0xff, 0, 0x80, 0x7f, 3, 3, 3, 3, 3, 3}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, policy uint8) {
		s := cohort3()
		s.Queues["a"].Quotas[fr("h100")] = Quota{Nominal: 4, BorrowingLimit: 4, LendingLimit: -1}
		s.Queues["c"].Quotas[fr("h100")] = Quota{Nominal: 4, BorrowingLimit: -1, LendingLimit: 2}
		s.Queues["b"].Preemption.ReclaimWithinCohort = LowerPriority
		// More GPUs than quota: only the quota rules keep the cohort
		// within its quotas.
		s.Nodes = append(s.Nodes, Node{Name: "n-spare", Flavor: "h100", Domain: "r", Free: 4})
		var p Policy
		switch policy % 3 {
		case 0:
			p = FIFO{}
		case 1:
			p = KueueFairSharing{}
		default:
			p = ShareOrder{PolicyName: "costfair", DefaultRate: 1, HalfLifeMs: 60_000}
		}
		opts := Options{Policy: p}
		if policy%2 == 1 {
			opts.FairSharing = []FairSharingStrategy{LessThanOrEqualToFinalShare, LessThanInitialShare}
		}
		var pending []*Workload
		names := []string{"a", "b", "c"}
		for i := 0; i+1 < len(data); i += 2 {
			op, arg := data[i], data[i+1]
			s.NowMs = int64(i) * 1000
			switch op % 3 {
			case 0: // submit
				w := wl(fmt.Sprintf("w%d", i), names[arg%3], 1+int(arg>>2)%2, 1+int64(arg>>3)%4, s.NowMs)
				w.Priority = int32(arg >> 6)
				if arg&0x20 != 0 { // a launcher and workers
					w.PodSets = []PodSet{{Name: "launcher", Count: 1, PerPod: 1}, {Name: "worker", Count: w.Pods, PerPod: w.PerPod}}
				}
				pending = append(pending, w)
			case 1: // a running workload ends
				var all []*Running
				for _, q := range names {
					all = append(all, s.Running[q]...)
				}
				if len(all) > 0 {
					s.Release(all[int(arg)%len(all)])
				}
			case 2: // a cycle
				for q := range s.Share {
					s.Share[q] *= 0.5
				}
				for _, q := range names {
					s.Share[q] += float64(s.Usage[q][fr("h100")])
				}
				before := map[string]int64{}
				for _, q := range names {
					before[q] = s.Usage[q][fr("h100")]
				}
				ds := Admit(s, p, pending, opts)
				pending = pending[:0]
				// Replay the cycle's decisions in order on the usage before
				// it: each victim's queue must borrow when it is evicted.
				held := before
				admittedNow := map[*Workload]bool{}
				for _, d := range ds {
					if !d.Admitted {
						pending = append(pending, d.Workload)
					}
					for _, v := range d.Preempted {
						vw, wq := v.Running.Workload, d.Workload.Queue
						if vw.Queue == wq && vw.Priority >= d.Workload.Priority {
							t.Fatalf("%s evicted %s of its own queue without a lower priority: %s", d.Workload.ID, vw.ID, describe(ds))
						}
						if vw.Queue != wq && held[vw.Queue] <= s.Queues[vw.Queue].Quotas[fr("h100")].Nominal {
							t.Fatalf("%s evicted %s of %s, which did not borrow (held %d): %s", d.Workload.ID, vw.ID, vw.Queue, held[vw.Queue], describe(ds))
						}
						if admittedNow[vw] {
							t.Fatalf("%s evicted %s, admitted in the same cycle: %s", d.Workload.ID, vw.ID, describe(ds))
						}
						held[vw.Queue] -= vw.Units()
						pending = append(pending, vw)
					}
					if d.Admitted {
						held[d.Workload.Queue] += d.Workload.Units()
						admittedNow[d.Workload] = true
					}
				}
			}
			checkBooks(t, s)
			var nominal, used int64
			for _, q := range names {
				quota := s.Queues[q].Quotas[fr("h100")]
				u := s.Usage[q][fr("h100")]
				if quota.BorrowingLimit >= 0 && u > quota.Nominal+quota.BorrowingLimit {
					t.Fatalf("queue %s holds %d, over %d + %d", q, u, quota.Nominal, quota.BorrowingLimit)
				}
				nominal += quota.Nominal
				used += u
			}
			// The cohort never admits more than its queues' quotas add up
			// to, whatever each queue's own nominal quota says.
			if used > nominal {
				t.Fatalf("the cohort holds %d of %d nominal: %v", used, nominal, s.Usage)
			}
		}
	})
}

// TestAdmissionPenalty: with a penalty at admission, a queue's share rises
// as soon as one of its workloads is admitted, so one cycle alternates
// between queues of equal share instead of handing the first every GPU.
func TestAdmissionPenalty(t *testing.T) {
	for _, c := range []struct {
		penalty int64
		want    string
	}{{0, "a0,a1,a2,a3"}, {60_000, "a0,b0,a1,b1"}} {
		s := cohort3()
		s.Nodes = s.Nodes[:1]
		lists := map[string][]*Workload{}
		for i := range 4 {
			lists["a"] = append(lists["a"], wl(fmt.Sprintf("a%d", i), "a", 1, 1, int64(i)))
			lists["b"] = append(lists["b"], wl(fmt.Sprintf("b%d", i), "b", 1, 1, int64(10+i)))
		}
		p := ShareOrder{PolicyName: "kueue-afs", DefaultRate: 1, PenaltyMs: c.penalty}
		ds := AdmitInOrder(s, Stream(p.QueueShares(s), lists, nil), Options{Policy: p})
		if got := admitted(ds); got != c.want {
			t.Errorf("penalty %d ms: admitted %s, want %s", c.penalty, got, c.want)
		}
		if c.penalty > 0 && s.Share["a"] != 2*60 {
			t.Errorf("a's share %v, want two admissions × 60 unit-seconds", s.Share["a"])
		}
	}
}

// TestPodSets: a workload of a launcher and workers is placed all at once
// or not at all, a node per pod in PodSet order, and a preemption gives
// back what each pod held.
func TestPodSets(t *testing.T) {
	s := cohort3()
	job := &Workload{ID: "mpi", Queue: "a", Resource: gpu, SubmittedMs: 1, PodSets: []PodSet{
		{Name: "launcher", Count: 1, PerPod: 1}, {Name: "worker", Count: 2, PerPod: 4}}}
	if job.Units() != 9 || job.describe() != "1 pod of 1 + 2 pods of 4" {
		t.Fatalf("units %d, %s", job.Units(), job.describe())
	}
	// Two whole nodes free and one with 0: the workers fit, the launcher
	// does not, and nothing is taken.
	s.Queues["a"].Quotas[fr("h100")] = Quota{Nominal: 12, BorrowingLimit: -1, LendingLimit: -1}
	s.Queues["a"].Preemption = Preemption{}
	run(t, s, FIFO{}, 0, "c-fill", wl("c-fill", "c", 1, 4, 0))
	ds := run(t, s, FIFO{}, 1, "", job)
	if !strings.Contains(ds[0].Reason, "1 pod of 1 + 2 pods of 4") {
		t.Errorf("reason: %s", ds[0].Reason)
	}
	var free int64
	for _, n := range s.Nodes {
		free += n.Free
	}
	if free != 8 {
		t.Errorf("%d free after a refused gang, want 8", free)
	}
	// With the c workload gone, the launcher goes on the fullest node left.
	s.Release(s.Running["c"][0])
	s.Queues["a"].Preemption = Preemption{WithinClusterQueue: LowerPriority}
	ds = run(t, s, FIFO{}, 2, "mpi", job)
	if len(ds[0].Nodes) != 3 {
		t.Fatalf("nodes %v, want one per pod", ds[0].Nodes)
	}
	// A higher-priority workload of the queue takes everything back.
	big := wl("big", "a", 3, 4, 3)
	big.Priority = 5
	ds = run(t, s, FIFO{}, 3, "big", big)
	if got := victims(ds); got != "mpi" {
		t.Fatalf("victims %s%s", got, describe(ds))
	}
}
