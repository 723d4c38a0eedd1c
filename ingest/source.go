package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuledger/gpuledger/attribution"
)

// Source is where a backfill reads telemetry from.
type Source interface {
	// Fetch passes every sample with from <= t < to (and the pod series of
	// that range) to sink, through p.
	Fetch(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error
	// Name identifies the source in checkpoints and logs.
	Name() string
}

// DefaultMatch selects the series gpuledger reads: the DCGM fields, the
// kube-state-metrics pod series, Kueue's and the controller's queue series
// and vLLM's endpoint series.
var DefaultMatch = []string{
	`{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}`,
	`{__name__=~"kube_pod_labels|kube_pod_owner|kube_pod_container_resource_requests|kube_pod_info"}`,
	`kube_pod_status_phase{phase="Running"}`,
	`{__name__=~"kueue_pending_workloads|kueue_admission_wait_time_seconds_bucket|gpuledger_pending_workload_gpus|gpuledger_pending_workload_age_seconds_bucket"}`,
	`{__name__=~"vllm:num_requests_running|vllm:num_requests_waiting|vllm:generation_tokens_total|vllm:request_success_total|gpuledger_endpoint_arrivals_total"}`,
}

// rangeSink keeps the samples of [from, to).
type rangeSink struct {
	Sink
	from, to int64
}

func (r rangeSink) Add(s *attribution.Sample) {
	if s.TimeMs >= r.from && s.TimeMs < r.to {
		r.Sink.Add(s)
	}
}

func (r rangeSink) AddPod(p attribution.PodInfo) {
	if p.TimeMs >= r.from && p.TimeMs < r.to {
		r.Sink.AddPod(p)
	}
}

func (r rangeSink) AddQueue(q *attribution.QueueSample) {
	if q.TimeMs >= r.from && q.TimeMs < r.to {
		r.Sink.AddQueue(q)
	}
}

// NewSource returns the source a -from flag names: file:///path for a file
// of text exposition (.prom, .txt) or export JSON lines (.jsonl, .json);
// prometheus+http://host:9090 for a Prometheus server (query_range); any
// other http(s) URL for VictoriaMetrics (/api/v1/export).
func NewSource(from string, client *http.Client, step time.Duration) (Source, error) {
	u, err := url.Parse(from)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("-from=%q is not a URL; want file:///path/to/export.jsonl, http://victoriametrics:8428 or prometheus+http://prometheus:9090", from)
	}
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Minute}
	}
	switch u.Scheme {
	case "file":
		return &FileSource{Path: u.Path}, nil
	case "http", "https":
		return &VMExport{BaseURL: strings.TrimSuffix(from, "/"), Match: DefaultMatch, Client: client}, nil
	case "prometheus+http", "prometheus+https":
		base := strings.TrimPrefix(from, "prometheus+")
		return &PromQueryRange{BaseURL: strings.TrimSuffix(base, "/"), Step: step, Client: client}, nil
	}
	return nil, fmt.Errorf("-from=%q: scheme %q is not file, http, https or prometheus+http(s)", from, u.Scheme)
}

// FileSource reads a file of text exposition (with timestamps on the lines,
// or one scrape taken at the start of the range) or export JSON lines.
// Prepared (Preparer), it reads the file once and each Fetch only its
// range's part.
type FileSource struct {
	Path string
	// SpillDir is where Prepare writes the file's samples by hour; the
	// system's temporary directory when empty.
	SpillDir string
	split    *split
}

// Name is file:<path>.
func (f *FileSource) Name() string { return "file:" + f.Path }

// Fetch reads the range's samples: from what Prepare split when it covers
// the range, else from the whole file.
func (f *FileSource) Fetch(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error {
	if f.split != nil && f.split.covers(from, to) {
		return f.fetchSplit(ctx, from, to, p, sink)
	}
	body, err := os.ReadFile(f.Path)
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Path, err)
	}
	rs := rangeSink{sink, from.UnixMilli(), to.UnixMilli()}
	if strings.HasSuffix(f.Path, ".jsonl") || strings.HasSuffix(f.Path, ".json") {
		return p.ParseExportLines(body, rs)
	}
	return p.ParseExposition(body, from.UnixMilli(), rs)
}

