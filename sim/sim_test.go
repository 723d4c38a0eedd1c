package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuledger/gpuledger/attribution"
	"github.com/gpuledger/gpuledger/config"
	"github.com/gpuledger/gpuledger/ingest"
)

var start = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMixIsDeterministic(t *testing.T) {
	cfg := exampleConfig(t)
	a := GenerateMix(cfg, start, 7*24*time.Hour, 0.85, 7)
	b := GenerateMix(cfg, start, 7*24*time.Hour, 0.85, 7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different jobs:\n%s", diff)
	}
	c := GenerateMix(cfg, start, 7*24*time.Hour, 0.85, 8)
	if cmp.Equal(a, c) {
		t.Error("another seed gave the same jobs")
	}
	kinds := map[Kind]int{}
	for _, j := range a {
		kinds[j.Kind]++
		if j.Submit.Before(start) || !j.Submit.Before(start.Add(7*24*time.Hour)) || j.Count < 1 || j.Duration <= 0 {
			t.Fatalf("bad job %+v", j)
		}
	}
	if kinds[KindTraining] == 0 || kinds[KindNotebook] == 0 || kinds[KindInference] == 0 {
		t.Errorf("kinds %v: want all three", kinds)
	}
}

// TestRunKeepsQuotasAndDevices: no device is held twice at once, jobs are
// all-or-nothing, and no ClusterQueue ever runs past nominal quota plus
// borrowing limit.
func TestRunKeepsQuotasAndDevices(t *testing.T) {
	cfg := exampleConfig(t)
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(10 * 24 * time.Hour)
	jobs := GenerateMix(cfg, start, end.Sub(start), 0.85, 3)
	st, err := m.Run(jobs, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if st.Admitted == 0 || st.Admitted > st.Submitted {
		t.Fatalf("stats %+v", st)
	}
	type event struct {
		at    time.Time
		delta int
		cq    string
		key   string
	}
	lqCQ := map[string]string{}
	for _, lq := range cfg.LocalQueues {
		lqCQ[lq.Namespace+"/"+lq.Name] = lq.ClusterQueue
	}
	perJob := map[int]int{}
	var events []event
	for _, d := range m.Cluster.Devices {
		for i, h := range d.Holds {
			if i > 0 && h.Start.Before(d.Holds[i-1].End) {
				t.Fatalf("device %s/%d/%s held twice: %+v and %+v", d.Node.Name, d.GPU, d.Profile, d.Holds[i-1], h)
			}
			perJob[h.Job.ID]++
			if d.Profile != h.Job.Profile() {
				t.Fatalf("job %s wants %q, got a %q device", h.Job.Name, h.Job.Resource, d.Profile)
			}
			k := d.Node.Flavor + "/" + h.Job.Resource
			cq := lqCQ[h.Job.Namespace+"/"+h.Job.Queue]
			events = append(events, event{h.Start, 1, cq, k}, event{h.End, -1, cq, k})
		}
	}
	for _, j := range jobs {
		if n, ok := perJob[j.ID]; ok && n != j.Count {
			t.Errorf("job %s holds %d devices, wants %d", j.Name, n, j.Count)
		}
	}
	// Replay usage and check the caps.
	limit := map[string]int{}
	for _, cq := range cfg.ClusterQueues {
		for _, f := range cq.Flavors {
			for _, r := range f.Resources {
				l := r.NominalQuota
				if r.BorrowingLimit != nil {
					l += *r.BorrowingLimit
				} else {
					l = 1 << 30
				}
				limit[cq.Name+"|"+f.Name+"/"+r.Name] = l
			}
		}
	}
	byTime := map[time.Time][]event{}
	var times []time.Time
	for _, e := range events {
		if _, ok := byTime[e.at]; !ok {
			times = append(times, e.at)
		}
		byTime[e.at] = append(byTime[e.at], e)
	}
	slices.SortFunc(times, time.Time.Compare)
	usage := map[string]int{}
	for _, at := range times {
		for _, e := range byTime[at] {
			usage[e.cq+"|"+e.key] += e.delta
		}
		for k, u := range usage {
			if u > limit[k] {
				t.Fatalf("%s: %s uses %d, limit %d", at, k, u, limit[k])
			}
		}
	}
}

type countingSink struct {
	samples map[attribution.Field]int
	pods    int
	labels  map[string]bool
}

func (s *countingSink) Add(x *attribution.Sample) {
	s.samples[x.Field]++
	if x.Pod != "" {
		s.labels[x.Namespace] = true
	}
}
func (s *countingSink) AddPod(attribution.PodInfo)        { s.pods++ }
func (s *countingSink) AddQueue(*attribution.QueueSample) {}

// TestTelemetryParses: every scrape the sim renders is valid exposition with
// the dcgm-exporter label set, and carries the fields attribution needs for
// every GPU and MIG instance.
func TestTelemetryParses(t *testing.T) {
	cfg := exampleConfig(t)
	m, err := NewModel(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(6 * time.Hour)
	if _, err := m.Run(GenerateMix(cfg, start, end.Sub(start), 0.85, 1), start, end); err != nil {
		t.Fatal(err)
	}
	tel := NewTelemetry(m.Cluster, start, end, 15*time.Second)
	var p ingest.Parser
	sink := &countingSink{samples: map[attribution.Field]int{}, labels: map[string]bool{}}
	var scrapes int
	var first []byte
	for {
		at, body, ok := tel.Next(nil)
		if !ok {
			break
		}
		if scrapes == 0 {
			first = body
		}
		scrapes++
		if err := p.ParseExposition(body, at.UnixMilli(), sink); err != nil {
			t.Fatal(err)
		}
	}
	if scrapes != 6*240 {
		t.Errorf("%d scrapes, want %d", scrapes, 6*240)
	}
	// 56 whole GPUs report all five fields; 32 MIG instances all but GPU_UTIL.
	want := map[attribution.Field]int{
		attribution.FieldGPUUtil: 56 * scrapes, attribution.FieldGREngineActive: 88 * scrapes,
		attribution.FieldFBUsed: 88 * scrapes, attribution.FieldPowerUsage: 88 * scrapes, attribution.FieldTotalEnergy: 88 * scrapes,
	}
	if diff := cmp.Diff(want, sink.samples); diff != "" {
		t.Errorf("samples per field (-want +got):\n%s", diff)
	}
	if sink.pods == 0 || len(sink.labels) < 4 {
		t.Errorf("%d pod infos, holders in namespaces %v", sink.pods, sink.labels)
	}
	for _, want := range []string{
		`DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-`,
		`,pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="h100-a-01",DCGM_FI_DRIVER_VERSION="570.133.20",container=`,
		`,GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",Hostname="h100-b-03"`,
		"# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n",
		`kube_pod_labels{namespace="`,
	} {
		if !strings.Contains(string(first), want) {
			t.Errorf("first scrape lacks %q", want)
		}
	}
}
