package main

import (
	"flag"
	"fmt"
	"time"
)

// clockFlags registers the clock flags of serve: a server replaying
// recorded telemetry (and the chaos tests, which replay hours in minutes)
// runs on a clock of its own, which reads -clock.start at -clock.epoch and
// goes -clock.speed times as fast as real time. Several processes, or one
// restarted, given the same flags, read the same clock. It returns what
// makes the clock.
func clockFlags(fs *flag.FlagSet) func() (func() time.Time, error) {
	start := fs.String("clock.start", "", "replay: the time the server's clock reads at -clock.epoch, RFC 3339; empty for the real clock")
	epoch := fs.String("clock.epoch", "", "replay: the real time, RFC 3339, at which the clock reads -clock.start (default: when the process starts)")
	speed := fs.Float64("clock.speed", 1, "replay: seconds of the clock per real second")
	return func() (func() time.Time, error) {
		if *start == "" {
			return time.Now, nil
		}
		s, err := time.Parse(time.RFC3339Nano, *start)
		if err != nil {
			return nil, usageError{fmt.Sprintf("-clock.start=%q is not RFC 3339; want such as 2026-10-01T00:00:00Z", *start)}
		}
		e := time.Now()
		if *epoch != "" {
			if e, err = time.Parse(time.RFC3339Nano, *epoch); err != nil {
				return nil, usageError{fmt.Sprintf("-clock.epoch=%q is not RFC 3339", *epoch)}
			}
		}
		if !(*speed > 0) {
			return nil, usageError{fmt.Sprintf("-clock.speed=%v: want more than 0", *speed)}
		}
		sp := *speed
		return func() time.Time {
			return s.Add(time.Duration(float64(time.Since(e)) * sp))
		}, nil
	}
}
