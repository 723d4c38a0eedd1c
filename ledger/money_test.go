package ledger

import (
	"strings"
	"testing"
	"time"
)

func TestParseMicros(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		got, err := ParseMicros(in)
		if err != nil || got != want {
			t.Errorf("ParseMicros(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	f("6.88", 6_880_000)
	f("3.4309", 3_430_900)
	f("0.000001", 1)
	f("12", 12_000_000)
	f("-5", -5_000_000)
	f("+1.5", 1_500_000)
	f(".5", 500_000)
	f("7.", 7_000_000)
	f(" 2.25 ", 2_250_000)
	f("0.1", 100_000) // not 99_999: never through float64

	bad := func(in, wantErr string) {
		t.Helper()
		_, err := ParseMicros(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseMicros(%q) error %v, want it to contain %q", in, err, wantErr)
		}
	}
	bad("", "not a decimal amount")
	bad(".", "not a decimal amount")
	bad("1.2.3", "not a decimal amount")
	bad("1e3", "not a decimal amount")
	bad("$5", "not a decimal amount")
	bad("1.1234567", "7 decimals")
	bad("99999999999999999999", "too large")
}

func TestFormatMicros(t *testing.T) {
	f := func(in int64, want string) {
		t.Helper()
		if got := FormatMicros(in); got != want {
			t.Errorf("FormatMicros(%d) = %q, want %q", in, got, want)
		}
	}
	f(0, "0.000000")
	f(6_880_000, "6.880000")
	f(-1, "-0.000001")
	f(-12_345_678, "-12.345678")
	f(1<<63-1, "9223372036854.775807")
	f(-1<<63, "-9223372036854.775808")
}

// FuzzParseMicros: no input panics, and whatever parses formats back to the
// same amount.
func FuzzParseMicros(f *testing.F) {
	for _, s := range []string{"6.88", "-0.000001", "", ".", "9223372036853.999999", "1e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMicros(s)
		if err != nil {
			return
		}
		back, err := ParseMicros(FormatMicros(v))
		if err != nil || back != v {
			t.Fatalf("%q → %d → %q → %d, %v", s, v, FormatMicros(v), back, err)
		}
	})
}

func TestStepTruncate(t *testing.T) {
	f := func(s Step, in, want string) {
		t.Helper()
		tm, _ := time.Parse(time.RFC3339, in)
		if got := s.Truncate(tm).Format(time.RFC3339); got != want {
			t.Errorf("%s.Truncate(%s) = %s, want %s", s, in, got, want)
		}
	}
	f(StepHour, "2026-10-05T13:45:00Z", "2026-10-05T13:00:00Z")
	f(StepDay, "2026-10-05T13:45:00+02:00", "2026-10-05T00:00:00Z")
	f(StepMonth, "2026-10-31T23:59:59Z", "2026-10-01T00:00:00Z")
}

func TestCents(t *testing.T) {
	for _, c := range []struct {
		micros int64
		cents  int64
		text   string
	}{
		{6_880_000, 688, "6.88"}, {5_000, 0, "0.00"}, {15_000, 2, "0.02"}, {25_000, 2, "0.02"}, {25_001, 3, "0.03"},
		{-5_000, 0, "0.00"}, {-15_000, -2, "-0.02"}, {-14_999, -1, "-0.01"}, {-1_234_567_890, -123457, "-1234.57"},
	} {
		if got := Cents(c.micros); got != c.cents {
			t.Errorf("Cents(%d) = %d, want %d", c.micros, got, c.cents)
		}
		if got := FormatCents(c.micros); got != c.text {
			t.Errorf("FormatCents(%d) = %q, want %q", c.micros, got, c.text)
		}
	}
}
