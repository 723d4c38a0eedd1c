package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// MicrosPerUnit is the number of micro-units in one unit of currency.
const MicrosPerUnit = 1_000_000

// ParseMicros parses a decimal amount such as "6.88" or "-12" into integer
// micro-units, exactly: it never goes through float64. At most six decimals
// are accepted.
func ParseMicros(s string) (int64, error) {
	orig := s
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && (!hasDot || frac == "") {
		return 0, fmt.Errorf("%q is not a decimal amount; want digits such as 12.50", orig)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q has %d decimals; want at most 6 (micro-units)", orig, len(frac))
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%q is not a decimal amount; want digits such as 12.50", orig)
			}
		}
	}
	var w int64
	if whole != "" {
		var err error
		w, err = strconv.ParseInt(whole, 10, 64)
		if err != nil || w > (1<<63-1)/MicrosPerUnit-1 {
			return 0, fmt.Errorf("%q is too large; want at most %d", orig, (1<<63-1)/MicrosPerUnit-1)
		}
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	v := w*MicrosPerUnit + f
	if neg {
		v = -v
	}
	return v, nil
}

// FormatMicros formats micro-units as a decimal amount with six decimals,
// such as "6.880000"; ParseMicros reads it back exactly.
func FormatMicros(v int64) string {
	return string(AppendMicros(nil, v))
}

// AppendMicros appends FormatMicros(v) to dst.
func AppendMicros(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = uint64(-v)
	}
	dst = strconv.AppendUint(dst, u/MicrosPerUnit, 10)
	dst = append(dst, '.')
	frac := u % MicrosPerUnit
	for d := uint64(MicrosPerUnit / 10); d > 0; d /= 10 {
		dst = append(dst, byte('0'+frac/d%10))
	}
	return dst
}

// MicrosPerCent is the number of micro-units in one cent.
const MicrosPerCent = MicrosPerUnit / 100

// Cents rounds micro-units to whole cents, halves to even.
func Cents(v int64) int64 {
	q := v / MicrosPerCent
	if v%MicrosPerCent != 0 && v < 0 {
		q-- // floor
	}
	rem := v - q*MicrosPerCent
	switch {
	case 2*rem > MicrosPerCent, 2*rem == MicrosPerCent && q%2 != 0:
		return q + 1
	}
	return q
}

// FormatCents formats micro-units as an amount in whole cents, rounded
// half to even, such as "6.88" or "-0.50".
func FormatCents(v int64) string {
	c := Cents(v)
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// MicrosToFloat converts micro-units to a float64 amount, for charts and
// display only; never compute money with its result.
func MicrosToFloat(v int64) float64 {
	return float64(v) / MicrosPerUnit
}
