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
