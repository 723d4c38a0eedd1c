package demo

import (
	"fmt"
	"io"
	"time"
)

// TextProgress is an Options.Progress that rewrites one line on w (a
// terminal's stderr): the day reached, the samples, the time taken and
// the time left.
func TextProgress(w io.Writer) func(done, total time.Duration, samples uint64) {
	began := time.Now()
	return func(done, total time.Duration, samples uint64) {
		el := time.Since(began)
		eta := time.Duration(float64(el) * float64(total-done) / float64(max(done, 1)))
		fmt.Fprintf(w, "\rday %2d/%d  %6.1fM samples  %5.1fs elapsed  ETA %4.1fs ",
			int(done.Hours()/24), int(total.Hours()/24), float64(samples)/1e6, el.Seconds(), eta.Seconds())
	}
}

// WriteTryIt writes what to open and try once the demo's ledger is served
// on listen: the browser page of the month, and the API's main routes.
func WriteTryIt(w io.Writer, listen string, month time.Time) {
	m, end := month.Format("2006-01"), month.AddDate(0, 1, 0)
	fmt.Fprintf(w, "\nServing on http://%s (Ctrl-C to stop). Open http://%s/?month=%s in a browser, or try:\n", listen, listen, m)
	fmt.Fprintf(w, "  curl 'http://%s/api/v1/cost?from=%s&to=%s&step=month&groupBy=team'\n", listen, m, end.Format("2006-01"))
	fmt.Fprintf(w, "  curl -OJ 'http://%s/api/v1/reports/chargeback/%s?format=xlsx'\n", listen, m)
	fmt.Fprintf(w, "  curl 'http://%s/api/v1/capacity?at=%s'\n", listen, end.Add(-12*time.Hour).Format(time.RFC3339))
	fmt.Fprintf(w, "  curl 'http://%s/api/v1/budgets?at=%s'\n", listen, end.Add(-12*time.Hour).Format(time.RFC3339))
	fmt.Fprintf(w, "  curl http://%s/metrics\n", listen)
}
