package handlers

import (
	"testing"
	"time"
)

// sleepers adds a waiter of max for types per entry and puts each to sleep,
// in order: the first is first in line.
func sleepers(t *testing.T, cw *claimWaiters, max int, types ...[]string) []*claimWaiter {
	t.Helper()
	var ws []*claimWaiter
	for _, ts := range types {
		w := newClaimWaiter(ts, max)
		if !cw.add(w) {
			t.Fatalf("add %v: refused", ts)
		}
		if !cw.sleep(w) {
			t.Fatalf("sleep %v: a wake-up was owed", ts)
		}
		ws = append(ws, w)
	}
	return ws
}

// testWaiters is a claimWaiters for limit claims whose recheck does not come
// during a test.
func testWaiters(limit int) *claimWaiters {
	cw := newClaimWaiters(limit)
	cw.recheck = time.Hour
	return cw
}

// woken reports which of ws were signalled, taking the signals.
func woken(ws []*claimWaiter) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		select {
		case <-w.c:
			out[i] = true
		default:
		}
	}
	return out
}

func wantWoken(t *testing.T, what string, ws []*claimWaiter, want ...bool) {
	t.Helper()
	got := woken(ws)
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: woken got %v, want %v", what, got, want)
			return
		}
	}
}

func TestClaimWaiters_Wake(t *testing.T) {
	t.Parallel()
	cw := testWaiters(10)
	ws := sleepers(t, cw, 2, []string{"a"}, []string{"a", "b"}, []string{"a"}, []string{"c"})
	cw.wake("a", 1)
	wantWoken(t, "one job of a", ws, true, false, false, false)
	cw.wake("a", 3) // two waiters of max 2 take 3 jobs
	wantWoken(t, "three jobs of a", ws, false, true, true, false)
	cw.wake("b", 1) // the waiter of b is woken, none of b is asleep: owed
	wantWoken(t, "one job of b, none asleep", ws, false, false, false, false)
	cw.begin(ws[1])
	if cw.sleep(ws[1]) {
		t.Error("a waiter of b went to sleep though a wake-up of b was owed")
	}
	if !cw.sleep(ws[1]) {
		t.Error("the owed wake-up was taken twice")
	}
}

func TestClaimWaiters_Doubt(t *testing.T) {
	t.Parallel()
	cw := testWaiters(10)
	ws := sleepers(t, cw, 1, []string{"a", "b"}, []string{"a"}, []string{"b"}, []string{"c"}, []string{"c"})
	cw.wakeAll()
	// One per type; the first waiter counts for both of its types.
	got := woken(ws)
	if !got[0] || got[1] || got[2] || !got[3] || got[4] {
		t.Fatalf("wakeAll: woken %v, want the first (a and b) and the first of c", got)
	}
	cw.begin(ws[0])
	cw.claimed(ws[0], 1) // full, in doubt: the next in line of a and b
	wantWoken(t, "full claim in doubt", ws, false, true, true, false, false)
	cw.begin(ws[1])
	cw.claimed(ws[1], 0)
	wantWoken(t, "empty claim", ws, false, false, false, false, false)

	// A waiter woken for a counted job that leaves before it claims passes
	// its wake-up on; its full claim would not have.
	cw2 := testWaiters(10)
	ws2 := sleepers(t, cw2, 1, []string{"x"}, []string{"x"}, []string{"x"})
	cw2.wake("x", 1)
	wantWoken(t, "one job of x", ws2, true, false, false)
	cw2.remove(ws2[0])
	wantWoken(t, "the woken left", ws2, false, true, false)
	cw2.begin(ws2[1])
	cw2.claimed(ws2[1], 1)
	wantWoken(t, "a passed-on wake-up claimed full", ws2, false, false, true)
}

func TestClaimWaiters_Limit(t *testing.T) {
	t.Parallel()
	cw := testWaiters(2)
	a, b, c := newClaimWaiter([]string{"a"}, 1), newClaimWaiter([]string{"a"}, 1), newClaimWaiter([]string{"a"}, 1)
	if !cw.add(a) || !cw.add(b) {
		t.Fatal("the first two waiters were refused")
	}
	if cw.add(c) {
		t.Fatal("a third waiter was added past the limit of 2")
	}
	cw.remove(a)
	if !cw.add(c) {
		t.Fatal("a waiter was refused after one left")
	}
	cw.remove(b)
	cw.remove(c)
	if len(cw.byType) != 0 || cw.waiting != 0 {
		t.Fatalf("waiters left after removing all: %d, %v", cw.waiting, cw.byType)
	}
}