// VMExport reads VictoriaMetrics' /api/v1/export.
type VMExport struct {
	BaseURL string
	Match   []string
	Client  *http.Client
}

// Name is the base URL.
func (v *VMExport) Name() string { return v.BaseURL }

// Fetch exports [from, to) of the matched series.
func (v *VMExport) Fetch(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error {
	q := url.Values{}
	for _, m := range v.Match {
		q.Add("match[]", m)
	}
	// VictoriaMetrics takes Unix seconds with a fraction, and its range is
	// inclusive at both ends: samples at to are dropped below.
	q.Set("start", unixSeconds(from))
	q.Set("end", unixSeconds(to))
	body, err := get(ctx, v.Client, v.BaseURL+"/api/v1/export?"+q.Encode())
	if err != nil {
		return err
	}
	return p.ParseExportLines(body, rangeSink{sink, from.UnixMilli(), to.UnixMilli()})
}

func get(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", redact(u), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", redact(u), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s: %.300s", redact(u), resp.Status, body)
	}
	return body, nil
}

// redact drops the query of a URL for messages.
func redact(u string) string {
	base, _, _ := strings.Cut(u, "?")
	return base
}

// PromQueryRange reads a Prometheus server's /api/v1/query_range, one
// metric at a time, at Step: the fallback where no raw export exists. Its
// samples are Prometheus' evaluation at each step, not the raw scrapes.
type PromQueryRange struct {
	BaseURL string
	Step    time.Duration
	Client  *http.Client
}

// Name is the base URL.
func (q *PromQueryRange) Name() string { return "prometheus:" + q.BaseURL }

// promMetrics are the metrics queried one by one: what ingest reads, the
// phase series only where the pod runs.
var promMetrics = func() []string {
	ms := slices.Clone(ReadMetrics)
	ms[slices.Index(ms, MetricKubePodPhase)] += `{phase="Running"}`
	return ms
}()

type promResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// Fetch queries each metric over [from, to).
func (q *PromQueryRange) Fetch(ctx context.Context, from, to time.Time, p *Parser, sink Sink) error {
	step := q.Step
	if step <= 0 {
		step = 15 * time.Second
	}
	var lines []byte
	for _, m := range promMetrics {
		v := url.Values{}
		v.Set("query", m)
		v.Set("start", strconv.FormatInt(from.Unix(), 10))
		v.Set("end", strconv.FormatInt(to.Add(-time.Millisecond).Unix(), 10))
		v.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
		body, err := get(ctx, q.Client, q.BaseURL+"/api/v1/query_range?"+v.Encode())
		if err != nil {
			return err
		}
		var r promResponse
		if err := json.Unmarshal(body, &r); err != nil {
			return fmt.Errorf("query_range %s: answer is not Prometheus JSON: %w", m, err)
		}
		if r.Status != "success" {
			return fmt.Errorf("query_range %s: %s", m, r.Error)
		}
		// Re-encode as export lines so one decoder handles both.
		for _, res := range r.Data.Result {
			line := exportLine{Metric: res.Metric}
			name, _, _ := strings.Cut(m, "{")
			line.Metric["__name__"] = name
			for _, pair := range res.Values {
				sec, ok1 := pair[0].(float64)
				val, ok2 := pair[1].(string)
				if !ok1 || !ok2 {
					return fmt.Errorf("query_range %s: a value is not [time, \"value\"]", m)
				}
				raw, _ := json.Marshal(val)
				line.Values = append(line.Values, raw)
				line.Timestamps = append(line.Timestamps, int64(sec*1000))
			}
			b, _ := json.Marshal(line)
			lines = append(append(lines, b...), '\n')
		}
	}
	return p.ParseExportLines(lines, rangeSink{sink, from.UnixMilli(), to.UnixMilli()})
}

func unixSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}
