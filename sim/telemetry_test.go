package sim

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendDecimal: the fast writer of rounded gauges writes what
// strconv.AppendFloat(x, 'f', -1) writes of the rounded value.
func TestAppendDecimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		places := 3 + 3*(i%2)
		v := r.Float64() * 1000
		if i%7 == 0 {
			v = float64(r.IntN(100))
		}
		scale := math.Pow(10, float64(places))
		n := math.Round(v * scale)
		want := strconv.AppendFloat(nil, n/scale, 'f', -1, 64)
		if got := appendDecimal(nil, n, places); string(got) != string(want) {
			t.Fatalf("appendDecimal(%v, %d) = %s, want %s", n, places, got, want)
		}
	}
}
