package handlers

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// Bounds of the waiting claims.
const (
	// DefaultMaxClaimWaits bounds the POST /claims that wait at once when
	// Config.MaxClaimWaits is zero.
	DefaultMaxClaimWaits = 1000
	// claimRecheck is the longest a type with waiting claims goes without
	// one of them looking at the store, for jobs that became due without a
	// wake-up (leases that ran out, writes of the in-process pool).
	claimRecheck = time.Second
	// retryClaimAfter is the Retry-After, in seconds, of a claim refused
	// because as many claims as allowed wait already.
	retryClaimAfter = 5
	// refusedLogEvery spaces the log lines of refused claims.
	refusedLogEvery = 10 * time.Second
)

// claimWaiters is where the long polls of POST /claims wait, and the one
// place that decides which of them claim when, so that a job that becomes
// due costs about one claim, not one per waiting worker:
//
//   - A claim looks at the store when it arrives; one that found nothing
//     sleeps, last in line for each of its types.
//   - n jobs of a type that became due (wake) wake the sleepers of that
//     type first in line, as many as their max adds up to n.
//   - A wake-up that cannot count (another node's write, a moved clock, a
//     recheck: wakeAll) wakes one sleeper per type, unless a waiter of the
//     type is woken already and will claim anyway. A claim made in such
//     doubt, or on arrival, that comes back full wakes the next in line:
//     more may be due. So does a full claim that took a job of another
//     type than the one its wake-up counted (a claim of several types): the
//     job it was woken for may wait still.
//   - A wake-up that finds no sleeper of its type is owed to the type: the
//     next of its waiters that would sleep claims again instead, in doubt.
//     A woken waiter that leaves before it claims passes its wake-up on.
//   - Each type with waiters is looked at by one of them at least every
//     recheck, and when its next job falls due (lookAt).
//   - At most limit claims wait at once: add refuses more.
//
// It is safe for concurrent use.
type claimWaiters struct {
	limit   int           // most waiters at once; immutable
	recheck time.Duration // see claimRecheck; immutable after the first add

	mu           sync.Mutex
	waiting      int                     // waiters added and not removed; guarded by mu
	byType       map[string]*typeWaiters // types with waiters; guarded by mu
	timer        *time.Timer             // fires at the earliest look of byType; guarded by mu
	refusedTotal int64                   // claims refused since the start; guarded by mu
	refusedLog   throttle                // the log lines of refused claims
}

// typeWaiters are the waiters of one type.
type typeWaiters struct {
	n        int                       // waiters of the type
	sleeping list.List                 // of *claimWaiter, first in line first
	woken    map[*claimWaiter]struct{} // woken, not yet claiming
	owed     bool                      // a wake-up found none asleep
	look     time.Time                 // when one of them looks next, woken or not
}

// waiterState is where a claimWaiter is in its loop.
type waiterState int

const (
	stateClaiming waiterState = iota // looking at the store, or about to
	stateAsleep                      // in line, waiting for c
	stateWoken                       // out of line, c signalled, not yet claiming
)

// claimWaiter is one POST /claims.
type claimWaiter struct {
	c     chan struct{} // receives (buffered, once) when woken
	types []string
	max   int // jobs its claim takes at most
	// Guarded by claimWaiters.mu.
	state waiterState
	doubt bool                     // its claim is in doubt: full, it wakes the next
	woken string                   // the type whose counted wake-up woke it, when not in doubt
	elems map[string]*list.Element // its places in line while asleep
}

// newClaimWaiters returns the place of at most limit waiting claims.
func newClaimWaiters(limit int) *claimWaiters {
	return &claimWaiters{limit: limit, recheck: claimRecheck, byType: map[string]*typeWaiters{}, refusedLog: throttle{every: refusedLogEvery}}
}

// newClaimWaiter returns a claim for types that takes up to max jobs,
// about to claim on its arrival, in doubt. It waits only once added.
func newClaimWaiter(types []string, max int) *claimWaiter {
	types = slices.Compact(slices.Sorted(slices.Values(types))) // once each in each line
	return &claimWaiter{c: make(chan struct{}, 1), types: types, max: max, doubt: true, elems: map[string]*list.Element{}}
}

// add registers w, or returns false when limit claims wait already. Add
// before looking at the store, so that no wake-up between the look and the
// sleep is lost, and remove when the claim ends.
func (cw *claimWaiters) add(w *claimWaiter) bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.waiting >= cw.limit {
		return false
	}
	cw.waiting++
	for _, t := range w.types {
		tw := cw.byType[t]
		if tw == nil {
			tw = &typeWaiters{woken: map[*claimWaiter]struct{}{}, look: time.Now().Add(cw.recheck)}
			cw.byType[t] = tw
		}
		tw.n++
	}
	cw.armLocked()
	return true
}

// remove unregisters w, added. A wake-up it had not begun to claim for goes
// to another waiter of its types.
func (cw *claimWaiters) remove(w *claimWaiter) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	lost := w.state == stateWoken
	cw.setStateLocked(w, stateClaiming)
	cw.waiting--
	for _, t := range w.types {
		if tw := cw.byType[t]; tw.n == 1 {
			delete(cw.byType, t)
		} else {
			tw.n--
		}
	}
	if lost {
		cw.wakeDoubtLocked(w.types)
	}
	cw.armLocked()
}

// counts is how many claims wait now, and how many were refused since the
// start because as many waited as allowed.
func (cw *claimWaiters) counts() (waiting int, refused int64) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.waiting, cw.refusedTotal
}

