package flagutil

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// TestValues: each flag type takes what it should, and refuses a bad value
// with a UsageError naming the flag, the value and what it wants.
func TestValues(t *testing.T) {
	newSet := func() (*flag.FlagSet, *time.Time, *time.Time, *time.Duration, *[]float64, *[]uint64, *[]string) {
		fs := NewFlagSet("test", "Tests", &bytes.Buffer{})
		return fs, Month(fs, "month", "2026-10", ""), Time(fs, "at", ""), Days(fs, "days", 1.5, ""),
			Floats(fs, "loads", "0.85", ""), Seeds(fs, "seeds", "1,2", ""), List(fs, "vcs", "", "")
	}
	fs, month, at, days, loads, seeds, vcs := newSet()
	if err := Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	if !month.Equal(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)) || !at.IsZero() || *days != 36*time.Hour ||
		len(*loads) != 1 || (*loads)[0] != 0.85 || len(*seeds) != 2 || *vcs != nil {
		t.Errorf("defaults: %v %v %v %v %v %v", month, at, days, *loads, *seeds, *vcs)
	}
	fs, month, at, days, loads, seeds, vcs = newSet()
	if err := Parse(fs, []string{"-month=2027-02", "-at=2026-10-01T12:00:00Z", "-days=0.5", "-loads=0.7, 1.1", "-seeds=9", "-vcs=a,,b "}); err != nil {
		t.Fatal(err)
	}
	if month.Month() != time.February || at.Hour() != 12 || *days != 12*time.Hour || len(*loads) != 2 || (*seeds)[0] != 9 || strings.Join(*vcs, "|") != "a|b" {
		t.Errorf("given: %v %v %v %v %v %v", month, at, days, *loads, *seeds, *vcs)
	}
	for _, c := range []struct{ arg, want string }{
		{"-month=2026-13", `invalid value "2026-13" for flag -month: not a month; want YYYY-MM`},
		{"-at=yesterday", `invalid value "yesterday" for flag -at: not a time; want RFC 3339`},
		{"-days=-1", `invalid value "-1" for flag -days: want a number of days, 0 or more`},
		{"-days=NaN", `want a number of days`},
		{"-days=1e300", `want a number of days`},
		{"-loads=0.8,x", `invalid value "0.8,x" for flag -loads: item "x": want a positive number`},
		{"-loads=0", `item "0": want a positive number`},
		{"-seeds=", `invalid value "" for flag -seeds: want at least one item, each an unsigned integer`},
		{"-seeds=1,-2", `item "-2": want an unsigned integer`},
	} {
		fs, _, _, _, _, _, _ := newSet()
		err := Parse(fs, []string{c.arg})
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "gpuledger test -help") {
			t.Errorf("%s: %v; want a usage error saying %q", c.arg, err, c.want)
		}
	}
	fs, _, _, _, _, _, _ = newSet()
	if err := Parse(fs, []string{"-help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-help: %v", err)
	}
	fs, _, _, _, _, _, _ = newSet()
	if err := Parse(fs, []string{"stray", "-days=1"}); err == nil || !strings.Contains(err.Error(), `takes no arguments, got "stray" and 1 more (-days=1)`) {
		t.Errorf("a stray word: %v", err)
	}
}

// TestClock: the replay clock reads -clock.start at -clock.epoch and runs
// -clock.speed times as fast; none given, the real clock.
func TestClock(t *testing.T) {
	fs := NewFlagSet("test", "Tests", &bytes.Buffer{})
	mk := Clock(fs)
	epoch := time.Now().Add(-10 * time.Second).UTC().Format(time.RFC3339Nano)
	if err := Parse(fs, []string{"-clock.start=2026-10-01T00:00:00Z", "-clock.epoch=" + epoch, "-clock.speed=60"}); err != nil {
		t.Fatal(err)
	}
	now, err := mk()
	if err != nil {
		t.Fatal(err)
	}
	if got := now().Sub(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); got < 10*time.Minute || got > 11*time.Minute {
		t.Errorf("10 s at 60x after the epoch the clock is %s past the start, want 10 min", got)
	}
	fs = NewFlagSet("test", "Tests", &bytes.Buffer{})
	mk = Clock(fs)
	if err := Parse(fs, []string{"-clock.start=2026-10-01T00:00:00Z", "-clock.speed=0"}); err != nil {
		t.Fatal(err)
	}
	var ue UsageError
	if _, err := mk(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "-clock.speed=0: want more than 0") {
		t.Errorf("speed 0: %v", err)
	}
}

// FuzzValues: no text makes a flag type panic, and what it accepts it
// keeps as given (for -help's default).
func FuzzValues(f *testing.F) {
	for _, s := range []string{"2026-10", "2026-10-01T00:00:00Z", "1.5", "0.7,0.85", "1,2,3", "", ",", "-1", "NaN", "1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs := NewFlagSet("fuzz", "Fuzz", &bytes.Buffer{})
		Month(fs, "a", "", "")
		Time(fs, "b", "")
		Days(fs, "c", 0, "")
		Floats(fs, "d", "", "")
		Seeds(fs, "e", "1", "")
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			if err := fs.Set(name, s); err == nil && fs.Lookup(name).Value.String() != s {
				t.Errorf("-%s=%q accepted but kept as %q", name, s, fs.Lookup(name).Value.String())
			}
		}
	})
}
