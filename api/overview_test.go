package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuledger/gpuledger/capacity"
	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
)

// overviewServer is the test ledger (Oct 1-2 2026: ml holds one of two
// H100s, a workload of ml's) with budgets, behind tokens.
func overviewServer(t *testing.T) *Server {
	base, _ := authServer(t)
	opts := base.opts
	opts.Capacity = CapacityOptions{Cluster: "c1", Rule: capacity.DefaultRule, PricesMicros: map[string]int64{"h100": 6_880_000},
		Budgets: map[string]int64{"ml": 500_000_000}, Now: func() time.Time { return time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC) }}
	return New(opts)
}

// TestOverviewSignIn: the page asks a browser for a token, keeps a viewer
// token in an HttpOnly cookie, refuses a token that may read no costs (a
// team's goes to its team's page: TestTeamPage), and the cookie opens no
// API route.
func TestOverviewSignIn(t *testing.T) {
	ts := httptest.NewServer(overviewServer(t).Handler())
	defer ts.Close()
	b := newBrowser(t, ts)
	get := func(path string) (int, string) {
		code, _, body := b.get(path)
		return code, body
	}
	if code, body := get("/"); code != http.StatusUnauthorized || !strings.Contains(body, `<form method="post" action="/login">`) {
		t.Fatalf("signed out: %d %s", code, body)
	}
	post := b.login
	if code := post("secret-vmagent"); code != http.StatusForbidden {
		t.Errorf("a remote-write token signed in: %d", code)
	}
	if code := post("nonsense"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token signed in: %d", code)
	}
	if code := post("secret-finops"); code != http.StatusOK { // redirected to the page
		t.Fatalf("a viewer token: %d", code)
	}
	u, _ := url.Parse(ts.URL)
	for _, ck := range b.jar.Cookies(u) {
		if ck.Name == tokenCookie && ck.Value != "secret-finops" {
			t.Errorf("cookie %v", ck)
		}
	}
	if code, body := get("/?month=2026-10"); code != http.StatusOK || !strings.Contains(body, `id="cost-chart"`) {
		t.Fatalf("signed in: %d %s", code, body)
	}
	if code, _ := get("/api/v1/cost?from=2026-10&to=2026-11"); code != http.StatusUnauthorized {
		t.Errorf("the page's cookie opened the API: %d", code)
	}
}

// headless starts Debian's Chromium headless for the test, with a
// 90-second deadline, and returns its context and a function that saves a
// full-page screenshot as $GPULEDGER_ARTIFACTS/<name> (for CI's
// artefacts; a temporary folder without it).
func headless(t *testing.T, height int) (context.Context, func(name string)) {
	t.Helper()
	bin := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Headless,
		chromedp.WindowSize(1200, height), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	dir := os.Getenv("GPULEDGER_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return ctx, func(name string) {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", filepath.Join(dir, name), len(png))
	}
}

// signIn is the sign-in form driven as a user does: open url, send the
// token, and wait for landed, an element of the page signed in. Not h1:
// the sign-in page has one, and navigating before the form's answer
// came aborted it.
func signIn(url, token, landed string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(landed)),
	}
}

// chromium finds Debian's chromium, or ends the test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "no chromium to drive (apt-get install chromium)")
	return ""
}

