package admission

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const gpu = "nvidia.com/gpu"

func fr(f string) FlavorResource { return FlavorResource{f, gpu} }

// snapshot: two queues in one cohort on flavor h100 (nominal 8 each; a
// borrows up to 4, b lends at most 4), and c alone; nodes in two racks.
func snapshot() *Snapshot {
	return &Snapshot{
		Queues: map[string]*ClusterQueue{
			"a": {Name: "a", Cohort: "all", Flavors: []string{"h100"}, Quotas: map[FlavorResource]Quota{fr("h100"): {Nominal: 8, BorrowingLimit: 4, LendingLimit: -1}}},
			"b": {Name: "b", Cohort: "all", Flavors: []string{"h100"}, Quotas: map[FlavorResource]Quota{fr("h100"): {Nominal: 8, BorrowingLimit: -1, LendingLimit: 4}}},
			"c": {Name: "c", Flavors: []string{"a100", "h100"}, Quotas: map[FlavorResource]Quota{fr("a100"): {Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}}},
		},
		Usage: map[string]map[FlavorResource]int64{},
		Nodes: []Node{
			{Name: "n1", Flavor: "h100", Domain: "rack-1", Free: 8},
			{Name: "n2", Flavor: "h100", Domain: "rack-1", Free: 8},
			{Name: "n3", Flavor: "h100", Domain: "rack-2", Free: 8},
			{Name: "m1", Flavor: "a100", Domain: "rack-3", Free: 8},
		},
		Share: map[string]float64{},
	}
}

func wl(id, q string, pods int, perPod int64, at int64) *Workload {
	return &Workload{ID: id, Queue: q, Resource: gpu, Pods: pods, PerPod: perPod, SubmittedMs: at}
}

func admitted(ds []Decision) string {
	var ids []string
	for _, d := range ds {
		if d.Admitted {
			ids = append(ids, d.Workload.ID)
		}
	}
	return strings.Join(ids, ",")
}

func TestQuotaBorrowingAndLending(t *testing.T) {
	s := snapshot()
	// a: 8 nominal, then borrows 4 (its limit; b lends up to 4).
	ds := Admit(s, FIFO{}, []*Workload{wl("a1", "a", 1, 8, 1), wl("a2", "a", 1, 4, 2), wl("a3", "a", 1, 1, 3)}, Options{})
	if got := admitted(ds); got != "a1,a2" {
		t.Errorf("admitted %s, want a1,a2", got)
	}
	if ds[2].Code != WaitBorrowingLimit || !strings.Contains(ds[2].Reason, "over the borrowing limit 4") {
		t.Errorf("a3's reason: %s", ds[2].Reason)
	}
	// b may use the 4 it does not lend; the other 4 of its nominal quota
	// are lent to a, so b waits for them (Kueue: the cohort's available
	// quota, not the queue's nominal, decides), though 12 GPUs are free.
	ds = Admit(s, FIFO{}, []*Workload{wl("b1", "b", 1, 4, 4), wl("b2", "b", 1, 4, 5)}, Options{})
	if got := admitted(ds); got != "b1" {
		t.Errorf("admitted %s, want b1", got)
	}
	if ds[1].Code != WaitQuotaLent || !strings.Contains(ds[1].Reason, "within its nominal quota 8") {
		t.Errorf("b2's reason: %s", ds[1].Reason)
	}
	// Capacity: a fresh queue with quota but not enough free GPUs left.
	s.Queues["d"] = &ClusterQueue{Name: "d", Flavors: []string{"h100"}, Quotas: map[FlavorResource]Quota{fr("h100"): {Nominal: 16, BorrowingLimit: -1, LendingLimit: -1}}}
	ds = Admit(s, FIFO{}, []*Workload{wl("d1", "d", 2, 8, 6)}, Options{})
	if ds[0].Admitted || ds[0].Code != WaitCapacity {
		t.Errorf("d1: %+v", ds[0])
	}
	// c has no cohort: past nominal it is refused; its second flavor has no
	// quota.
	ds = Admit(s, FIFO{}, []*Workload{wl("c1", "c", 2, 8, 6)}, Options{})
	if ds[0].Admitted || ds[0].Code != WaitNominalQuota {
		t.Errorf("c1: %+v", ds[0])
	}
}

func TestLendingLimit(t *testing.T) {
	s := snapshot()
	s.Nodes = append(s.Nodes, Node{Name: "n4", Flavor: "h100", Domain: "rack-2", Free: 16})
	s.Queues["a"].Quotas[fr("h100")] = Quota{Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}
	// b lends at most 4 of its 8, though it uses none.
	ds := Admit(s, FIFO{}, []*Workload{wl("a1", "a", 1, 8, 1), wl("a2", "a", 1, 5, 2), wl("a3", "a", 1, 4, 3)}, Options{})
	if got := admitted(ds); got != "a1,a3" {
		t.Errorf("admitted %s, want a1,a3", got)
	}
	if ds[1].Code != WaitCohortQuota || !strings.Contains(ds[1].Reason, "would borrow 5; the cohort has 4 free") {
		t.Errorf("a2's reason: %s", ds[1].Reason)
	}
}

