package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestSchedule_Preview(t *testing.T) {
	for _, c := range []struct {
		spec, tz string
		from     time.Time
		wantAt   time.Time // the first fire
		wantNote string    // substring; "" means no note
	}{
		{"30 2 * * *", "America/New_York", time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), "clocks go forward at 02:00 on 2026-03-08"},
		{"30 2 * * *", "America/New_York", time.Date(2026, 3, 9, 5, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), ""},
		{"30 1 * * *", "America/New_York", time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), "01:30 happens twice on 2026-11-01"},
		{"0 * * * *", "Europe/London", time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC), ""},
		{"0 * * * *", "Europe/London", time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), "01:00 happens twice on 2026-10-25"},
		{"15 2 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC), "fires at 02:30"},
		{"@every 1h", "America/New_York", time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC), time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC), ""},
	} {
		s, err := Parse(c.spec, c.tz)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Preview(c.from, 3)
		if len(got) != 3 || !got[0].At.Equal(c.wantAt) {
			t.Fatalf("%s in %s from %v: first fire %v, want %v", c.spec, c.tz, c.from, got, c.wantAt)
		}
		if c.wantNote == "" && got[0].Note != "" || !strings.Contains(got[0].Note, c.wantNote) {
			t.Errorf("%s in %s: note %q, want %q", c.spec, c.tz, got[0].Note, c.wantNote)
		}
		if got[0].At.Location().String() != s.Location().String() {
			t.Errorf("fire not in the schedule's zone: %v", got[0].At.Location())
		}
	}
}
