package schedule

import (
	"testing"
	"time"
)

func BenchmarkSchedule_Next(b *testing.B) {
	for _, tz := range []string{"", "America/New_York"} {
		s, err := Parse("*/5 * * * *", tz)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("tz="+tz, func(b *testing.B) {
			t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				t = s.Next(t)
			}
		})
	}
}

// BenchmarkParse measures Parse of a schedule already seen, as the stores
// call it on every claim and completion of a recurring job.
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse("30 2 * * 1-5", "Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}
