package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/ledger"
)

// RestatementPoint is one team-hour a rewrite changed, as the audit route
// answers it.
type RestatementPoint struct {
	At             time.Time `json:"at"`
	Cluster        string    `json:"cluster"`
	Hour           time.Time `json:"hour"`
	Team           string    `json:"team"`
	Before         string    `json:"before"`
	After          string    `json:"after"`
	Change         string    `json:"change"`
	BeforeMicros   int64     `json:"beforeMicros"`
	AfterMicros    int64     `json:"afterMicros"`
	BeforeGPUHours float64   `json:"beforeGpuHours"`
	AfterGPUHours  float64   `json:"afterGpuHours"`
	Source         string    `json:"source"`
	By             string    `json:"by"`
	Reason         string    `json:"reason"`
	// BilledIn is the month (YYYY-MM) an adjustment of a closed month is
	// billed in; empty for a restatement of an open month.
	BilledIn string `json:"billedIn,omitempty"`
}

func restatementPoints(rs []ledger.Restatement) []RestatementPoint {
	out := make([]RestatementPoint, 0, len(rs))
	for _, r := range rs {
		p := RestatementPoint{At: r.At, Cluster: r.Cluster, Hour: r.Hour, Team: r.Team,
			Before: ledger.FormatMicros(r.BeforeMicros), After: ledger.FormatMicros(r.AfterMicros), Change: ledger.FormatMicros(r.DeltaMicros()),
			BeforeMicros: r.BeforeMicros, AfterMicros: r.AfterMicros, BeforeGPUHours: r.BeforeGPUSeconds / 3600, AfterGPUHours: r.AfterGPUSeconds / 3600,
			Source: r.Source, By: r.By, Reason: r.Reason}
		if r.Adjustment() {
			p.BilledIn = r.BilledIn.Format("2006-01")
		}
		out = append(out, p)
	}
	return out
}

// restatements answers GET /api/v1/admin/restatements?from=&to=&cluster=&team=
// (admins): every team-hour of the range a rewrite changed, with its
// figures before and after, and who, with what and why.
func (s *Server) restatements(c echo.Context) error {
	v, from, to, team, err := s.readQuery(c)
	if err != nil {
		return err
	}
	rs, err := s.opts.Store.Restatements(c.Request().Context(), v.Get("cluster"), from, to)
	if err != nil {
		return err
	}
	if team != "" {
		rs = ofTeam(rs, team)
	}
	return c.JSON(http.StatusOK, RestatementsResponse{From: from, To: to, Currency: s.opts.Report.Currency, Restatements: restatementPoints(rs)})
}

// RestatementsResponse is GET /api/v1/admin/restatements's answer.
type RestatementsResponse struct {
	From         time.Time          `json:"from"`
	To           time.Time          `json:"to"`
	Currency     string             `json:"currency"`
	Restatements []RestatementPoint `json:"restatements"`
}

// ofTeam keeps the restatements of team.
func ofTeam(rs []ledger.Restatement, team string) []ledger.Restatement {
	out := rs[:0]
	for _, r := range rs {
		if r.Team == team {
			out = append(out, r)
		}
	}
	return out
}

// ClosePoint is a closed month.
type ClosePoint struct {
	Month string    `json:"month"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	Note  string    `json:"note"`
}

// closes answers GET /api/v1/admin/closes: the months closed.
func (s *Server) closes(c echo.Context) error {
	if _, err := params(c); err != nil {
		return err
	}
	cs, err := s.opts.Store.ClosedMonths(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]ClosePoint, 0, len(cs))
	for _, m := range cs {
		out = append(out, ClosePoint{Month: m.Month.Format("2006-01"), At: m.At, By: m.By, Note: m.Note})
	}
	return c.JSON(http.StatusOK, ClosesResponse{Closes: out})
}

// ClosesResponse is GET /api/v1/admin/closes's answer.
type ClosesResponse struct {
	Closes []ClosePoint `json:"closes"`
}

// closeMonth answers POST /api/v1/admin/close?month=YYYY-MM&note= (admins):
// closes the month in the name of the request's token (ledger.CloseMonth).
func (s *Server) closeMonth(c echo.Context) error {
	v, err := params(c, "month", "note")
	if err != nil {
		return err
	}
	m, err := time.Parse("2006-01", v.Get("month"))
	if err != nil {
		return badf("month=%q is not a month; want YYYY-MM, such as 2026-10", v.Get("month"))
	}
	now := time.Now().UTC()
	mc := ledger.MonthClose{Month: m, At: now, By: principalOf(c).name, Note: v.Get("note")}
	if err := ledger.CloseMonth(c.Request().Context(), s.opts.Store, mc, now); err != nil {
		if errors.Is(err, ledger.ErrMonthClosed) {
			return echo.NewHTTPError(http.StatusConflict, err.Error())
		}
		return badf("%s", err.Error())
	}
	return c.JSON(http.StatusOK, ClosePoint{Month: m.Format("2006-01"), At: now, By: mc.By, Note: mc.Note})
}
