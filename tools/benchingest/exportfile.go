package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// exportFields are the dcgm-exporter fields gpuledger reads (ingest's
// DefaultMatch): what VictoriaMetrics exports of them for a backfill.
var exportFields = []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}

// writeExportFile writes the fleet's telemetry of days days from start,
// a scrape every interval, as VictoriaMetrics' /api/v1/export of
// gpuledger's series writes it: a JSON line per series with all its
// samples, series after series (dcgm-exporter's per GPU, kube-state-
// metrics' per pod). It also writes the fleet's configuration beside it
// (.yaml). It returns the samples written.
func writeExportFile(path string, gpus, days int, interval time.Duration, start time.Time, seed uint64) (int64, error) {
	f := &fleet{gpus: gpus, nodes: gpus / 8, start: start}
	rng := rand.New(rand.NewPCG(seed, 17))
	f.pods = make([]string, f.nodes)
	for n := range f.pods {
		if rng.Float64() < 0.7 {
			f.pods[n] = fmt.Sprintf("train-%05d-%s-0", n, strconv.FormatUint(rng.Uint64()%1e6, 36))
		}
	}
	if err := os.WriteFile(path+".yaml", []byte(f.config()), 0o644); err != nil {
		return 0, err
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	scrapes := int(time.Duration(days) * 24 * time.Hour / interval)
	var samples int64
	var num []byte
	line := func(labels string, value func(s int) float64, offsetMs int64) {
		w.WriteString(`{"metric":{` + labels + `},"values":[`)
		for s := range scrapes {
			if s > 0 {
				w.WriteByte(',')
			}
			num = strconv.AppendFloat(num[:0], value(s), 'g', -1, 64)
			w.Write(num)
		}
		w.WriteString(`],"timestamps":[`)
		for s := range scrapes {
			if s > 0 {
				w.WriteByte(',')
			}
			num = strconv.AppendInt(num[:0], start.UnixMilli()+int64(s)*interval.Milliseconds()+offsetMs, 10)
			w.Write(num)
		}
		w.WriteString("]}\n")
		samples += int64(scrapes)
	}
	for n := range f.nodes {
		host, pod := nodeName(n), f.pods[n]
		offset := int64(n*7919) % interval.Milliseconds()
		for g := range 8 {
			holder := ""
			if pod != "" {
				holder = fmt.Sprintf(`,"container":"trainer","namespace":%q,"pod":%q`, teamOf(n), pod)
			}
			for _, c := range exportFields {
				labels := fmt.Sprintf(`"__name__":%q,"gpu":"%d","UUID":"GPU-%08x-0000-4000-8000-%012x","modelName":"NVIDIA H100 80GB HBM3","Hostname":%q%s,"job":"dcgm-exporter","instance":"%s:9400"`,
					c, g, n, g, host, holder, host)
				value := func(s int) float64 {
					// Busy GPUs between 50% and 100%, from a hash of the
					// scrape: the same file for a seed.
					act := 0.0
					if pod != "" {
						act = 0.5 + 0.5*float64((uint64(s)*2654435761+uint64(n*8+g)*40503)%1000)/1000
					}
					switch c {
					case "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
						return act
					case "DCGM_FI_DEV_GPU_UTIL":
						return float64(int(act * 100))
					case "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
						return float64(1e9 + int64(s)*10_000_000)
					case "DCGM_FI_DEV_FB_USED":
						return 40_000 * act
					}
					return 100 + 600*act
				}
				line(labels, value, offset)
			}
		}
	}
	for n, pod := range f.pods {
		if pod == "" {
			continue
		}
		common := fmt.Sprintf(`"namespace":%q,"pod":%q,"uid":"%08x-1111-4222-8333-%012x"`, teamOf(n), pod, n, n)
		ksm := `,"job":"kube-state-metrics","instance":"kube-state-metrics:8080"`
		one := func(int) float64 { return 1 }
		job := pod[:len(pod)-2]
		line(`"__name__":"kube_pod_info",`+common+fmt.Sprintf(`,"node":%q,"created_by_kind":"Job","created_by_name":%q`, nodeName(n), job)+ksm, one, 4321)
		line(`"__name__":"kube_pod_status_phase",`+common+`,"phase":"Running"`+ksm, one, 4321)
		line(`"__name__":"kube_pod_container_resource_requests",`+common+fmt.Sprintf(`,"container":"trainer","node":%q,"resource":"nvidia_com_gpu","unit":"integer"`, nodeName(n))+ksm,
			func(int) float64 { return 8 }, 4321)
		line(`"__name__":"kube_pod_labels",`+common+fmt.Sprintf(`,"label_kueue_x_k8s_io_queue_name":"training","label_batch_kubernetes_io_job_name":%q`, job)+ksm, one, 4321)
		line(`"__name__":"kube_pod_owner",`+common+fmt.Sprintf(`,"owner_kind":"Job","owner_name":%q,"owner_is_controller":"true"`, job)+ksm, one, 4321)
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return samples, out.Close()
}