// TestOverviewInChromium drives a real headless Chromium through the sign-in
// form to the overview of October 2026 and checks that the chart and the
// tables show the ledger's numbers, then September (no hours) by the
// page's link and October again by its month picker; it saves screenshots
// ($GPULEDGER_ARTIFACTS/overview.png when set, for CI's artefacts).
func TestOverviewInChromium(t *testing.T) {
	testenv.Slow(t, "headless Chromium")
	srv := overviewServer(t)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	want, err := srv.opts.Store.Query(context.Background(), ledger.Query{From: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC),
		To: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Step: ledger.StepMonth, GroupBy: []ledger.Dimension{ledger.DimTeam}, Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, shot := headless(t, 1000)
	if err := chromedp.Do(ctx, append(signIn(ts.URL+"/?month=2026-10", "secret-finops", `#pick`),
		chromedp.Navigate(ts.URL+"/?month=2026-10"),
		chromedp.WaitVisible(chromedp.CSS(`#cost-chart`)),
	)...); err != nil {
		t.Fatal(err)
	}
	bars, err := chromedp.Run(ctx, chromedp.AttributesAll(chromedp.CSSAll(`#cost-chart g.bar`)))
	if err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	total, budgets, idle, capacityText := text(`#total`), text(`#budgets`), text(`#idle`), text(`#capacity`)
	shot("overview.png")
	got := map[string]string{}
	for _, b := range bars {
		got[b["data-team"]] = b["data-cost"]
	}
	var sum int64
	for _, r := range want {
		sum += r.CostMicros
		if got[r.Team] != ledger.FormatCents(r.CostMicros) {
			t.Errorf("the chart's bar of %s says %q, the ledger %s", r.Team, got[r.Team], ledger.FormatCents(r.CostMicros))
		}
	}
	if len(bars) != len(want) || total != ledger.FormatCents(sum) {
		t.Errorf("%d bars (ledger: %d teams), total %q (ledger %s)", len(bars), len(want), total, ledger.FormatCents(sum))
	}
	// ml: 36 hours of one H100 by Oct 2 12:00, 247.68 of 500.
	for _, w := range []struct{ what, text, want string }{
		{"budgets", budgets, "247.68"}, {"idle leaderboard", idle, "ml/Job/a"}, {"capacity", capacityText, "not enough history"},
	} {
		if !strings.Contains(w.text, w.want) {
			t.Errorf("%s lacks %q: %q", w.what, w.want, w.text)
		}
	}
	// The month before, by the page's own link: no hours, said so, and
	// its budgets at nothing spent; then back by the month picker.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="?month=2026-09"]`)), chromedp.WaitVisible(chromedp.CSS(`#nodata`))); err != nil {
		t.Fatal(err)
	}
	if h1, budgets := text(`h1`), text(`#budgets`); !strings.Contains(h1, "2026-09") || !strings.Contains(budgets, "0.00") || strings.Contains(budgets, "247.68") {
		t.Errorf("September: heading %q, budgets %q", h1, budgets)
	}
	shot("overview-2026-09.png")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#pick input[name=month]`), "2026-10"),
		chromedp.Submit(chromedp.CSS(`#pick input[name=month]`)),
		chromedp.WaitVisible(chromedp.CSS(`#cost-chart`)),
	); err != nil {
		t.Fatal(err)
	}
	if total := text(`#total`); total != ledger.FormatCents(sum) {
		t.Errorf("October again by the month picker: total %q, want %s", total, ledger.FormatCents(sum))
	}
}

// TestOverviewFinishedMonth: October shown on November 15th: the budgets
// are October's whole spend (final), not the empty month after it; and
// the teams' rows add up to the TOTAL shown, rounded as the chargeback's
// table rounds them.
func TestOverviewFinishedMonth(t *testing.T) {
	srv := overviewServer(t)
	srv.opts.Capacity.Now = func() time.Time { return time.Date(2026, 11, 15, 9, 0, 0, 0, time.UTC) }
	code, _, body := callH(t, srv, "/?month=2026-10", "finops")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	// ml: 48 hours of one H100 at 6.88: 330.24 of 500, 66%.
	i := strings.Index(body, `id="budgets"`)
	if i < 0 || !strings.Contains(body, "Budgets, final") || !strings.Contains(body[i:], "330.24") || !strings.Contains(body[i:], "66%") {
		t.Errorf("October's budgets on November 15th: %s", body[max(i, 0):])
	}
}

// TestRoundColumn: three rows of 1.005 show 1.01, 1.01 and 1.00 under a
// TOTAL of 3.02 (each rounded alone: 1.00 three times, under 3.02).
func TestRoundColumn(t *testing.T) {
	rows := []ledger.Row{{CostMicros: 1_005_000}, {CostMicros: 1_005_000}, {CostMicros: 1_005_000}}
	got := roundColumn(rows, func(r *ledger.Row) int64 { return r.CostMicros })
	if want := []string{"1.01", "1.01", "1.00", "3.02"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// TestOverviewOpensOnNewestMonth: without a month, the page opens on the
// newest month the ledger has hours of (October, asked in November), not
// on an empty current month.
func TestOverviewOpensOnNewestMonth(t *testing.T) {
	srv := overviewServer(t)
	srv.opts.Capacity.Now = func() time.Time { return time.Date(2026, 11, 15, 9, 0, 0, 0, time.UTC) }
	code, _, body := callH(t, srv, "/", "finops")
	if code != http.StatusOK || !strings.Contains(body, "GPU cost, 2026-10") || !strings.Contains(body, `id="cost-chart"`) {
		t.Errorf("/ on November 15th: %d %s", code, body)
	}
}
