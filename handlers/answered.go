package handlers

import (
	"sync"
	"time"

	"github.com/sked-dev/sked/db"
)

// answeredClaims remembers, for a while, the leases each named claim (its
// worker and Sked-Claim-Id) was answered with, so that a claim sent after
// one whose answer was lost (wire.ClaimResendHeader) can be answered their
// jobs again: those jobs and no other, whatever else the worker's id holds.
// It keeps the leases, not the jobs, whose payloads a worker could make it
// hold by the gigabyte. Per node and in memory: a claim resent to another
// node, or after a restart, finds nothing, and its jobs wait out their
// leases as before.
type answeredClaims struct {
	mu    sync.Mutex
	byKey map[answeredKey]answered // guarded by mu
	order []answeredKey            // oldest first; guarded by mu
}

// answeredKey names a claim: its worker and its id.
type answeredKey struct{ worker, claim string }

// answered is what a claim was answered with, and when.
type answered struct {
	at     time.Time
	leases []answeredLease
}

// answeredLease is a job a claim was answered with: its lease and run.
type answeredLease struct {
	job        string
	generation int64
	run        int64
}

// Bounds of answeredClaims: how long an answer is kept, and how many.
const (
	answeredKeep = 5 * time.Minute
	answeredMax  = 4096
)

func newAnsweredClaims() *answeredClaims {
	return &answeredClaims{byKey: map[answeredKey]answered{}}
}

// add remembers that the claim of worker named id was answered claims.
func (a *answeredClaims) add(worker, id string, claims []db.Claim, now time.Time) {
	if id == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.order) > 0 && (len(a.order) >= answeredMax || now.Sub(a.byKey[a.order[0]].at) > answeredKeep) {
		delete(a.byKey, a.order[0])
		a.order = a.order[1:]
	}
	k := answeredKey{worker, id}
	leases := make([]answeredLease, len(claims))
	for i, c := range claims {
		leases[i] = answeredLease{c.Job.ID, c.Job.LeaseGeneration, c.RunID}
	}
	a.byKey[k] = answered{at: now, leases: leases}
	a.order = append(a.order, k)
}

// take returns, once, the leases the claim of worker named id was answered
// with, if it was within answeredKeep of now.
func (a *answeredClaims) take(worker, id string, now time.Time) []answeredLease {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := answeredKey{worker, id}
	got, ok := a.byKey[k]
	if !ok || now.Sub(got.at) > answeredKeep {
		return nil
	}
	delete(a.byKey, k) // its key stays in order until it is pruned
	return got.leases
}
