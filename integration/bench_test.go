package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"

	"github.com/gpuledger/gpuledger/api"
	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/ingest"
)

// defaultCounters are dcgm-exporter's etc/default-counters.csv: what a
// stock deployment sends for every GPU.
var defaultCounters = []string{
	"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
	"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL",
	"DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
	"DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
	"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
}

// fleet is a 15 s remote-write stream of a GPU fleet, as vmagent would send
// it: every default counter of every GPU with dcgm-exporter's labels plus
// vmagent's job and instance, 10,000 series a request (vmagent's
// -remoteWrite.maxRowsPerBlock default), and each pod's kube_pod_labels.
type fleet struct {
	model    *attribution.Model
	requests [][][]byte // per scrape
	samples  int        // per scrape
	series   int
}

func makeFleet(gpus, scrapes int) *fleet {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := gpus / 8
	f := &fleet{model: &attribution.Model{Cluster: "fleet", NamespaceTeams: map[string]string{}}}
	for n := range nodes {
		for g := range 8 {
			f.model.GPUs = append(f.model.GPUs, attribution.GPU{Node: fmt.Sprintf("gpu-node-%05d", n), Index: strconv.Itoa(g),
				Model: "NVIDIA H100 80GB HBM3", Flavor: "h100", RateMicrosPerHour: 6_880_000})
		}
	}
	for i := range 50 {
		f.model.NamespaceTeams[fmt.Sprintf("team-%02d", i)] = fmt.Sprintf("team-%02d", i)
	}
	// 70% of GPUs held, each pod holding one node's eight GPUs.
	pods := make([]string, nodes)
	for n := range pods {
		if rng.Float64() < 0.7 {
			pods[n] = fmt.Sprintf("train-%05d-0", n)
		}
	}
	t0 := simStart.UnixMilli()
	for s := range scrapes {
		ts := t0 + int64(s)*15_000
		var all []prompb.TimeSeries
		for n := range nodes {
			ns := ""
			if pods[n] != "" {
				ns = fmt.Sprintf("team-%02d", n%50)
			}
			host := fmt.Sprintf("gpu-node-%05d", n)
			for g := range 8 {
				labels := func(name string) []prompb.Label {
					return []prompb.Label{
						{Name: "__name__", Value: name}, {Name: "gpu", Value: strconv.Itoa(g)},
						{Name: "UUID", Value: fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", n, g)},
						{Name: "pci_bus_id", Value: fmt.Sprintf("00000000:%02X:00.0", 0x18+g)},
						{Name: "device", Value: "nvidia" + strconv.Itoa(g)}, {Name: "modelName", Value: "NVIDIA H100 80GB HBM3"},
						{Name: "Hostname", Value: host}, {Name: "DCGM_FI_DRIVER_VERSION", Value: "570.133.20"},
						{Name: "container", Value: map[bool]string{true: "trainer"}[ns != ""]},
						{Name: "namespace", Value: ns}, {Name: "pod", Value: pods[n]},
						{Name: "job", Value: "dcgm-exporter"}, {Name: "instance", Value: host + ":9400"},
					}
				}
				act := 0.0
				if ns != "" {
					act = 0.5 + 0.5*rng.Float64()
				}
				for _, c := range defaultCounters {
					v := float64(rng.IntN(1000))
					switch c {
					case "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
						v = act
					case "DCGM_FI_DEV_GPU_UTIL":
						v = float64(int(act * 100))
					case "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
						v = float64(1e9 + s*10_000_000)
					}
					all = append(all, prompb.TimeSeries{Labels: labels(c), Samples: []prompb.Sample{{Value: v, Timestamp: ts}}})
				}
			}
			if pods[n] != "" {
				all = append(all, prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "kube_pod_labels"},
					{Name: "namespace", Value: ns}, {Name: "pod", Value: pods[n]}, {Name: "label_kueue_x_k8s_io_queue_name", Value: "training"},
					{Name: "job", Value: "kube-state-metrics"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: ts}}})
			}
		}
		f.samples, f.series = len(all), len(all)
		var reqs [][]byte
		for i := 0; i < len(all); i += 10_000 {
			wr := prompb.WriteRequest{Timeseries: all[i:min(i+10_000, len(all))]}
			reqs = append(reqs, snappy.Encode(nil, wr.MarshalProtobuf(nil)))
		}
		f.requests = append(f.requests, reqs)
	}
	return f
}

