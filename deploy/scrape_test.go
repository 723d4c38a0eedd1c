package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuledger/gpuledger/ingest"
)

const scrapeConfig = "scrape/vmagent.yml"

// TestScrapeConfigKeepsWhatIngestReads: the vmagent configuration users
// start from keeps every metric gpuledger reads (a job's metric_relabel
// keep rule on __name__ matches it, anchored as Prometheus anchors it),
// and vmagent itself accepts the file.
func TestScrapeConfigKeepsWhatIngestReads(t *testing.T) {
	raw, err := os.ReadFile(scrapeConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName              string `yaml:"job_name"`
			MetricRelabelConfigs []struct {
				SourceLabels []string `yaml:"source_labels"`
				Regex        string   `yaml:"regex"`
				Action       string   `yaml:"action"`
			} `yaml:"metric_relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", scrapeConfig, err)
	}
	kept := map[string][]string{} // metric → jobs keeping it
	for _, job := range cfg.ScrapeConfigs {
		var keeps []*regexp.Regexp
		for _, r := range job.MetricRelabelConfigs {
			if r.Action == "keep" && slices.Equal(r.SourceLabels, []string{"__name__"}) {
				keeps = append(keeps, regexp.MustCompile("^(?:"+r.Regex+")$"))
			}
		}
		if len(keeps) == 0 {
			t.Errorf("job %s keeps every series: give it a keep rule on __name__ for what gpuledger reads", job.JobName)
			continue
		}
		for _, m := range ingest.ReadMetrics {
			if !slices.ContainsFunc(keeps, func(re *regexp.Regexp) bool { return !re.MatchString(m) }) {
				kept[m] = append(kept[m], job.JobName)
			}
		}
	}
	for _, m := range ingest.ReadMetrics {
		if len(kept[m]) == 0 {
			t.Errorf("no job of %s keeps %s, which gpuledger reads", scrapeConfig, m)
		}
	}

	vmagent := vmagentBinary(t)
	if out, err := exec.Command(vmagent, "-promscrape.config="+scrapeConfig, "-promscrape.config.dryRun").CombinedOutput(); err != nil {
		t.Fatalf("vmagent refuses %s: %v\n%s", scrapeConfig, err, out)
	}
}
