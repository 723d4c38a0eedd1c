package reports

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// How the workbook reads and prints: every number in a format of its
// kind, every column wide enough for what it shows (no ###), headers
// frozen and repeated on every printed page, each sheet printed
// landscape, one page wide. TestWorkbookLibreOffice renders it with
// LibreOffice and checks the pages.

// colKind is how a column's values are shown.
type colKind int

const (
	kText  colKind = iota
	kMoney         // #,##0.00
	kHours         // #,##0.000
	kPct           // 0.0
	kCount         // #,##0
	kDate          // yyyy-mm-dd
)

var kindFormats = map[colKind]string{
	kMoney: "#,##0.00",
	kHours: "#,##0.000",
	kPct:   "0.0",
	kCount: "#,##0",
	kDate:  "yyyy-mm-dd",
}

// xlsxStyles are a workbook's cell styles.
type xlsxStyles struct {
	title, header, wrap int
	// normal and total hold each kind's style, for data rows and for
	// TOTAL rows (bold, a line above).
	normal, total map[colKind]int
}

func newStyles(f *excelize.File) (*xlsxStyles, error) {
	st := &xlsxStyles{normal: map[colKind]int{}, total: map[colKind]int{}}
	var err error
	if st.title, err = f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true, Size: 14}}); err != nil {
		return nil, err
	}
	if st.header, err = f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true},
		Alignment: &excelize.Alignment{WrapText: true, Vertical: "bottom"},
		Border:    []excelize.Border{{Type: "bottom", Color: "000000", Style: 1}}}); err != nil {
		return nil, err
	}
	if st.wrap, err = f.NewStyle(&excelize.Style{Alignment: &excelize.Alignment{WrapText: true, Vertical: "top"}}); err != nil {
		return nil, err
	}
	for _, k := range []colKind{kText, kMoney, kHours, kPct, kCount, kDate} {
		var nf *string
		if s, ok := kindFormats[k]; ok {
			nf = &s
		}
		if st.normal[k], err = f.NewStyle(&excelize.Style{CustomNumFmt: nf}); err != nil {
			return nil, err
		}
		if st.total[k], err = f.NewStyle(&excelize.Style{CustomNumFmt: nf, Font: &excelize.Font{Bold: true},
			Border: []excelize.Border{{Type: "top", Color: "000000", Style: 1}}}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// headerText is a CSV column name as a workbook header: words, so that
// it wraps.
func headerText(h []string) []string {
	out := make([]string, len(h))
	for i, s := range h {
		out[i] = strings.ReplaceAll(s, "_", " ")
	}
	return out
}

// table styles a table of sheet s: its header at headerRow, data rows to
// lastRow, of which totalRow (0 for none) is a TOTAL; kinds per column.
func (st *xlsxStyles) table(f *excelize.File, s string, headerRow, lastRow, totalRow int, kinds []colKind) error {
	if err := f.SetCellStyle(s, cell(1, headerRow), cell(len(kinds), headerRow), st.header); err != nil {
		return err
	}
	if lastRow <= headerRow {
		return nil
	}
	for c, k := range kinds {
		if err := f.SetCellStyle(s, cell(c+1, headerRow+1), cell(c+1, lastRow), st.normal[k]); err != nil {
			return err
		}
		if totalRow > 0 {
			if err := f.SetCellStyle(s, cell(c+1, totalRow), cell(c+1, totalRow), st.total[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// sheetLayout is how a sheet is finished.
type sheetLayout struct {
	// fromRow is the first row whose text sets the columns' widths (a
	// title above it may overflow).
	fromRow int
	// freezeRow is the header row kept in view and repeated on every
	// printed page; 0 for none.
	freezeRow int
	// lastRow and lastCol bound the print area; lastRow may go beyond the
	// data to take in a chart.
	lastRow, lastCol int
	// maxWidth caps a column's width (long text wraps or overflows).
	maxWidth float64
}

// finish sets the sheet's column widths from the text its cells show,
// freezes its header and sets its print layout.
func finish(f *excelize.File, s string, l sheetLayout) error {
	rows, err := f.GetRows(s) // as shown: number formats applied
	if err != nil {
		return err
	}
	if l.maxWidth == 0 {
		l.maxWidth = 48
	}
	widths := make([]float64, l.lastCol)
	for r := l.fromRow - 1; r < len(rows); r++ {
		if r < 0 {
			continue
		}
		header := r+1 == l.freezeRow
		for c, v := range rows[r] {
			if c >= len(widths) || v == "" {
				continue
			}
			w := float64(utf8.RuneCountInString(v))*1.1 + 2 // bold TOTALs and margins
			if header {
				// A header wraps at its words: its longest word sets the width.
				w = 0
				for word := range strings.FieldsSeq(v) {
					w = max(w, float64(utf8.RuneCountInString(word))*1.15+2)
				}
			}
			widths[c] = max(widths[c], min(w, l.maxWidth))
		}
	}
	for c, w := range widths {
		col, err := excelize.ColumnNumberToName(c + 1)
		if err != nil {
			return err
		}
		if err := f.SetColWidth(s, col, col, max(w, 8)); err != nil {
			return err
		}
	}
	if l.freezeRow > 0 {
		if err := f.SetPanes(s, &excelize.Panes{Freeze: true, YSplit: l.freezeRow, TopLeftCell: cell(1, l.freezeRow+1), ActivePane: "bottomLeft"}); err != nil {
			return err
		}
		if err := f.SetDefinedName(&excelize.DefinedName{Name: "_xlnm.Print_Titles", Scope: s,
			RefersTo: fmt.Sprintf("'%s'!$%d:$%d", s, l.freezeRow, l.freezeRow)}); err != nil {
			return err
		}
	}
	lastCol, err := excelize.ColumnNumberToName(max(l.lastCol, 1))
	if err != nil {
		return err
	}
	if err := f.SetDefinedName(&excelize.DefinedName{Name: "_xlnm.Print_Area", Scope: s,
		RefersTo: fmt.Sprintf("'%s'!$A$1:$%s$%d", s, lastCol, max(l.lastRow, 1))}); err != nil {
		return err
	}
	landscape, one, anyHeight := "landscape", 1, 0
	if err := f.SetPageLayout(s, &excelize.PageLayoutOptions{Orientation: &landscape, FitToWidth: &one, FitToHeight: &anyHeight}); err != nil {
		return err
	}
	fit := true
	return f.SetSheetProps(s, &excelize.SheetPropsOptions{FitToPage: &fit})
}
