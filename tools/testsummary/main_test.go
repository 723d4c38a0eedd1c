package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"pass","Package":"p/a","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"p/a","Test":"TestNeedsServer"}
{"Action":"output","Package":"p/a","Test":"TestNeedsServer","Output":"=== RUN   TestNeedsServer\n"}
{"Action":"output","Package":"p/a","Test":"TestNeedsServer","Output":"    x_test.go:12: skipped: no ClickHouse at 127.0.0.1:9000\n"}
{"Action":"output","Package":"p/a","Test":"TestNeedsServer","Output":"--- SKIP: TestNeedsServer (0.00s)\n"}
{"Action":"skip","Package":"p/a","Test":"TestNeedsServer","Elapsed":0}
{"Action":"pass","Package":"p/a","Elapsed":0.2}
{"Action":"output","Package":"p/b","Test":"TestOnly","Output":"    y_test.go:3: skipped under -short: slow\n"}
{"Action":"skip","Package":"p/b","Test":"TestOnly"}
{"Action":"pass","Package":"p/b","Elapsed":0.01}
`

func TestSummarise(t *testing.T) {
	var out bytes.Buffer
	failed, err := summarise(strings.NewReader(stream), &out)
	if err != nil || failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	for _, want := range []string{
		"ok  \tp/a\t0.200s\t(1 skipped)",
		"ok  \tp/b\t0.010s\t(all 1 tests skipped)",
		"2 tests skipped:",
		"p/a TestNeedsServer: skipped: no ClickHouse at 127.0.0.1:9000",
		"p/b TestOnly: skipped under -short: slow",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
	fail := `{"Action":"output","Package":"p/c","Test":"TestBad","Output":"    z_test.go:9: wrong\n"}
{"Action":"fail","Package":"p/c","Test":"TestBad"}
{"Action":"fail","Package":"p/c","Elapsed":1}
`
	out.Reset()
	if failed, _ := summarise(strings.NewReader(fail), &out); !failed || !strings.Contains(out.String(), "z_test.go:9: wrong") || !strings.Contains(out.String(), "FAIL\tp/c") {
		t.Errorf("a failing test: failed %v\n%s", failed, out.String())
	}
}

// FuzzSummarise: any input, JSON or not, is summarised without a panic.
func FuzzSummarise(f *testing.F) {
	f.Add([]byte(stream))
	f.Add([]byte("# build error\n{\"Action\":\"build-fail\",\"Package\":\"x\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		summarise(bytes.NewReader(b), &out)
	})
}
