package kubetest

// What the stack's processes are doing: Kueue's own metrics (its
// scheduler's cycles and pending workloads) and each process's CPU time,
// so that a run on a sped-up clock can say whether the control plane kept
// up with it.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KueueMetrics reads Kueue's metrics endpoint (HTTPS with its own
// certificate on 127.0.0.1, authorised by the stack's admin token) and
// returns SeriesSums of it.
func (s *Stack) KueueMetrics(ctx context.Context) (map[string]float64, error) {
	if s.kueueMetrics == "" {
		return nil, fmt.Errorf("kueue metrics: the stack runs no Kueue")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.kueueMetrics, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Config.BearerToken)
	// Kueue serves its metrics with a certificate it makes itself; the
	// address is the loopback one the stack gave it.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kueue metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("kueue metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kueue metrics: %s: %s", resp.Status, bytes.TrimSpace(body[:min(len(body), 300)]))
	}
	return SeriesSums(body)
}

// SeriesSums sums a Prometheus text exposition's samples by metric name,
// and by name and each label pair: "kueue_pending_workloads" is the sum
// over all its series, `kueue_pending_workloads{status="active"}` over
// those with that label. A line that is not a sample is an error naming
// its number and what was expected.
func SeriesSums(body []byte) (map[string]float64, error) {
	sums := map[string]float64{}
	for n, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest, err := splitSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line[:min(len(line), 80)], err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 {
			return nil, fmt.Errorf("line %d %q: want a value and an optional timestamp after the series, got %d fields", n+1, line[:min(len(line), 80)], len(fields))
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value %q: want a number", n+1, fields[0])
		}
		sums[name] += v
		for _, l := range labels {
			sums[name+"{"+l+"}"] += v
		}
	}
	return sums, nil
}

// splitSample splits a sample line into its metric name, its label pairs
// (each as name="value", quoted as in the line) and the rest.
func splitSample(line string) (name string, labels []string, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", nil, "", fmt.Errorf("want a metric name and a value")
	}
	name, rest = line[:i], line[i:]
	if rest[0] != '{' {
		return name, nil, rest, nil
	}
	rest = rest[1:]
	for {
		rest = strings.TrimLeft(rest, " ,")
		if rest == "" {
			return "", nil, "", fmt.Errorf("want } to end the labels")
		}
		if rest[0] == '}' {
			return name, labels, rest[1:], nil
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return "", nil, "", fmt.Errorf("want name=\"value\" in the labels")
		}
		end := eq + 2
		for ; end < len(rest) && rest[end] != '"'; end++ {
			if rest[end] == '\\' {
				end++
			}
		}
		if end >= len(rest) {
			return "", nil, "", fmt.Errorf("want a closing quote on label %s", rest[:eq])
		}
		labels = append(labels, rest[:end+1])
		rest = rest[end+1:]
	}
}

// CPUSeconds is each of the stack's processes' CPU time so far (user and
// system, from /proc/PID/stat at 100 ticks a second, Linux's USER_HZ), by
// its binary's name; a process whose figure cannot be read is left out.
func (s *Stack) CPUSeconds() map[string]float64 {
	out := map[string]float64{}
	for _, p := range s.procs {
		if p.Process == nil {
			continue
		}
		if sec, err := ProcessCPUSeconds(p.Process.Pid); err == nil {
			out[filepath.Base(p.Path)] += sec
		}
	}
	return out
}

// ProcessCPUSeconds reads a process's user and system CPU time from
// /proc/PID/stat (0 for PID means this process).
func ProcessCPUSeconds(pid int) (float64, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: state is the
	// first (field 3), utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: want the command in parentheses", path)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: want at least 15 fields, got %d", path, len(f)+2)
	}
	var ticks float64
	for _, s := range f[11:13] {
		t, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: CPU ticks %q: want a number", path, s)
		}
		ticks += t
	}
	return ticks / 100, nil
}
