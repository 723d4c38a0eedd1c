package sim

import (
	"math"
	"strconv"
	"time"
)

// vLLM's series of the modelled inference endpoints: each endpoint pod is
// a vLLM server of one model (its job's name) that reports the requests
// it runs and waits on, and counts the tokens it generated and the
// requests it finished, as vLLM's /metrics does under a ServiceMonitor
// (namespace and pod from the scrape). Its requests are what lifts the
// device's activity above an idle server's (Activity's 3% floor): about
// four running at the afternoon's peak, Poisson-drawn per scrape, and
// rare at night, when the endpoint idles for tens of minutes at a time.

// vllmFamilies are the families rendered, in the order of vllmState's
// values.
var vllmFamilies = [...]string{
	"# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n",
	"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\n",
	"# HELP vllm:generation_tokens_total Number of generation tokens processed.\n# TYPE vllm:generation_tokens_total counter\n",
	"# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n",
}

// vllmNames are the families' metric names.
var vllmNames = [...]string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens_total", "vllm:request_success_total"}

// vllmState is one endpoint pod's series this scrape.
type vllmState struct {
	running, waiting float64
	tokens, requests float64 // counters since the pod started
	tick             uint64  // the scrape they are for
}

// Modelled serving: tokens generated per running request per second, and
// how long a request runs.
const (
	vllmTokensPerSecond = 30
	vllmRequestSeconds  = 8
	vllmFullLoad        = 4
	// vllmIdleActivity is an idle server's activity, and
	// vllmPeakActivity what the afternoon's peak adds to it (Activity).
	vllmIdleActivity = 0.03
	vllmPeakActivity = 0.55
)

// advanceVLLM moves h's vLLM state to this scrape: the running requests drawn
// for the activity, those beyond the batch's three waiting, and the
// counters grown by what ran over the interval.
func (h *Hold) advanceVLLM(act float64, tick uint64, interval time.Duration) *vllmState {
	if h.vllm == nil {
		h.vllm = &vllmState{}
	}
	v := h.vllm
	if v.tick == tick {
		return v
	}
	v.tick = tick
	n := poisson(max(act-vllmIdleActivity, 0)/vllmPeakActivity*vllmFullLoad, noise(uint64(h.Job.ID)*7919+17, tick))
	v.running, v.waiting = min(n, 3), max(n-3, 0)
	if n > 0 {
		v.tokens += math.Round(n * interval.Seconds() * vllmTokensPerSecond)
		v.requests += max(1, math.Floor(n*interval.Seconds()/vllmRequestSeconds))
	}
	return v
}

// poisson is the Poisson(mean) value at quantile u.
func poisson(mean, u float64) float64 {
	p := math.Exp(-mean)
	cum := p
	k := 0.0
	for u > cum && k < 1000 {
		k++
		p *= mean / k
		cum += p
	}
	return k
}

// appendVLLM appends the scrape's vLLM families for every inference pod.
func (t *Telemetry) appendVLLM(dst []byte) []byte {
	for fam, head := range vllmFamilies {
		dst = append(dst, head...)
		t.eachPod(func(ds *devState) {
			h := ds.hold
			if h.Job.Kind != KindInference {
				return
			}
			v := h.advanceVLLM(ds.act, t.tick, t.interval)
			dst = append(dst, vllmNames[fam]...)
			dst = append(dst, `{engine="0",model_name="`...)
			dst = append(dst, h.Job.Name...)
			dst = append(dst, `",namespace="`...)
			dst = append(dst, h.Job.Namespace...)
			dst = append(dst, `",pod="`...)
			dst = append(dst, h.Pod...)
			if fam == 3 {
				dst = append(dst, `",finished_reason="stop`...)
			}
			dst = append(dst, `"} `...)
			// Whole numbers: what AppendFloat's 'f', -1 writes of them.
			dst = strconv.AppendInt(dst, int64([...]float64{v.running, v.waiting, v.tokens, v.requests}[fam]), 10)
			dst = append(dst, '\n')
		})
	}
	return dst
}
