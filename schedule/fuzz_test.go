package schedule

import (
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics on untrusted text and that a
// schedule it accepts always moves forward, from fixed instants around DST
// transitions and from a fuzzed one (sec, Unix seconds folded into
// 1900–2200).
func FuzzParse(f *testing.F) {
	seeds := []struct{ spec, tz string }{
		// robfig/cron v3.0.1 panics on a TZ= prefix without a space.
		{"TZ=", ""},
		{"TZ=UTC", ""},
		{"CRON_TZ=Europe/London 0 * * * *", ""},
		// Descriptors, with and without arguments.
		{"@every", ""},
		{"@every 90s", "America/New_York"},
		{"@hourly", "Australia/Lord_Howe"},
		// Too many fields, values out of range, impossible dates.
		{"* * * * * * *", ""},
		{"60 * * * *", ""},
		{"0 0 30 2 *", ""},
		// DST-sensitive wall times.
		{"30 2 * * *", "America/New_York"},
		{"*/15 1 * * *", "Europe/London"},
		{"15 2 * * *", "Australia/Lord_Howe"},
		{"0 0 29 2 *", "UTC"},
		{"*/7 */3 1-15/2 jan-jun mon-fri", "Asia/Kolkata"},
	}
	for _, s := range seeds {
		f.Add(s.spec, s.tz, int64(1793430000)) // 2026-10-31T07:00:00Z
	}
	starts := []time.Time{
		time.Date(2026, 3, 8, 6, 59, 59, 0, time.UTC),      // before New York's gap
		time.Date(2026, 11, 1, 6, 30, 0, 500, time.UTC),    // New York's repeat, second pass
		time.Date(2026, 10, 3, 15, 29, 0, 0, time.UTC),     // before Lord Howe's gap
		time.Date(2026, 4, 4, 15, 10, 0, 0, time.UTC),      // Lord Howe's repeat, second pass
		time.Date(2099, 12, 31, 23, 59, 59, 999, time.UTC), // century
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, spec, tz string, sec int64) {
		s, err := Parse(spec, tz)
		if err != nil {
			return
		}
		const lo, span = -2208988800, 300 * 365 * 86400 // from 1900
		fuzzed := time.Unix(lo+((sec%span)+span)%span, sec&0x3fffffff)
		for _, at := range append(starts, fuzzed) {
			next := s.Next(at)
			if next.IsZero() {
				continue
			}
			if !next.After(at) {
				t.Fatalf("Parse(%q, %q).Next(%v) = %v, want after it", spec, tz, at, next)
			}
			if again := s.Next(next); !again.IsZero() && !again.After(next) {
				t.Fatalf("Parse(%q, %q).Next(%v) = %v, want after it", spec, tz, next, again)
			}
		}
		// Slots terminates and agrees with Next.
		slots, total := s.Slots(fuzzed, fuzzed.Add(2*time.Hour), 3)
		if total < len(slots) || (len(slots) > 0 && !slots[0].Equal(s.Next(fuzzed))) {
			t.Fatalf("Parse(%q, %q).Slots(%v) = %v, %d; Next = %v", spec, tz, fuzzed, slots, total, s.Next(fuzzed))
		}
	})
}
