// Package flagutil holds what every gpuledger command does with its flags:
// a flag set whose -help points to the command's documentation, parsing
// that refuses stray words, the logger flag, and flag types that check
// their value when it is given (a month, a time, lists, days), so that a
// bad value is refused by the flag package with the flag's name, the
// value and what was expected, before anything runs.
package flagutil

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// UsageError is a mistake in how a command was called: the binary exits
// with status 2 and the message says what to pass instead.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef makes a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// NewFlagSet returns a flag set whose -help prints the usage line, the
// summary, where docs/commands.md says more, and the flags, to stdout.
func NewFlagSet(command, summary string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: gpuledger %s [flags]\n\n%s.\nMore: docs/commands.md#gpuledger-%s\n\nFlags:\n", command, summary, command)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses a command's flags and refuses what is left: no command
// takes arguments, and Go's flag package stops at the first word that is
// not a flag, so every flag after a stray word would be ignored (a server
// on its default address instead of the one asked for). A value a flag
// refuses is a UsageError naming the flag, the value and what it wants.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err.Error() + " (see 'gpuledger " + fs.Name() + " -help')"}
	}
	if rest := fs.Args(); len(rest) > 0 {
		msg := fmt.Sprintf("gpuledger %s takes no arguments, got %q", fs.Name(), rest[0])
		if len(rest) > 1 {
			msg += fmt.Sprintf(" and %d more (%s)", len(rest)-1, strings.Join(rest[1:], " "))
		}
		return UsageError{msg + "; give flags as -name value, and quote a value with spaces (see 'gpuledger " + fs.Name() + " -help')"}
	}
	return nil
}

// Logger registers -log.level and returns what makes the logger (to
// stderr) once the flags are parsed.
func Logger(fs *flag.FlagSet) func() *slog.Logger {
	level := fs.String("log.level", "info", "minimum level logged to stderr: debug, info, warn or error")
	return func() *slog.Logger {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			l = slog.LevelInfo
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	}
}

// Split splits a comma-separated list, dropping spaces and empty items.
func Split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// value is a flag.Value that keeps the text it was given (for -help's
// default) and parses it with set.
type value struct {
	text string
	set  func(string) error
}

func (v *value) String() string {
	if v == nil {
		return ""
	}
	return v.text
}

func (v *value) Set(s string) error {
	if err := v.set(s); err != nil {
		return err
	}
	v.text = s
	return nil
}

// define registers a flag of set's type with def as its default; a
// default set refuses is a programming error.
func define(fs *flag.FlagSet, name, def, usage string, set func(string) error) {
	v := &value{set: set}
	if def != "" {
		if err := v.Set(def); err != nil {
			panic(fmt.Sprintf("flag -%s: default %q: %v", name, def, err))
		}
	}
	fs.Var(v, name, usage)
}

// Month registers a month flag, YYYY-MM; not given and without a default
// it is the zero time.
func Month(fs *flag.FlagSet, name, def, usage string) *time.Time {
	t := new(time.Time)
	MonthVar(fs, t, name, def, usage)
	return t
}

// MonthVar is Month into t.
func MonthVar(fs *flag.FlagSet, t *time.Time, name, def, usage string) {
	define(fs, name, def, usage, func(s string) (err error) {
		if *t, err = time.Parse("2006-01", s); err != nil {
			return errors.New("not a month; want YYYY-MM such as 2026-10")
		}
		return nil
	})
}

// Time registers an RFC 3339 time flag; not given it is the zero time.
func Time(fs *flag.FlagSet, name, usage string) *time.Time {
	t := new(time.Time)
	define(fs, name, "", usage, func(s string) (err error) {
		if *t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return errors.New("not a time; want RFC 3339 such as 2026-10-01T00:00:00Z")
		}
		return nil
	})
	return t
}

// Days registers a flag given in days (fractions allowed, at least 0).
func Days(fs *flag.FlagSet, name string, def float64, usage string) *time.Duration {
	d := new(time.Duration)
	DaysVar(fs, d, name, def, usage)
	return d
}

// DaysVar is Days into d.
func DaysVar(fs *flag.FlagSet, d *time.Duration, name string, def float64, usage string) {
	unitsVar(fs, d, 24*time.Hour, "days", name, def, usage)
}

