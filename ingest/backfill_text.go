package ingest

import (
	"fmt"
	"io"
	"time"
)

// TextProgress sets o's SplitProgress and Progress to lines on w (a
// terminal's stderr) that rewrite themselves: how far the split of a
// file is and the chunks are, with an estimate of the time left.
func (o *BackfillOptions) TextProgress(w io.Writer, source string) {
	began := time.Now()
	o.SplitProgress = func(read, total int64) {
		el := time.Since(began)
		eta := time.Duration(float64(el) * float64(total-read) / float64(max(read, 1)))
		fmt.Fprintf(w, "\rsplitting %s by hour: %.0f of %.0f MiB  %.0f MiB/s  ETA %s ", source, float64(read)/(1<<20), float64(total)/(1<<20),
			float64(read)/(1<<20)/max(el.Seconds(), 1e-3), eta.Round(time.Second))
		if read == total {
			fmt.Fprintln(w)
			began = time.Now() // the chunks' ETA from here
		}
	}
	start := o.Start
	o.Progress = func(p BackfillProgress) {
		done := p.Done
		if !p.Resumed.IsZero() {
			done -= p.Resumed.Sub(start.Truncate(time.Hour))
		}
		eta := time.Duration(float64(time.Since(began)) * float64(p.Total-p.Done) / float64(max(done, time.Millisecond)))
		fmt.Fprintf(w, "\r%5.1f%%  %s of %s  %.1fM samples  ETA %s ",
			100*float64(p.Done)/float64(p.Total), p.Done, p.Total, float64(p.Ingest.Samples)/1e6, eta.Round(time.Second))
	}
}

// WriteSummary writes what a backfill of [start, end) from source did: the
// rows, the samples attributed and rejected (by reason), and the hours it
// restated or adjusted.
func (p BackfillProgress) WriteSummary(w io.Writer, start, end time.Time, source string) {
	var rejected uint64
	for _, n := range p.Attribution.Rejected {
		rejected += n
	}
	fmt.Fprintf(w, "ingested %s to %s from %s: %d ledger rows, %d samples attributed, %d rejected %v\n",
		start.Truncate(time.Hour).Format(time.RFC3339), end.Truncate(time.Hour).Format(time.RFC3339), source,
		p.Rows, p.Attribution.Accepted, rejected, p.Attribution.Rejected)
	if p.Restated > 0 || p.Adjusted > 0 {
		fmt.Fprintf(w, "changed hours already written: %d team-hour(s) restated in open months, %d adjusted in closed months (%d cluster-hour(s) of closed months not rewritten); see the chargeback's Restatements, or GET /api/v1/admin/restatements\n",
			p.Restated, p.Adjusted, p.ClosedHours)
	}
}
