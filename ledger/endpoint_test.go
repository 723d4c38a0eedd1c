package ledger

import (
	"encoding/json"
	"testing"
)

func TestGapsOver(t *testing.T) {
	var g Gaps
	for _, s := range []float64{10, 30, 45, 400, 4000, 20000} {
		g.Add(s)
		if b := Bucket(s); b > 0 {
			g.AddUnmeasured(b)
		}
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bound  float64
		n      int64
		beyond float64
	}{
		{0, 6, 10 + 30 + 45 + 400 + 4000 + 20000},
		{30, 4, 15 + 370 + 3970 + 19970}, // 30 s is in the first bucket: not over it
		{300, 3, 100 + 3700 + 19700},
		{3600, 2, 400 + 16400},
		{14400, 1, 5600},
	} {
		n, beyond := g.Over(c.bound)
		if n != c.n || beyond != c.beyond {
			t.Errorf("Over(%g) = %d gaps, %g s beyond; want %d, %g", c.bound, n, beyond, c.n, c.beyond)
		}
	}
	var m Gaps
	m.Merge(g)
	m.Merge(g)
	if n, _ := m.Over(0); n != 12 {
		t.Errorf("merged twice: %d gaps; want 12", n)
	}
	j, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back Gaps
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if n, b := back.Over(60); n != 3 || b != 340+3940+19940 {
		t.Errorf("after JSON %s: %d, %g", j, n, b)
	}
}

func FuzzGapsJSON(f *testing.F) {
	f.Add([]byte(`{"n":[1,0,0,0,0,0,0,0,0,0,0],"s":[12,0,0,0,0,0,0,0,0,0,0]}`))
	f.Add([]byte(`{"n":[],"s":[]}`))
	f.Add([]byte(`{"n":[1],"s":[99]}`))
	f.Add([]byte(`{"n":[0,0,0,0,0,0,0,1,0,0,0],"s":[0,0,0,0,0,0,0,3030,0,0,0],"w":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,2,2,3,5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"m":[0,0,0,0,0,0,0,1,0,0,0],"u":[0,0,0,0,0,0,0,0,0,0,0]}`))
	f.Add([]byte(`{"n":[0,0,0,0,0,0,0,1,0,0,0],"s":[0,0,0,0,0,0,0,3030,0,0,0],"w":[],"m":[0],"u":[1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g Gaps
		if err := json.Unmarshal(b, &g); err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("accepted invalid gaps %+v: %v", g, err)
		}
		j, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var again Gaps
		if err := json.Unmarshal(j, &again); err != nil {
			t.Fatalf("%s → %+v → %s: %v", b, g, j, err)
		}
		n1, s1 := g.Over(300)
		n2, s2 := again.Over(300)
		if n1 != n2 || s1 != s2 || n1 < 0 || s1 < 0 && n1 > 0 && s1 < -1e-6*float64(n1) {
			t.Fatalf("%s: over 300 s %d/%g, after a round trip %d/%g", b, n1, s1, n2, s2)
		}
		// Every gap over a cooldown is counted or marked unmeasured.
		w1, u1 := g.WokenOver(300, 2)
		w2, u2 := again.WokenOver(300, 2)
		if w1 != w2 || u1 != u2 || w1 < 0 || u1 < 0 || g.Woken == nil && u1 != n1 {
			t.Fatalf("%s: woken over 300 s %g, %d unmeasured of %d; after a round trip %g, %d", b, w1, u1, n1, w2, u2)
		}
	})
}

// TestGapsWoken: the requests counted as gaps ended are read by the
// longest possible length of each gap; a gap with no count above a
// cooldown is unmeasured there, and so is every gap of a row from before
// the ledger kept counts; a row whose gaps above a bound have fewer counts
// or marks than gaps is refused.
func TestGapsWoken(t *testing.T) {
	var g Gaps
	g.Add(50) // ended 50 s after the last report busy, 65 s after the one before
	g.AddWoken(Bucket(65), []float64{2, 3, 3, 4, 9}, 5)
	g.Add(4000)
	g.AddWoken(Bucket(4015), []float64{1, 1, 5, 5, 6}, 5)
	g.Add(9000)
	g.AddUnmeasured(Bucket(9000))
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bound, want float64
		j           int
		unmeasured  int64
	}{
		{30, 2 + 1, 0, 1}, // the 50 s gap may have been 65 s: over 30 and over 60
		{60, 9 + 6, 4, 1},
		{120, 1, 0, 1},
		{3600, 5, 2, 1},
		{7200, 0, 2, 1},
		{14400, 0, 2, 0},
	} {
		if got, un := g.WokenOver(c.bound, c.j); got != c.want || un != c.unmeasured {
			t.Errorf("WokenOver(%g, %d) = %g, %d unmeasured; want %g, %d", c.bound, c.j, got, un, c.want, c.unmeasured)
		}
	}
	var old Gaps
	old.Add(500)
	old.Woken, old.Wakes, old.Measured, old.Unmeasured = nil, nil, nil, nil
	if err := old.Check(); err != nil {
		t.Fatalf("a row from before the counts: %v", err)
	}
	var m Gaps
	m.Merge(g)
	m.Merge(old)
	if _, un := m.WokenOver(300, 0); un != 2 {
		t.Errorf("merged with an old row: %d unmeasured over 300 s; want 2 (its gap and the 9000 s one)", un)
	}
	bad := g
	bad.Wakes = append([]int64{}, g.Wakes...)
	bad.Wakes[Bucket(4015)] = 0
	if err := bad.Check(); err == nil {
		t.Error("gaps over 3600 s with no count or mark for one of them were accepted")
	}
	bad = g
	bad.Measured = append([]int64{}, g.Measured...)
	bad.Measured[Bucket(4015)*len(WakeBounds)+3] = 0 // 300 s not covered, 600 s covered
	if err := bad.Check(); err == nil {
		t.Error("a window covered after a shorter one that was not was accepted")
	}
	// A gap whose 10-minute window the data did not cover (the hour had
	// to close): unmeasured there, measured at the windows it covered.
	var part Gaps
	part.Add(4000)
	part.AddWoken(Bucket(4015), []float64{1, 2, 3, 7, 7}, 4)
	if err := part.Check(); err != nil {
		t.Fatal(err)
	}
	if w, un := part.WokenOver(3600, 3); w != 7 || un != 0 {
		t.Errorf("within 300 s: %g, %d unmeasured; want 7, 0", w, un)
	}
	if _, un := part.WokenOver(3600, 4); un != 1 {
		t.Errorf("within 600 s: %d unmeasured; want 1 (not covered)", un)
	}
	bad = g
	bad.Woken = append([]float64{}, g.Woken...)
	bad.Woken[Bucket(65)*len(WakeBounds)+1] = 1 // fewer within 60 s than within 30 s
	if err := bad.Check(); err == nil {
		t.Error("fewer requests within 60 s than within 30 s were accepted")
	}
	j, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back Gaps
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
	if got, _ := back.WokenOver(60, 4); got != 15 {
		t.Errorf("after JSON: %g within 600 s over 60 s; want 15", got)
	}
}
