package kubetest

import (
	"strings"
	"testing"
)

func TestSeriesSums(t *testing.T) {
	body := `# HELP kueue_pending_workloads Pending workloads
# TYPE kueue_pending_workloads gauge
kueue_pending_workloads{cluster_queue="shared",status="active"} 3
kueue_pending_workloads{cluster_queue="shared",status="inadmissible"} 40
kueue_pending_workloads{cluster_queue="other",status="active"} 2
kueue_admission_attempt_duration_seconds_sum{result="success"} 1.5 1700000000000
kueue_admission_attempt_duration_seconds_sum{result="inadmissible"} 2.25
go_goroutines 12
odd{msg="a \"quoted\", } value"} 1
`
	m, err := SeriesSums([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		"kueue_pending_workloads":                        45,
		`kueue_pending_workloads{status="active"}`:       5,
		`kueue_pending_workloads{status="inadmissible"}`: 40,
		`kueue_pending_workloads{cluster_queue="other"}`: 2,
		"kueue_admission_attempt_duration_seconds_sum":   3.75,
		"go_goroutines":                    12,
		`odd{msg="a \"quoted\", } value"}`: 1,
	} {
		if m[k] != want {
			t.Errorf("%s = %g, want %g", k, m[k], want)
		}
	}
	for _, bad := range []struct{ line, want string }{
		{`x{a="1"`, "want } to end the labels"},
		{`x{a=1} 2`, `want name="value"`},
		{`x{a="1} 2`, "want a closing quote on label a"},
		{`x 1 2 3`, "want a value and an optional timestamp"},
		{`x abc`, `value "abc": want a number`},
		{`{a="1"} 2`, "want a metric name"},
	} {
		_, err := SeriesSums([]byte("ok 1\n" + bad.line + "\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: error %v, want line 2 and %q", bad.line, err, bad.want)
		}
	}
}

func TestProcessCPUSeconds(t *testing.T) {
	busy := 0
	for i := range 200_000_000 {
		busy += i
	}
	sec, err := ProcessCPUSeconds(0)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if sec <= 0 || busy == 0 {
		t.Errorf("this process's CPU seconds %g after a busy loop, want more than 0", sec)
	}
}

func FuzzSeriesSums(f *testing.F) {
	f.Add([]byte("a{b=\"c\"} 1\n# x\nd 2 3\n"))
	f.Add([]byte(`x{a="\\",b="\""} -Inf`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := SeriesSums(body)
		if err == nil && m == nil {
			t.Fatal("no error and no sums")
		}
	})
}
