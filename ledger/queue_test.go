package ledger

import (
	"encoding/json"
	"math"
	"testing"
)

func TestHistogram(t *testing.T) {
	inf := math.Inf(1)
	a := Histogram{Bounds: []float64{10, 100, inf}, Counts: []float64{2, 8, 10}}
	b := Histogram{Bounds: []float64{50, inf}, Counts: []float64{1, 1}}
	// a at 50 counts its count at 10 (2); b at 10 counts 0, at 100 its 1.
	sum := a.Add(b)
	want := Histogram{Bounds: []float64{10, 50, 100, inf}, Counts: []float64{2, 3, 9, 11}}
	for i := range want.Bounds {
		if sum.Bounds[i] != want.Bounds[i] || sum.Counts[i] != want.Counts[i] {
			t.Fatalf("a+b = %+v, want %+v", sum, want)
		}
	}
	if a.Counts[1] != 8 {
		t.Error("Add changed its receiver")
	}
	for _, tc := range []struct{ q, want float64 }{
		{0.1, 5},    // rank 1 of 2 in (0, 10]
		{0.5, 55},   // rank 5: 3 of the 6 in (10, 100]
		{0.8, 100},  // rank 8: the top of (10, 100]
		{0.95, 100}, // in +Inf's bucket: the highest finite bound
	} {
		if got := a.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.2f = %g, want %g", tc.q, got, tc.want)
		}
	}
	if !math.IsNaN((Histogram{}).Quantile(0.9)) {
		t.Error("an empty histogram has a quantile")
	}
	j, err := json.Marshal(a)
	if err != nil || string(j) != `{"le":[10,100],"n":[2,8,10]}` {
		t.Fatalf("JSON %s, %v", j, err)
	}
	var back Histogram
	if err := json.Unmarshal(j, &back); err != nil || back.Total() != 10 || !math.IsInf(back.Bounds[2], 1) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{`{"le":[10],"n":[1]}`, `{"le":[10,5],"n":[1,2,3]}`, `{"le":[10],"n":[3,2]}`, `{"le":[10],"n":[-1,2]}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzHistogramJSON: whatever the JSON, decoding never panics, and what
// it accepts is a valid histogram that encodes back to itself.
func FuzzHistogramJSON(f *testing.F) {
	f.Add([]byte(`{"le":[10,100],"n":[2,8,10]}`))
	f.Add([]byte(`{"le":[],"n":[]}`))
	f.Add([]byte(`{"le":[1],"n":[2,1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Histogram
		if err := json.Unmarshal(b, &h); err != nil {
			return
		}
		if err := h.Check(); err != nil {
			t.Fatalf("accepted an invalid histogram %+v: %v", h, err)
		}
		j, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var again Histogram
		if err := json.Unmarshal(j, &again); err != nil || again.Total() != h.Total() || len(again.Bounds) != len(h.Bounds) {
			t.Fatalf("%s → %+v → %s → %+v, %v", b, h, j, again, err)
		}
		_ = h.Quantile(0.9)
	})
}