// HoursVar registers a flag given in hours (fractions allowed, at least
// 0) into d.
func HoursVar(fs *flag.FlagSet, d *time.Duration, name string, def float64, usage string) {
	unitsVar(fs, d, time.Hour, "hours", name, def, usage)
}

func unitsVar(fs *flag.FlagSet, d *time.Duration, unit time.Duration, units, name string, def float64, usage string) {
	define(fs, name, strconv.FormatFloat(def, 'g', -1, 64), usage, func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0) || f*float64(unit) >= math.MaxInt64 {
			return fmt.Errorf("want a number of %s, 0 or more, such as 1.5", units)
		}
		*d = time.Duration(f * float64(unit))
		return nil
	})
}

// List registers a comma-separated list flag.
func List(fs *flag.FlagSet, name, def, usage string) *[]string {
	l := new([]string)
	ListVar(fs, l, name, def, usage)
	return l
}

// ListVar is List into l.
func ListVar(fs *flag.FlagSet, l *[]string, name, def, usage string) {
	define(fs, name, def, usage, func(s string) error { *l = Split(s); return nil })
}

// Floats registers a comma-separated list of positive numbers.
func Floats(fs *flag.FlagSet, name, def, usage string) *[]float64 {
	l := new([]float64)
	FloatsVar(fs, l, name, def, usage)
	return l
}

// FloatsVar is Floats into l.
func FloatsVar(fs *flag.FlagSet, l *[]float64, name, def, usage string) {
	itemsVar(fs, l, name, def, usage, "a positive number", false, func(item string) (float64, bool) {
		f, err := strconv.ParseFloat(item, 64)
		return f, err == nil && f > 0 && !math.IsInf(f, 0)
	})
}

// Seeds registers a comma-separated list of seeds: unsigned integers, at
// least one.
func Seeds(fs *flag.FlagSet, name, def, usage string) *[]uint64 {
	l := new([]uint64)
	SeedsVar(fs, l, name, def, usage)
	return l
}

// SeedsVar is Seeds into l.
func SeedsVar(fs *flag.FlagSet, l *[]uint64, name, def, usage string) {
	itemsVar(fs, l, name, def, usage, "an unsigned integer", true, func(item string) (uint64, bool) {
		n, err := strconv.ParseUint(item, 10, 64)
		return n, err == nil
	})
}

// itemsVar registers a comma-separated list whose items parse takes,
// refusing the first it does not with what was wanted of it; with
// atLeastOne an empty list is refused too.
func itemsVar[T any](fs *flag.FlagSet, l *[]T, name, def, usage, want string, atLeastOne bool, parse func(string) (T, bool)) {
	define(fs, name, def, usage, func(s string) error {
		var out []T
		for _, item := range Split(s) {
			v, ok := parse(item)
			if !ok {
				return fmt.Errorf("item %q: want %s", item, want)
			}
			out = append(out, v)
		}
		if atLeastOne && len(out) == 0 {
			return fmt.Errorf("want at least one item, each %s", want)
		}
		*l = out
		return nil
	})
}

// Clock registers the replay clock flags: a server replaying recorded
// telemetry (and the chaos tests, which replay hours in minutes) runs on
// a clock of its own, which reads -clock.start at -clock.epoch and goes
// -clock.speed times as fast as real time. Several processes, or one
// restarted, given the same flags, read the same clock. It returns what
// makes the clock once the flags are parsed.
func Clock(fs *flag.FlagSet) func() (func() time.Time, error) {
	start := Time(fs, "clock.start", "replay: the time the server's clock reads at -clock.epoch, RFC 3339; empty for the real clock")
	epoch := Time(fs, "clock.epoch", "replay: the real time, RFC 3339, at which the clock reads -clock.start (default: when the process starts)")
	speed := fs.Float64("clock.speed", 1, "replay: seconds of the clock per real second")
	return func() (func() time.Time, error) {
		if start.IsZero() {
			return time.Now, nil
		}
		if !(*speed > 0) {
			return nil, Usagef("-clock.speed=%v: want more than 0", *speed)
		}
		s, e, sp := *start, *epoch, *speed
		if e.IsZero() {
			e = time.Now()
		}
		return func() time.Time { return s.Add(time.Duration(float64(time.Since(e)) * sp)) }, nil
	}
}
