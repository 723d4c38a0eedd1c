package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseReplay(t *testing.T) {
	data, err := os.ReadFile("../examples/philly-replay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseReplay(data, "philly-replay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{"currency: USD\ntraceGPU: k80\nflavors:\n  - {name: v, share: 0.5, gpuModel: X, price: {perGPUHour: 3}, gavelGPU: v100}\n  - {name: k, share: 0.5, gpuModel: Y, price: {perGPUHour: 1}, speed: 0.25}\n"} {
		g, err := ParseReplay([]byte(y), "g.yaml")
		if err != nil || g.TraceGPU != "k80" || g.Flavors[0].GavelGPU != "v100" || g.SpeedOf(0) != 0 || g.SpeedOf(1) != 0.25 {
			t.Errorf("%q: %+v, %v", y, g, err)
		}
	}
	if len(r.Flavors) != 2 || r.RateMicros(0) != 6_880_000 || r.RateMicros(1) != 526_000 || r.Flavors[1].Share.Micros != 500_000 {
		t.Errorf("flavors %+v, rates %d %d", r.Flavors, r.RateMicros(0), r.RateMicros(1))
	}
	for _, c := range []struct{ yaml, want string }{
		{"", "the file is empty"},
		{"currency: USD\nflavors: []\n", "flavors: missing"},
		{"currency: USD\nflavors:\n  - {name: a, share: 0.5, gpuModel: X, price: {perGPUHour: 1}}\n", "the shares add up to 0.500000; want 1"},
		{"currency: USD\nflavors:\n  - {name: a, share: 1.5, gpuModel: X, price: {perGPUHour: 1}}\n", `flavors[0].share: "1.500000"; want a fraction`},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {}}\n", "flavors[0].price: 0 of perGPUHour, catalog and onPrem are set"},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {catalog: aws/nope}}\n", `"aws/nope" is not in the price book`},
		{"currency: EUR\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {catalog: aws/p5.48xlarge}}\n", "set exchangeRate"},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, price: {perGPUHour: 1}}\n", "flavors[0].gpuModel: missing"},
		{"currency: USD\nflavors:\n  - {name: a, share: 0.5, gpuModel: X, price: {perGPUHour: 1}}\n  - {name: a, share: 0.5, gpuModel: X, price: {perGPUHour: 1}}\n", `flavor "a" is listed twice`},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}, colour: red}\n", "colour"},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}, speed: 0}\n", `flavors[0].speed: "0.000000"; want a throughput`},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}, gavelGPU: a100}\n", `flavors[0].gavelGPU: "a100"; want k80, p100 or v100`},
		{"currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}, gavelGPU: v100}\n", "traceGPU: missing, with flavors[0].gavelGPU"},
		{"currency: USD\ntraceGPU: k80\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}, gavelGPU: v100, speed: 2}\n", "want one of speed and gavelGPU"},
		{"currency: USD\ntraceGPU: h100\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}}\n", `traceGPU: "h100"`},
	} {
		_, err := ParseReplay([]byte(c.yaml), "r.yaml")
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.yaml, err, c.want)
		}
	}
}

// FuzzParseReplay: any input gives a replay or an *Error, never a panic,
// and an accepted replay has a price for every flavor and shares adding
// up to 1.
func FuzzParseReplay(f *testing.F) {
	if data, err := os.ReadFile("../examples/philly-replay.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("currency: USD\nflavors:\n  - {name: a, share: 1, gpuModel: X, price: {perGPUHour: 1}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReplay(data, "fuzz.yaml")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		var total int64
		for i, fl := range r.Flavors {
			total += fl.Share.Micros
			if r.RateMicros(i) < 0 {
				t.Fatalf("flavor %d: rate %d", i, r.RateMicros(i))
			}
		}
		if total != 1_000_000 {
			t.Fatalf("shares add up to %d", total)
		}
	})
}
