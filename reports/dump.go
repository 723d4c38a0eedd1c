package reports

import (
	"archive/zip"
	"bytes"
	"fmt"
	"strings"

	"github.com/xuri/excelize/v2"
)

// DumpXLSX renders a workbook as text: each sheet's name, then its non-empty
// cells row by row as A1=value, then the charts the file holds. Tests compare
// workbooks through it rather than through zip bytes.
func DumpXLSX(data []byte) (string, error) {
	f, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("open workbook: %w", err)
	}
	defer f.Close()
	var b strings.Builder
	for _, sheet := range f.GetSheetList() {
		fmt.Fprintf(&b, "== sheet %s\n", sheet)
		rows, err := f.GetRows(sheet)
		if err != nil {
			return "", fmt.Errorf("read sheet %s: %w", sheet, err)
		}
		for r, row := range rows {
			var cells []string
			for c, v := range row {
				if v == "" {
					continue
				}
				cells = append(cells, cell(c+1, r+1)+"="+v)
			}
			if len(cells) > 0 {
				b.WriteString(strings.Join(cells, " | "))
				b.WriteByte('\n')
			}
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("open workbook zip: %w", err)
	}
	for _, zf := range zr.File {
		if strings.HasPrefix(zf.Name, "xl/charts/chart") {
			fmt.Fprintf(&b, "== chart %s\n", zf.Name)
		}
	}
	return b.String(), nil
}
