package schedule

import (
	"fmt"
	"time"
)

// Fire is one upcoming slot of a schedule, with a note when daylight saving
// time moved or merged it.
type Fire struct {
	At   time.Time `json:"at"`             // in the schedule's timezone
	Note string    `json:"note,omitempty"` // why this slot is not the plain wall-clock time, if it is not
}

// PreviewFrom returns n slots from slot on, slot (one of s's) first, with
// their DST notes: the upcoming slots of a job whose pending slot is slot.
func (s *Schedule) PreviewFrom(slot time.Time, n int) []Fire {
	if n < 1 {
		return []Fire{}
	}
	return append([]Fire{{At: slot.In(s.loc), Note: s.note(slot)}}, s.Preview(slot, n-1)...)
}

// Preview returns the next n slots after t with their DST notes.
func (s *Schedule) Preview(t time.Time, n int) []Fire {
	fires := make([]Fire, 0, n)
	for range n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		fires = append(fires, Fire{At: t.In(s.loc), Note: s.note(t)})
	}
	return fires
}

// note explains a slot that DST touched: moved out of a spring-forward gap,
// or fired once in a fall-back repeat.
func (s *Schedule) note(at time.Time) string {
	if s.every > 0 {
		return ""
	}
	local := at.In(s.loc)
	start, _ := local.ZoneBounds()
	if start.IsZero() {
		return ""
	}
	before := start.Add(-time.Nanosecond).In(s.loc)
	_, prevOff := before.Zone()
	name, curOff := local.Zone()
	naive := toNaive(at, s.loc)
	if at.Equal(start) && curOff > prevOff && !s.spec.Next(naive.Add(-time.Second)).Equal(naive) {
		gapFrom := toNaive(before, s.loc).Add(time.Nanosecond)
		return fmt.Sprintf("clocks go forward at %s on %s: the wall-clock slot does not exist that day and fires at %s %s, the first instant after the gap",
			gapFrom.Format("15:04"), local.Format("2006-01-02"), local.Format("15:04"), name)
	}
	if s.repeatsLater(at) {
		return fmt.Sprintf("%s happens twice on %s as clocks go back: it fires once, at the first (%s)",
			local.Format("15:04"), local.Format("2006-01-02"), name)
	}
	return ""
}

// repeatsLater reports whether the wall time of at comes round again after
// the next transition (at lies in the first pass of a fall-back repeat).
func (s *Schedule) repeatsLater(at time.Time) bool {
	local := at.In(s.loc)
	_, end := local.ZoneBounds()
	if end.IsZero() || end.Sub(at) > 3*time.Hour {
		return false
	}
	_, cur := local.Zone()
	_, next := end.In(s.loc).Zone()
	if next >= cur {
		return false
	}
	return sameWall(at.Add(time.Duration(cur-next)*time.Second).In(s.loc), toNaive(at, s.loc))
}
