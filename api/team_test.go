package api

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuledger/gpuledger/internal/testenv"
	"github.com/gpuledger/gpuledger/ledger"
)

// browser is a browser-like client of a test server: it keeps the
// cookie and follows redirects.
type browser struct {
	t      *testing.T
	ts     *httptest.Server
	jar    *cookiejar.Jar
	client *http.Client
}

func newBrowser(t *testing.T, ts *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, ts: ts, jar: jar, client: &http.Client{Jar: jar}}
}

// login posts the sign-in form with token, and returns the status of
// where it leads.
func (b *browser) login(token string) int {
	resp, err := b.client.PostForm(b.ts.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// get returns the status, the path it ended at and the body of path.
func (b *browser) get(path string) (int, string, string) {
	resp, err := b.client.Get(b.ts.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, resp.Request.URL.Path, string(body)
}

// signedIn is a browser signed in with token.
func signedIn(t *testing.T, ts *httptest.Server, token string) func(path string) (int, string, string) {
	b := newBrowser(t, ts)
	b.login(token)
	return b.get
}

// TestTeamPage: a team's token signs in and lands on its team's page
// (the overview of every team is not for it), may not open another
// team's, and downloads its own chargeback only; a viewer opens any team's
// page from the overview and downloads the whole month's.
func TestTeamPage(t *testing.T) {
	ts := httptest.NewServer(overviewServer(t).Handler())
	defer ts.Close()
	ml := signedIn(t, ts, "secret-ml-dash")
	code, path, body := ml("/?month=2026-10")
	if code != http.StatusOK || path != "/team/ml" || !strings.Contains(body, "GPU cost of ml, 2026-10") || strings.Contains(body, `id="teams"`) {
		t.Fatalf("ml's token at /: %d %s\n%s", code, path, body)
	}
	// ml: 48 hours of one H100 at 6.88 (the ledger's two days), 247.68 of
	// a budget of 500.00 spent by Oct 2 12:00; its workload listed; a
	// day's bar each.
	for _, want := range []string{`id="cost">330.24<`, `247.68 of 500.00, forecast`, `ml/Job/a`, `data-day="2026-10-01"`, `data-day="2026-10-02"`,
		`href="/reports/chargeback/2026-10?format=csv&amp;team=ml"`} {
		if !strings.Contains(body, want) {
			t.Errorf("ml's page lacks %q", want)
		}
	}
	if strings.Contains(body, "all teams") {
		t.Error("ml's page links to every team's overview")
	}
	if code, _, body := ml("/team/vision?month=2026-10"); code != http.StatusForbidden || !strings.Contains(body, `not team=&#34;vision&#34;`) {
		t.Errorf("ml's token at vision's page: %d %s", code, body)
	}
	if code, _, body := ml("/team/ml?month=2026-09"); code != http.StatusOK || !strings.Contains(body, `id="nodata"`) {
		t.Errorf("ml's September (no hours): %d %s", code, body)
	}
	code, _, body = ml("/reports/chargeback/2026-10?format=csv")
	if lines := strings.Split(strings.TrimSpace(body), "\n"); code != http.StatusOK || len(lines) != 3 || !strings.HasPrefix(lines[1], "ml,") {
		t.Errorf("ml's download: %d\n%s", code, body)
	}
	if code, _, _ := ml("/reports/chargeback/2026-10?format=csv&team=vision"); code != http.StatusForbidden {
		t.Errorf("ml's token downloading vision's: %d", code)
	}

	finops := signedIn(t, ts, "secret-finops")
	code, _, body = finops("/?month=2026-10")
	if code != http.StatusOK || !strings.Contains(body, `<a href="/team/ml?month=2026-10">ml</a>`) || !strings.Contains(body, `href="/reports/chargeback/2026-10?format=xlsx"`) {
		t.Fatalf("the overview's links: %d\n%s", code, body)
	}
	if code, _, body := finops("/team/ml?month=2026-10"); code != http.StatusOK || !strings.Contains(body, "all teams") {
		t.Errorf("a viewer at ml's page: %d %s", code, body)
	}
	resp, err := http.Get(ts.URL + "/reports/chargeback/2026-10?format=xlsx")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a download signed out: %d", resp.StatusCode)
	}
	code, _, body = finops("/reports/chargeback/2026-10?format=xlsx")
	if code != http.StatusOK || !strings.HasPrefix(body, "PK") {
		t.Errorf("a viewer's workbook: %d, %.40q", code, body)
	}
}

// TestTeamPageInChromium drives headless Chromium with a team's token:
// signed in, it lands on the team's page of the newest month with data,
// whose figures are the ledger's, then on a month with none; a viewer's
// overview links to the same page. Screenshots go to $GPULEDGER_ARTIFACTS
// (team-ml-2026-10.png, team-ml-2026-09.png).
func TestTeamPageInChromium(t *testing.T) {
	testenv.Slow(t, "headless Chromium")
	srv := overviewServer(t)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	oct := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	want, err := srv.opts.Store.Query(context.Background(), ledger.Query{From: oct, To: oct.AddDate(0, 1, 0), Step: ledger.StepMonth, Cluster: "c1", Team: "ml"})
	if err != nil || len(want) != 1 {
		t.Fatalf("%v %v", want, err)
	}
	ctx, shot := headless(t, 900)
	if err := chromedp.Do(ctx, signIn(ts.URL+"/", "secret-ml-dash", `#daily`)...); err != nil {
		t.Fatal(err)
	}
	cost, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#cost`)))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "/team/ml") || cost != ledger.FormatCents(want[0].CostMicros) {
		t.Errorf("signed in with ml's token: at %s, cost %q; want ml's page, %s", loc, cost, ledger.FormatCents(want[0].CostMicros))
	}
	days, err := chromedp.Run(ctx, chromedp.AttributesAll(chromedp.CSSAll(`#daily g.day`)))
	if err != nil || len(days) != 2 {
		t.Errorf("%d daily bars (%v); want the ledger's 2 days", len(days), err)
	}
	shot("team-ml-2026-10.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="?month=2026-09"]`)), chromedp.WaitVisible(chromedp.CSS(`#nodata`))); err != nil {
		t.Fatal(err)
	}
	shot("team-ml-2026-09.png")
	// The month picker: a plain form, no script.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#pick input[name=month]`), "2026-10"), chromedp.Submit(chromedp.CSS(`#pick input`)),
		chromedp.WaitVisible(chromedp.CSS(`#daily`))); err != nil {
		t.Fatal(err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/team/ml?month=2026-10") {
		t.Errorf("picked October: at %s (%v)", loc, err)
	}
}
