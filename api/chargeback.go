package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuledger/gpuledger/reports"
)

// chargeback answers GET /api/v1/reports/chargeback/YYYY-MM?format=csv|xlsx|focus&cluster=&team=
// A team's token gets its own team's chargeback only (format=focus: its
// own rows, with their ratios of each pool's cost).
func (s *Server) chargeback(c echo.Context) error {
	v, err := params(c, "format", "cluster", "team")
	if err != nil {
		return err
	}
	m := c.Param("month")
	month, err := time.Parse("2006-01", m)
	if err != nil {
		return badf("month %q is not a month; want YYYY-MM such as 2026-10", m)
	}
	format := v.Get("format")
	if format == "" {
		format = "xlsx"
	}
	if format != "csv" && format != "xlsx" && format != "focus" {
		return badf("format=%q is not a report format; want csv, xlsx or focus", format)
	}
	opts := s.opts.Report
	if cl := v.Get("cluster"); cl != "" {
		opts.Cluster = cl
	}
	if opts.Team, err = teamFilter(c, v.Get("team")); err != nil {
		return err
	}
	opts.FOCUS = format == "focus"
	cb, err := reports.Build(c.Request().Context(), s.opts.Store, month, opts)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	ctype := "text/csv; charset=utf-8"
	name, ext := cb.FileBase(), format
	switch format {
	case "csv":
		err = cb.WriteCSV(&b)
	case "focus":
		err = cb.WriteFOCUS(&b)
		name, ext = strings.TrimSuffix(cb.FocusFileName(), ".csv"), "csv"
	default:
		err = cb.WriteXLSX(&b)
		ctype = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	if err != nil {
		return fmt.Errorf("render %s report: %w", format, err)
	}
	if opts.Team != "" {
		name += "-" + opts.Team
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s.%s"`, name, ext))
	return c.Blob(http.StatusOK, ctype, b.Bytes())
}
