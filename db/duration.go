package db

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that travels as a Go duration string ("30s",
// "5m") on the wire, as every duration of the API does.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\" or \"5m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration; use a Go duration such as \"30s\" or \"5m\"%s", s, DaysHint(s))
	}
	*d = Duration(v)
	return nil
}

// dayUnits are days and weeks in a duration as people write them (30d,
// 2w, 1d12h), which Go's durations do not have.
var dayUnits = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?)([dw])`)

// DaysHint is, for a duration v written with days or weeks, what to add
// to the message refusing it: the same in hours, " (a duration has no
// days: 30d is 720h)"; "" for anything else.
func DaysHint(v string) string {
	if !dayUnits.MatchString(v) {
		return ""
	}
	hours := dayUnits.ReplaceAllStringFunc(v, func(m string) string {
		n, _ := strconv.ParseFloat(m[:len(m)-1], 64)
		if m[len(m)-1] == 'w' {
			n *= 7
		}
		return strconv.FormatFloat(n*24, 'f', -1, 64) + "h"
	})
	d, err := time.ParseDuration(hours)
	if err != nil {
		return ""
	}
	s := d.String() // 720h0m0s, written without its zero minutes and seconds
	if m, ok := strings.CutSuffix(s, "m0s"); ok {
		s = m + "m"
	}
	if h, ok := strings.CutSuffix(s, "h0m"); ok {
		s = h + "h"
	}
	return fmt.Sprintf(" (a duration has no days: %s is %s)", v, s)
}

// Backoff is the delay before retry number attempt+1 after attempt failed:
// base doubled per attempt, capped at MaxBackoff, with "equal jitter" (a
// uniform draw from the upper half) so that jobs failing together do not
// retry together. rnd returns a float in [0,1); nil uses math/rand/v2.
func Backoff(attempt int, base time.Duration, rnd func() float64) time.Duration {
	if base <= 0 {
		base = DefaultBackoff
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	d := base
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	half := d / 2
	return half + time.Duration(rnd()*float64(d-half))
}