// TestGangsAllOrNothing: a gang that does not fit takes nothing; within one
// domain it needs a rack with room for all its pods.
func TestGangsAllOrNothing(t *testing.T) {
	s := snapshot()
	s.Queues["a"].Quotas[fr("h100")] = Quota{Nominal: 24, BorrowingLimit: -1, LendingLimit: -1}
	ds := Admit(s, FIFO{}, []*Workload{wl("big", "a", 4, 8, 1)}, Options{})
	if ds[0].Admitted {
		t.Fatal("a 32-GPU gang was admitted on 24 GPUs")
	}
	for _, n := range s.Nodes {
		if n.Free != 8 {
			t.Fatalf("a refused gang took GPUs: %+v", s.Nodes)
		}
	}
	ds = Admit(s, FIFO{}, []*Workload{wl("g", "a", 3, 8, 1)}, Options{SameDomain: true})
	if ds[0].Admitted || ds[0].Code != WaitTopology {
		t.Errorf("24 GPUs in one rack of 16: %+v", ds[0])
	}
	ds = Admit(s, FIFO{}, []*Workload{wl("g", "a", 2, 8, 1)}, Options{SameDomain: true})
	if !ds[0].Admitted || ds[0].Nodes[0] != "n1" || ds[0].Nodes[1] != "n2" {
		t.Errorf("16 GPUs in rack-1: %+v", ds[0])
	}
}

func TestStrictFIFOBlocks(t *testing.T) {
	for _, strict := range []bool{true, false} {
		s := snapshot()
		s.Queues["c"].StrictFIFO = strict
		ds := Admit(s, FIFO{}, []*Workload{wl("c1", "c", 1, 8, 1), wl("c2", "c", 1, 4, 2), wl("c3", "c", 1, 4, 3)}, Options{})
		want := "c1"
		if got := admitted(ds); got != want {
			t.Errorf("strict=%v: admitted %s, want %s", strict, got, want)
		}
		// c2 cannot fit (nominal 8 used, no cohort) either way; what differs
		// is the reason c3 waits.
		if strict && ds[2].Code != WaitStrictFIFO {
			t.Errorf("strict: c3's reason %q", ds[2].Reason)
		}
	}
}

func TestPolicyOrder(t *testing.T) {
	s := snapshot()
	s.Usage["a"] = map[FlavorResource]int64{fr("h100"): 12} // borrows 4
	s.Usage["b"] = map[FlavorResource]int64{fr("h100"): 2}
	pending := []*Workload{wl("a-old", "a", 1, 1, 1), wl("b-new", "b", 1, 1, 9)}
	order := func(p Policy) string {
		ws := append([]*Workload(nil), pending...)
		p.Order(s, ws)
		return ws[0].ID + "," + ws[1].ID
	}
	if got := order(FIFO{}); got != "a-old,b-new" {
		t.Errorf("fifo: %s", got)
	}
	// a borrows 4 of the 12 the cohort can lend (8 of a's, 4 of b's): 333.
	if got := s.DominantResourceShare("a"); got < 333 || got > 334 {
		t.Errorf("a's dominant resource share %v, want 333.3", got)
	}
	if got := order(KueueFairSharing{}); got != "b-new,a-old" {
		t.Errorf("kueue fair sharing: %s", got)
	}
	s.Share = map[string]float64{"a": 1, "b": 5}
	if got := order(ShareOrder{PolicyName: "costfair"}); got != "a-old,b-new" {
		t.Errorf("share order: %s", got)
	}
}

func TestDecayed(t *testing.T) {
	d := NewDecayed(1000)
	d.Advance(1)
	d.Add("a", 8)
	d.Advance(2001)
	qs := map[string]*ClusterQueue{"a": {Weight: 2}, "b": {}}
	sh := d.Shares(qs)
	if sh["a"] != 1 || sh["b"] != 0 {
		t.Errorf("after two half-lives, shares %v; want a = 8/4/2 = 1, b = 0", sh)
	}
	d.Advance(5) // backwards: ignored
	if got := d.Shares(qs)["a"]; got != 1 {
		t.Errorf("going back in time changed the share to %v", got)
	}
}

// TestStreamMatchesOrder: streaming per-queue FIFO lists gives the order
// sorting the whole backlog gives, for every policy.
func TestStreamMatchesOrder(t *testing.T) {
	s := snapshot()
	s.Usage["a"] = map[FlavorResource]int64{fr("h100"): 12}
	s.Share = map[string]float64{"a": 3, "b": 3, "c": 1}
	var all []*Workload
	lists := map[string][]*Workload{}
	for i := range 30 {
		q := []string{"a", "b", "c"}[i*7%3]
		w := wl(fmt.Sprintf("w%02d", i), q, 1, 1, int64(i*13%17))
		all = append(all, w)
	}
	sortFIFO(all)
	for _, w := range all {
		lists[w.Queue] = append(lists[w.Queue], w)
	}
	for _, p := range []Sharer{FIFO{}, KueueFairSharing{}, ShareOrder{PolicyName: "costfair"}} {
		want := append([]*Workload(nil), all...)
		p.Order(s, want)
		next := Stream(p.QueueShares(s), lists, nil)
		for i, w := range want {
			if got := next.Next(); got != w {
				t.Fatalf("%s: item %d is %v, want %v", p.Name(), i, got, w)
			}
		}
		if next.Next() != nil {
			t.Errorf("%s: stream longer than the backlog", p.Name())
		}
	}
}

