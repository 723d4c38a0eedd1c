package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScaleToZeroRequests: a gateway's log of two endpoints over two days
// is replayed request by request. chat gets a burst every 2 hours (5
// requests a second apart, a 60 s load): scaling down between bursts makes
// every burst wait. report gets one request a day (the default 120 s
// load). Within the default SLA (at most 5% wait) both keep a replica;
// within a p95 of 90 s chat scales to zero and report, whose requests
// would wait 2 minutes, does not.
func TestScaleToZeroRequests(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("timestamp,endpoint,service_seconds\n")
	start := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	for h := 0; h < 48; h += 2 {
		for i := range 5 {
			fmt.Fprintf(&b, "%s,serve/chat,3\n", start.Add(time.Duration(h)*time.Hour+time.Duration(i)*time.Second).Format(time.RFC3339))
		}
	}
	for d := range 2 {
		fmt.Fprintf(&b, "%d,batch/report,120\n", start.Add(time.Duration(d)*24*time.Hour+3*time.Hour).Unix())
	}
	log := filepath.Join(dir, "access.csv")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run1 := func(args ...string) (string, string) {
		out := filepath.Join(dir, "out")
		var stdout bytes.Buffer
		if err := run(context.Background(), append([]string{"scale-to-zero", "-requests=" + log, "-out=" + out, "-coldStart=chat=1:60s"}, args...), &stdout); err != nil {
			t.Fatalf("%v\n%s", err, stdout.String())
		}
		csv, err := os.ReadFile(filepath.Join(out, "scale-to-zero-requests.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), string(csv)
	}
	stdout, csv := run1()
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	// KEDA's default: 115 of chat's 120 requests wait (all but the first
	// burst's), both of report's.
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "batch/report,2,2,1,120,48.00,1,") || !strings.HasSuffix(lines[1], ",2,120,326.60") ||
		!strings.HasPrefix(lines[2], "serve/chat,120,2,1,60,48.00,1,") || !strings.Contains(lines[2], ",11.50,115,60,") {
		t.Fatalf("per endpoint:\n%s\nwant both kept (2 days, 1 GPU, loads of 120 s and 60 s), KEDA's default waiting 2 and 115 requests\n%s", csv, stdout)
	}
	if objs, _ := filepath.Glob(filepath.Join(dir, "out", "keda", "*.yaml")); len(objs) != 0 {
		t.Errorf("KEDA objects %v for endpoints that keep a replica", objs)
	}
	_, csv = run1("-sla.maxP95Extra=90s")
	lines = strings.Split(strings.TrimSpace(csv), "\n")
	if !strings.HasPrefix(lines[1], "batch/report,2,2,1,120,48.00,1,") || !strings.HasPrefix(lines[2], "serve/chat,120,2,1,60,48.00,0,") {
		t.Errorf("within a p95 of 90 s:\n%s\nwant serve/chat scaled to zero, batch/report kept", csv)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "keda", "serve-chat.yaml")); err != nil {
		t.Errorf("serve/chat's KEDA object: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-requests=" + filepath.Join(dir, "none.csv")}, "no such file"},
		{[]string{"-requests=" + log, "-month=2026-10"}, "pass one"},
	} {
		err := run(context.Background(), append([]string{"scale-to-zero", "-out=" + filepath.Join(dir, "bad")}, c.args...), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error saying %q", c.args, err, c.want)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("timestamp,endpoint,service_seconds\n2026-10-05T00:00:00Z,a,soon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"scale-to-zero", "-requests=" + bad, "-out=" + filepath.Join(dir, "bad")}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), `line 2: service_seconds "soon"`) {
		t.Errorf("a bad service time: %v; want the line and field named", err)
	}
}
