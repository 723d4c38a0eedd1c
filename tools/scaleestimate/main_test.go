package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkGPUMonth/gpus=1000-2   	1	3021168231 ns/op	 147072 disk-B/GPU-year	 8760 lines/GPU-year	 8.000 month-chargeback-ms
BenchmarkGPUMonth/gpus=1000-2   	1	3021168231 ns/op	 140000 disk-B/GPU-year	 8760 lines/GPU-year	 10.00 month-chargeback-ms
BenchmarkGPUMonth/gpus=10000-2  	1	3021168231 ns/op	 120000 disk-B/GPU-year	 8760 lines/GPU-year	 26.00 month-chargeback-ms
`

func TestParseAndFit(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := r[1000]["disk-B/GPU-year"]; len(got) != 2 || got[1] != 140000 {
		t.Fatalf("1000 GPUs' disk: %v", got)
	}
	e := estimate{runs: r}
	if m := e.med(1000, "month-chargeback-ms"); m != 9 {
		t.Errorf("median of 8 and 10: %v", m)
	}
	// Through (1000, 9) and (10000, 26): 100,000 GPUs gives 26 + 17/9000 x 90000 = 196.
	if f := e.fit("month-chargeback-ms", 100_000); f < 195.99 || f > 196.01 {
		t.Errorf("fit at 100k: %v, want 196", f)
	}
	if got := e.spread(1000, "disk-B/GPU-year", thousands); got != "143,536 [140,000-147,072]" {
		t.Errorf("spread: %q", got)
	}
}

func TestParseRejectsABadValue(t *testing.T) {
	_, err := parse(strings.NewReader("BenchmarkGPUMonth/gpus=8-2 1 5 ns/op x disk-B/GPU-year\n"))
	if err == nil || !strings.Contains(err.Error(), `metric disk-B/GPU-year: value "x"`) {
		t.Fatalf("got %v, want an error naming the metric and the value", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Fuzz(func(t *testing.T, s string) {
		parse(strings.NewReader(s))
	})
}
