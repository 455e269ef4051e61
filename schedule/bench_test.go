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

// BenchmarkSchedule_Gaps measures the bounds POST /jobs puts on a
// recurring job's jitter and dead-man's switch: the shortest and longest
// gaps among the next 500 slots and those of the next 8 days, and around
// each of the zone's changes in the coming year.
func BenchmarkSchedule_Gaps(b *testing.B) {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []string{"@every 1s", "* * * * *", "*/5 * * * *", "0 * * * *", "0 9 * * 1-5", "0 0 29 2 *"} {
		s, err := Parse(spec, "Europe/Berlin")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(spec, func(b *testing.B) {
			for b.Loop() {
				s.Gaps(t, 500, t.Add(8*24*time.Hour))
			}
		})
	}
}
