package ledger

import (
	"encoding/json"
	"testing"
)

func TestGapsOver(t *testing.T) {
	var g Gaps
	for _, s := range []float64{10, 30, 45, 400, 4000, 20000} {
		g.Add(s)
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
	})
}
