package client

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"Tue, 01 Dec 2026 03:00:30 GMT": 30 * time.Second,
		"Tue, 01 Dec 2026 02:59:00 GMT": 0, // past
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: got %s, want %s", v, got, want)
		}
	}
}
