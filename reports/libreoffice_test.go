package reports

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
	"github.com/gpuledger/gpuledger/ledger/embedded"
)

// bigChargeback is a month of amounts as large as a cluster of a few
// hundred GPUs bills (millions a month), for the workbook's widths.
func bigChargeback(t *testing.T) *Chargeback {
	t.Helper()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	teams := []string{"ml-research", "vision", "nlp", "data-science", ledger.TeamUnowned, ledger.TeamUnallocated}
	oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var rows []ledger.Row
	for h := oct; h.Month() == time.October; h = h.Add(time.Hour) {
		for i, team := range teams {
			for j, flavor := range []string{"h100", "a100"} {
				gpus := float64(10+7*i+3*j) + float64(h.Hour()%5)
				price := []int64{6_880_000, 3_430_900}[j]
				cost := int64(gpus*float64(price)) + 1_234 // no exact half-cents
				r := ledger.Row{Key: ledger.Key{Hour: h, Cluster: "c1", Team: team, Namespace: team, Flavor: flavor},
					GPUSeconds: gpus * 3600, ActiveGPUSeconds: gpus * 3600 * 0.6, CostMicros: cost, IdleCostMicros: cost * 4 / 10,
					EnergyJoules: gpus * 3600 * 650, EnergyCostMicros: int64(gpus) * 91_000}
				if team == ledger.TeamUnallocated {
					r.ActiveGPUSeconds, r.IdleCostMicros, r.UnallocatedCostMicros = 0, 0, cost
				}
				rows = append(rows, r)
			}
		}
	}
	wl := []ledger.WorkloadRow{{Hour: oct, Cluster: "c1", Team: "vision", Namespace: "vision", Kind: "PyTorchJob", Name: "resnet-sweep-0042",
		GPUSeconds: 64 * 3600 * 300, ActiveGPUSeconds: 64 * 3600 * 90, CostMicros: 64 * 300 * 6_880_000, IdleCostMicros: 64 * 210 * 6_880_000}}
	if err := s.WriteHours(context.Background(), rows, wl); err != nil {
		t.Fatal(err)
	}
	cb, err := Build(context.Background(), s, oct, Options{Currency: "USD", Teams: teams[:4],
		Budgets: map[string]int64{"ml-research": 150_000_000_000, "vision": 900_000_000_000, "nlp": 10_000_000, "data-science": 500_000_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

// TestWorkbookLibreOffice renders the workbook the way an accountant
// opens it, with LibreOffice (Debian's libreoffice-calc), to PDF and to
// page images (poppler-utils' pdftotext and pdftoppm): no cell shows ###
// (a column too narrow for its number), every Summary row shows the CSV's
// figures in their formats, and the whole workbook prints on a few pages.
// The PDF and PNG pages go to $GPULEDGER_ARTIFACTS when it is set.
func TestWorkbookLibreOffice(t *testing.T) {
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		soffice, err = exec.LookPath("libreoffice")
	}
	if err != nil {
		testenv.Missing(t, "LibreOffice (apt-get install libreoffice-calc) renders the workbook")
	}
	for _, tool := range []string{"pdftotext", "pdftoppm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s (apt-get install poppler-utils) reads the rendered pages", tool)
		}
	}
	for _, c := range []struct {
		name     string
		cb       *Chargeback
		maxPages int
	}{
		{"small", testChargeback(t), 8},
		{"big", bigChargeback(t), 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			xlsx := filepath.Join(dir, "chargeback.xlsx")
			var buf bytes.Buffer
			if err := c.cb.WriteXLSX(&buf); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(xlsx, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(soffice, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"), "--headless", "--norestore",
				"--convert-to", "pdf", "--outdir", dir, xlsx)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
			pdf := filepath.Join(dir, "chargeback.pdf")
			text, err := exec.Command("pdftotext", "-layout", pdf, "-").Output()
			if err != nil {
				t.Fatalf("pdftotext: %v", err)
			}
			if bytes.Contains(text, []byte("###")) {
				t.Errorf("a cell shows ### (its column is too narrow):\n%s", text)
			}
			pages := filepath.Join(dir, "page")
			if out, err := exec.Command("pdftoppm", "-png", "-r", "60", pdf, pages).CombinedOutput(); err != nil {
				t.Fatalf("pdftoppm: %v\n%s", err, out)
			}
			pngs, _ := filepath.Glob(pages + "*.png")
			if len(pngs) == 0 || len(pngs) > c.maxPages {
				t.Errorf("the workbook prints on %d pages, want 1-%d", len(pngs), c.maxPages)
			}
			if art := os.Getenv("GPULEDGER_ARTIFACTS"); art != "" {
				for _, p := range append(pngs, pdf) {
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(art, "workbook-"+c.name+"-"+filepath.Base(p)), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkSummaryText(t, c.cb, string(text))
		})
	}
}

var pdfNumber = regexp.MustCompile(`-?[0-9][0-9,]*\.[0-9]+`)

// csvRecords is cb's CSV, read back.
func csvRecords(t *testing.T, cb *Chargeback) [][]string {
	t.Helper()
	var buf bytes.Buffer
	if err := cb.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkSummaryText finds each Summary row in the rendered text (one line
// per row, the sheet printed one page wide) and compares its numbers
// with the CSV's, formatted as the workbook formats them.
func checkSummaryText(t *testing.T, cb *Chargeback, text string) {
	t.Helper()
	recs := csvRecords(t, cb)
	head := recs[0]
	lines := strings.Split(text, "\n")
	for _, rec := range recs[1:] {
		if strings.Contains(rec[0], ":") {
			continue // a note line: not on the sheet
		}
		var want []string
		for i, v := range rec {
			if v == "" || i == 0 || head[i] == "currency" || head[i] == "note" {
				continue
			}
			want = append(want, shown(t, head[i], v))
		}
		found := false
		for _, l := range lines {
			fields := strings.Fields(l)
			if len(fields) == 0 || fields[0] != rec[0] {
				continue
			}
			found = true
			got := pdfNumber.FindAllString(l, -1)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("Summary row %s as rendered:\n  %v\nthe CSV's figures, formatted:\n  %v", rec[0], got, want)
			}
			break
		}
		if !found {
			t.Errorf("Summary row %s is not in the rendered text", rec[0])
		}
	}
}

// shown formats a CSV value as the workbook's number format for its
// column shows it.
func shown(t *testing.T, column, v string) string {
	t.Helper()
	switch {
	case column == "efficiency_pct":
		return v
	case strings.Contains(column, "hours") || column == "energy_kwh":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		return thousands(strconv.FormatFloat(f, 'f', 3, 64))
	default:
		m, err := ledger.ParseMicros(v)
		if err != nil {
			t.Fatalf("column %s: %v", column, err)
		}
		return thousands(ledger.FormatCents(m))
	}
}

// thousands puts a comma between each three digits of the whole part.
func thousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	out := b.String() + "." + frac
	if neg {
		out = "-" + out
	}
	return out
}