func TestNewPolicy(t *testing.T) {
	for _, name := range PolicyNames {
		p, err := NewPolicy(name, PolicyParams{HalfLifeMs: 3_600_000})
		if err != nil || p.Name() != name {
			t.Errorf("%s: %v, %v", name, p, err)
		}
	}
	if _, err := NewPolicy("drf", PolicyParams{}); !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), `"drf": want one of fifo, kueue, kueue-afs, costfair`) {
		t.Errorf("unknown policy: %v", err)
	}
}

// TestNodesByResource: a MIG node is one Node per profile; a workload of
// one profile lands only on that profile's units, and the free units of
// another profile do not count as room for it.
func TestNodesByResource(t *testing.T) {
	const small, large = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
	q := &ClusterQueue{Name: "q", Flavors: []string{"mig"}, Quotas: map[FlavorResource]Quota{
		{"mig", small}: {Nominal: 16, BorrowingLimit: -1, LendingLimit: -1},
		{"mig", large}: {Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}}}
	s := &Snapshot{Queues: map[string]*ClusterQueue{"q": q}, Usage: map[string]map[FlavorResource]int64{},
		Nodes: []Node{
			{Name: "n/" + small, Flavor: "mig", Resource: small, Free: 16},
			{Name: "n/" + large, Flavor: "mig", Resource: large, Free: 2},
		}}
	w := func(id, res string, n int64) *Workload {
		return &Workload{ID: id, Queue: "q", Resource: res, Pods: 1, PerPod: n}
	}
	ds := Admit(s, FIFO{}, []*Workload{w("l1", large, 2), w("l2", large, 1), w("s1", small, 3)}, Options{})
	if got := admitted(ds); got != "l1,s1" {
		t.Fatalf("admitted %s, want l1,s1 (l2 finds the 3g units taken though 16 1g units are free)", got)
	}
	if ds[0].Nodes[0] != "n/"+large || ds[2].Nodes[0] != "n/"+small {
		t.Errorf("placed on %v and %v", ds[0].Nodes, ds[2].Nodes)
	}
	if ds[1].Code != WaitCapacity {
		t.Errorf("l2 waits with %s (%s), want %s", ds[1].Code, ds[1].Reason, WaitCapacity)
	}
	if s.Nodes[0].Free != 13 || s.Nodes[1].Free != 0 {
		t.Errorf("free after: %d and %d, want 13 and 0", s.Nodes[0].Free, s.Nodes[1].Free)
	}
}

// TestWorkloadFlavors: a workload pinned to flavors (its pods' node
// selector) skips the others, as Kueue's flavor assigner does, and is told
// so when none of its flavors has quota.
func TestWorkloadFlavors(t *testing.T) {
	s := snapshot()
	s.Queues["c"].Quotas[fr("h100")] = Quota{Nominal: 8, BorrowingLimit: -1, LendingLimit: -1}
	// c tries a100 first; pinned to h100, it lands there.
	w := wl("c1", "c", 1, 4, 1)
	w.Flavors = []string{"h100"}
	ds := Admit(s, FIFO{}, []*Workload{w, wl("c2", "c", 1, 4, 2)}, Options{})
	if !ds[0].Admitted || ds[0].Flavor != "h100" || !ds[1].Admitted || ds[1].Flavor != "a100" {
		t.Fatalf("c1 on %s (admitted %v), c2 on %s (admitted %v): want h100 and a100", ds[0].Flavor, ds[0].Admitted, ds[1].Flavor, ds[1].Admitted)
	}
	// Pinned to a flavor the queue has no quota of: refused, and told why.
	w = wl("c3", "c", 1, 1, 3)
	w.Flavors = []string{"t4"}
	ds = Admit(s, FIFO{}, []*Workload{w}, Options{})
	if ds[0].Admitted || ds[0].Code != WaitNoQuota || !strings.Contains(ds[0].Reason, "node selector allows flavors [t4]") {
		t.Errorf("c3: %+v", ds[0])
	}
	// Pinned to h100 with h100 full: it waits, and a100's free GPUs do not
	// take it.
	w = wl("c4", "c", 1, 8, 4)
	w.Flavors = []string{"h100"}
	s.Queues["c"].Quotas[fr("h100")] = Quota{Nominal: 4, BorrowingLimit: -1, LendingLimit: -1}
	ds = Admit(s, FIFO{}, []*Workload{w}, Options{})
	if ds[0].Admitted || !strings.Contains(ds[0].Reason, "flavor a100: the pods' node selector excludes it") {
		t.Errorf("c4: %+v", ds[0])
	}
}