// refuse counts a claim refused for the limit and returns how many were
// refused since the last call that returned true, which is when a line
// should be logged: at most once every refusedLogEvery.
func (cw *claimWaiters) refuse(now time.Time) (int, bool) {
	cw.mu.Lock()
	cw.refusedTotal++
	cw.mu.Unlock()
	return cw.refusedLog.tick(now)
}

// sleep puts w, whose claim found nothing, in line last and returns true;
// or, when a wake-up is owed to one of its types, returns false for w to
// claim again now, in doubt.
func (cw *claimWaiters) sleep(w *claimWaiter) bool {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	owed := false
	for _, t := range w.types {
		if tw := cw.byType[t]; tw.owed {
			tw.owed, owed = false, true
		}
	}
	if owed {
		w.doubt = true
		return false
	}
	cw.setStateLocked(w, stateAsleep)
	return true
}

// begin tells that w, woken, begins to claim.
func (cw *claimWaiters) begin(w *claimWaiter) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.setStateLocked(w, stateClaiming)
}

// claimed tells that w's claim took jobs of types, one element a job. A
// full claim made in doubt, or one that took a job of another type than
// its wake-up counted, wakes the next waiter of w's types in line.
func (cw *claimWaiters) claimed(w *claimWaiter, types []string) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	other := slices.ContainsFunc(types, func(t string) bool { return t != w.woken })
	if len(types) >= w.max && (w.doubt || other) {
		cw.wakeDoubtLocked(w.types)
	}
}

// lookAt tells that a job of one of types falls due at, so that one of
// their waiters looks then.
func (cw *claimWaiters) lookAt(types []string, at time.Time) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for _, t := range types {
		if tw := cw.byType[t]; tw != nil && at.Before(tw.look) {
			tw.look = at
		}
	}
	cw.armLocked()
}

// wake tells the waiters of typ that n jobs of it may be due: it wakes the
// first in line of them until their max adds up to n. It never blocks.
func (cw *claimWaiters) wake(typ string, n int) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	tw := cw.byType[typ]
	for n > 0 && tw != nil {
		front := tw.sleeping.Front()
		if front == nil {
			tw.owed = true
			return
		}
		w := front.Value.(*claimWaiter)
		cw.signalLocked(w, false)
		w.woken = typ
		n -= w.max
	}
}

// wakeAll tells the waiters of every type that jobs may be due, how many
// unknown (the clock moved, another node wrote). It never blocks.
func (cw *claimWaiters) wakeAll() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.wakeDoubtLocked(nil)
}

// wakeDoubtLocked wakes, for each of types (nil: every type with waiters),
// the first in line, in doubt; unless a waiter of the type is woken
// already, which is then made to claim in doubt. A type with none asleep
// is owed the wake-up.
func (cw *claimWaiters) wakeDoubtLocked(types []string) {
	if types == nil {
		for t := range cw.byType {
			types = append(types, t)
		}
	}
	for _, t := range types {
		tw := cw.byType[t]
		if tw == nil {
			continue
		}
		if len(tw.woken) > 0 {
			for w := range tw.woken {
				w.doubt = true
				break
			}
			continue
		}
		front := tw.sleeping.Front()
		if front == nil {
			tw.owed = true
			continue
		}
		cw.signalLocked(front.Value.(*claimWaiter), true)
	}
}

// fire is the timer's: the types whose look has come get a wake-up in
// doubt and their next look a recheck away.
func (cw *claimWaiters) fire() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	now := time.Now()
	var due []string
	for t, tw := range cw.byType {
		if !tw.look.After(now) {
			due = append(due, t)
			tw.look = now.Add(cw.recheck)
		}
	}
	cw.wakeDoubtLocked(due)
	cw.armLocked()
}

// armLocked sets the timer to the earliest look, or stops it when no claim
// waits.
func (cw *claimWaiters) armLocked() {
	if len(cw.byType) == 0 {
		if cw.timer != nil {
			cw.timer.Stop()
		}
		return
	}
	var first time.Time
	for _, tw := range cw.byType {
		if first.IsZero() || tw.look.Before(first) {
			first = tw.look
		}
	}
	if cw.timer == nil {
		cw.timer = time.AfterFunc(time.Until(first), cw.fire)
		return
	}
	cw.timer.Reset(time.Until(first))
}

// signalLocked wakes w, asleep; in doubt, its claim wakes the next when
// full.
func (cw *claimWaiters) signalLocked(w *claimWaiter, doubt bool) {
	cw.setStateLocked(w, stateWoken)
	w.doubt, w.woken = doubt, ""
	select {
	case w.c <- struct{}{}:
	default: // signalled already; asleep, it cannot be
	}
}

// setStateLocked moves w to state s, in line or out of it.
func (cw *claimWaiters) setStateLocked(w *claimWaiter, s waiterState) {
	switch w.state {
	case stateAsleep:
		for t, e := range w.elems {
			cw.byType[t].sleeping.Remove(e)
			delete(w.elems, t)
		}
	case stateWoken:
		for _, t := range w.types {
			delete(cw.byType[t].woken, w)
		}
	}
	switch s {
	case stateAsleep:
		for _, t := range w.types {
			w.elems[t] = cw.byType[t].sleeping.PushBack(w)
		}
	case stateWoken:
		for _, t := range w.types {
			cw.byType[t].woken[w] = struct{}{}
		}
	}
	w.state = s
}
