package clock_test

import (
	"testing"
	"time"

	"github.com/sked-dev/sked/clock"
)

// fakeClocks are a wall clock and a monotonic clock the test moves apart.
type fakeClocks struct{ wall, mono time.Time }

func (f *fakeClocks) tick(d time.Duration) { f.wall, f.mono = f.wall.Add(d), f.mono.Add(d) }

func TestGuard_BackwardStepHolds(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeClocks{wall: start, mono: time.Unix(0, 0)}
	var steps []clock.Step
	g := clock.NewGuard(func() time.Time { return f.wall }, func() time.Time { return f.mono }, func(s clock.Step) { steps = append(steps, s) })
	g.Now()
	f.tick(10 * time.Minute)
	g.Now()
	if hold, _ := g.Holding(); hold {
		t.Fatal("holding without a step")
	}
	// The clock steps back an hour (a box booting before NTP, say).
	f.wall = f.wall.Add(-time.Hour)
	if hold, until := g.Holding(); !hold || !until.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("Holding = %v until %v, want true until %v", hold, until, start.Add(10*time.Minute))
	}
	if len(steps) != 1 || !steps[0].Backward() {
		t.Fatalf("steps = %+v, want one backward step", steps)
	}
	f.tick(59 * time.Minute)
	if hold, _ := g.Holding(); !hold {
		t.Fatal("released before the clock passed the latest time seen")
	}
	f.tick(time.Minute)
	if hold, _ := g.Holding(); hold {
		t.Fatal("still holding once the clock passed the latest time seen")
	}
	if len(steps) != 1 {
		t.Fatalf("normal ticks counted as steps: %+v", steps)
	}
}

func TestGuard_ForwardStep(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeClocks{wall: start, mono: time.Unix(0, 0)}
	g := clock.NewGuard(func() time.Time { return f.wall }, func() time.Time { return f.mono }, nil)
	g.Now()
	f.tick(time.Minute)
	f.wall = f.wall.Add(3 * time.Hour)
	g.Now()
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{start.Add(30 * time.Second), false},
		{start.Add(time.Hour), true},
		{start.Add(3*time.Hour + time.Minute), true},
		{start.Add(4 * time.Hour), false},
	} {
		if got := g.JumpedOver(c.at); got != c.want {
			t.Errorf("JumpedOver(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	if hold, _ := g.Holding(); hold {
		t.Fatal("a forward step holds firing")
	}
}

func TestGuard_Virtual(t *testing.T) {
	v := clock.NewVirtual(time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC))
	var steps []clock.Step
	g := clock.NewGuard(v.Now, v.Elapsed, func(s clock.Step) { steps = append(steps, s) })
	g.Now()
	g.Now() // a frozen clock does not step
	if len(steps) != 0 {
		t.Fatalf("frozen virtual clock stepped: %+v", steps)
	}
	v.Advance(2 * time.Hour)
	g.Now()
	v.Set(time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC))
	if hold, until := g.Holding(); !hold || !until.Equal(time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("Holding = %v until %v", hold, until)
	}
	if len(steps) != 2 || steps[0].Backward() || !steps[1].Backward() {
		t.Fatalf("steps = %+v, want forward then backward", steps)
	}
}