// send POSTs the requests of scrapes [from, to) to url, one at a time on
// one connection, as a single vmagent queue does.
func send(b *testing.B, client *http.Client, url string, f *fleet, from, to int) {
	for _, reqs := range f.requests[from:to] {
		for _, body := range reqs {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Encoding", "snappy")
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				b.Fatalf("POST %s: %s", url, resp.Status)
			}
		}
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkRemoteWriteFleet compares gpuledger's remote-write ingest and
// attribution with VictoriaMetrics single-node's ingest of the
// byte-identical bodies: a 10,000-GPU fleet, 25 default dcgm-exporter
// counters per GPU, 15 s scrapes. Both take the first scrape untimed (new
// series), then the next ones are timed until each has accepted them and
// flushed: gpuledger written its ledger rows, VictoriaMetrics made them
// searchable (/internal/force_flush). Both are sent over loopback HTTP by
// one client. gpuledger runs with its write-ahead log (fsync before each
// answer), and again without, for the log's cost (log-time-ratio). The
// heap gpuledger keeps is reported per active GPU series.
func BenchmarkRemoteWriteFleet(b *testing.B) {
	const gpus, scrapes = 10_000, 5
	f := makeFleet(gpus, scrapes)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	var glTime, noLogTime, vmTime time.Duration
	var perSeries float64
	for i := 0; i < b.N; i++ {
		// gpuledger: with its write-ahead log on local disk, fsynced before
		// each answer, as gpuledger serve runs; then without it, to show
		// what durability costs.
		for _, logged := range []bool{true, false} {
			before := heapInuse()
			store := openStore(b)
			dir := ""
			if logged {
				dir = b.TempDir()
			}
			pl, err := ingest.NewPipeline(f.model, attribution.Options{}, store, ingest.PipelineOptions{Dir: dir,
				Now: func() time.Time { return simStart.Add(2 * time.Minute) }})
			if err != nil {
				b.Fatal(err)
			}
			gl := httptest.NewServer(api.New(api.Options{Store: store, Ingest: pl}).Handler())
			send(b, client, gl.URL+"/api/v1/write", f, 0, 1)
			began := time.Now()
			send(b, client, gl.URL+"/api/v1/write", f, 1, scrapes)
			if err := pl.FlushUntil(context.Background(), simStart.Add(time.Hour)); err != nil {
				b.Fatal(err)
			}
			if logged {
				glTime += time.Since(began)
				perSeries = float64(heapInuse()-before) / float64(gpus*len(defaultCounters))
			} else {
				noLogTime += time.Since(began)
			}
			as := pl.Stats().Attribution
			if len(as.Rejected) != 0 || as.Accepted == 0 {
				b.Fatalf("attribution: %d accepted, rejected %v", as.Accepted, as.Rejected)
			}
			gl.Close()
			pl.Close(context.Background())
		}

		// VictoriaMetrics
		vm := startVictoriaMetrics(b)
		send(b, client, vm+"/api/v1/write", f, 0, 1)
		if resp, err := http.Get(vm + "/internal/force_flush"); err == nil {
			resp.Body.Close()
		}
		began := time.Now()
		send(b, client, vm+"/api/v1/write", f, 1, scrapes)
		resp, err := http.Get(vm + "/internal/force_flush")
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		vmTime += time.Since(began)
	}
	timed := float64(b.N * (scrapes - 1) * f.samples)
	glRate := timed / glTime.Seconds()
	vmRate := timed / vmTime.Seconds()
	b.ReportMetric(glRate, "gpuledger-samples/s")
	b.ReportMetric(timed/noLogTime.Seconds(), "gpuledger-nolog-samples/s")
	b.ReportMetric(glTime.Seconds()/noLogTime.Seconds(), "log-time-ratio")
	b.ReportMetric(vmRate, "victoriametrics-samples/s")
	b.ReportMetric(glRate/vmRate, "ratio")
	b.ReportMetric(float64(glTime.Nanoseconds())/timed, "gpuledger-ns/sample")
	b.ReportMetric(perSeries, "gpuledger-heap-B/series")
}
