package db

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
		return fmt.Errorf("%q is not a duration; use a Go duration such as \"30s\" or \"5m\"", s)
	}
	*d = Duration(v)
	return nil
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
