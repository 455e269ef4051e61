package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/lifecycle"
)

// JobRedefine changes a job's definition; see db.Store.
func (s *Store) JobRedefine(ctx context.Context, p db.JobRedefineParams) (db.Job, error) {
	return s.transition(ctx, p.ID, "redefine", "", func(tx Tx, j db.Job) (db.Job, error) {
		out, _, err := s.redefine(ctx, tx, j, p.Spec, p.IfSpec, p.Actor)
		return out, err
	})
}

// JobPut creates or redefines the job of a name; see db.Store.
func (s *Store) JobPut(ctx context.Context, p db.JobPutParams) (db.JobPutResult, error) {
	var out db.JobPutResult
	name := p.Spec.Name
	if name == "" {
		return out, &db.ValidationError{Field: "name", Msg: "a job put by name needs its name"}
	}
	put := func(tx Tx) error {
		out = db.JobPutResult{}
		j, err := tx.JobLockName(ctx, name)
		switch {
		case err == nil:
			out.Job, out.Changes, err = s.redefine(ctx, tx, j, p.Spec, "", p.Actor)
		case errors.Is(err, db.ErrNotFound):
			out.Created = true
			var jobs []db.Job
			if jobs, _, err = s.CreateIn(ctx, tx, []db.JobCreateParams{p.Spec}, false); err == nil {
				out.Job = jobs[0]
			}
		}
		if err == nil && p.DryRun {
			return errDryRun
		}
		return err
	}
	err := s.inTx(ctx, put)
	if out.Created && errors.Is(err, db.ErrConflict) {
		// The name was free when read and taken when written: another put
		// (on another node, on PostgreSQL) created the job meanwhile. Put
		// again, over that job.
		err = s.inTx(ctx, put)
	}
	if err != nil && !errors.Is(err, errDryRun) {
		return db.JobPutResult{}, wrap(err, "put job %s", name)
	}
	return out, nil
}

// errDryRun rolls back a transaction that decided what it would write.
var errDryRun = errors.New("dry run")

// redefine gives j, read in tx, the definition spec, recording what changed
// as an event by actor, and returns it with the changes (none when spec is
// j's definition already). ifSpec, when set, must be the fingerprint of j's
// definition.
func (s *Store) redefine(ctx context.Context, tx Tx, j db.Job, spec db.JobCreateParams, ifSpec, actor string) (out db.Job, changes db.Changes, err error) {
	old := db.SpecOf(j)
	switch {
	case j.State == db.StateCancelled:
		return db.Job{}, nil, &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s is cancelled; create a new one", j.ID)}
	case ifSpec != "" && old.Fingerprint() != ifSpec:
		return db.Job{}, nil, &db.ConflictError{State: j.State, Msg: fmt.Sprintf("job %s was changed by someone else since it was read; read it again and retry", j.ID)}
	case spec.Type != j.Type:
		return db.Job{}, nil, &db.ValidationError{Field: "type", Msg: fmt.Sprintf("job %s is of type %s; a type cannot change: create a new job", j.ID, j.Type)}
	case spec.IdempotencyKey != "" && spec.IdempotencyKey != j.IdempotencyKey:
		return db.Job{}, nil, &db.ValidationError{Field: "idempotencyKey", Msg: "an idempotency key cannot change"}
	case (spec.Schedule == "") != (j.Schedule == ""):
		return db.Job{}, nil, &db.ValidationError{Field: "schedule", Msg: "a one-off job cannot become recurring, nor a recurring job one-off: create a new job"}
	}
	spec.IdempotencyKey, spec.RunAt = j.IdempotencyKey, time.Time{}
	now := tx.Now()
	nj, err := s.newJob(spec, now) // fills the defaults and checks the schedule
	if err != nil {
		return db.Job{}, nil, err
	}
	if changes = db.Diff(old, db.SpecOf(nj)); len(changes) == 0 {
		return j, nil, nil
	}
	if nj.Name != j.Name {
		if err := s.checkNames(ctx, tx, []db.Job{nj}, []int{0}); err != nil {
			return db.Job{}, nil, err
		}
	}
	to := j
	to.Name, to.Payload, to.Schedule, to.Timezone, to.Notify = nj.Name, nj.Payload, nj.Schedule, nj.Timezone, nj.Notify
	to.MaxAttempts, to.Timeout, to.Backoff, to.Jitter = nj.MaxAttempts, nj.Timeout, nj.Backoff, nj.Jitter
	to.Overlap, to.Misfire, to.ExpectSuccessWithin = nj.Overlap, nj.Misfire, nj.ExpectSuccessWithin
	if changed(changes, "schedule", "timezone", "expectSuccessWithin") {
		// The switch watches the new definition from now, or from a
		// skipped slot still to come of the same schedule (see
		// lifecycle.WatchAgain); one turned off is quiet no more.
		to.WatchFrom = s.storedPtr(now)
		if !changed(changes, "schedule", "timezone") {
			to.WatchFrom = s.storedPtr(lifecycle.WatchAgain(j, now))
		}
		if to.ExpectSuccessWithin == 0 {
			to.QuietSince = nil
		}
	}
	switch {
	case !to.Recurring() && changed(changes, "jitter") && (j.State == db.StateReady || j.State == db.StatePaused) &&
		!j.Triggered && j.Attempt == 0 && j.Slot != nil:
		// A one-off job that waits for its first run (not a retry's
		// backoff, nor a trigger's now): due at its new offset.
		to.NextRunAt = s.storedPtr(lifecycle.DueAt(j.ID, *j.Slot, time.Duration(to.Jitter)))
	case !to.Recurring() || j.State == db.StateDone:
		// No firing to move: a done schedule keeps its new definition only.
	case changed(changes, "schedule", "timezone"):
		if err := s.reschedule(ctx, tx, j, &to, now); err != nil {
			return db.Job{}, nil, err
		}
	case changed(changes, "jitter") && j.State != db.StateRunning && !j.Triggered && !lifecycle.RetryPending(j):
		// The same slots, each due at its new offset.
		to.NextRunAt = s.storedPtr(lifecycle.DueAt(j.ID, *j.Slot, time.Duration(to.Jitter)))
	}
	to.UpdatedAt = s.stored(now)
	to.KeepWatchFrom()
	if err := tx.JobRedefine(ctx, JobUpdate{Job: to, From: j.State}); err != nil {
		return db.Job{}, nil, fmt.Errorf("redefine job %s: %w", j.ID, err)
	}
	detail, err := json.Marshal(changes)
	if err != nil {
		return db.Job{}, nil, fmt.Errorf("encode changes: %w", err)
	}
	ev := db.Event{JobID: j.ID, At: s.stored(now), Kind: db.EventChanged, Actor: actor, Detail: detail}
	if err := tx.EventsInsert(ctx, []db.Event{ev}); err != nil {
		return db.Job{}, nil, fmt.Errorf("record change of job %s: %w", j.ID, err)
	}
	return to, changes, s.wakeIfDue(ctx, tx, &to)
}

// reschedule moves to, recurring job j with a changed schedule or zone,
// onto its new schedule as of now. The pending slot is the new schedule's,
// a firing of its own (a retry of the old one's is dropped); that of an
// operator's extra run in flight too. A running firing keeps its slot, and
// retries as it began; the new schedule's slots count from now
// (to.RescheduledAt), from the end of that firing on. The old schedule's
// slots that passed without running are missed, reason skipped; its slots
// still to come that were skipped ahead are taken back (their missed runs
// go): the new schedule's own slots are what comes.
func (s *Store) reschedule(ctx context.Context, tx Tx, j db.Job, to *db.Job, now time.Time) error {
	next, err := parse(*to)
	if err != nil {
		return err
	}
	old, _ := parse(j) // nil when it no longer parses: the change mends it
	ahead, err := tx.RunsSkippedAhead(ctx, j.ID, now)
	if err != nil {
		return fmt.Errorf("read the slots of %s skipped ahead: %w", j.ID, err)
	}
	if err := tx.RunsDelete(ctx, ahead); err != nil {
		return fmt.Errorf("take back the slots of %s skipped ahead: %w", j.ID, err)
	}
	var passed lifecycle.Missed
	switch {
	case j.State == db.StateRunning && !j.Triggered:
		passed = lifecycle.PassedWhileRunning(j, old, now)
		to.RescheduledAt = s.storedPtr(now)
	case j.State == db.StateRunning:
		// The extra run's claim counted an attempt the pending firing has
		// not made; its end takes that one back.
		pending := j
		pending.Attempt--
		var slot time.Time
		slot, passed = lifecycle.Rescheduled(pending, old, next, now)
		to.Slot, to.Attempt, to.RescheduledAt = s.storedPtr(slot), 1, nil
	default: // ready or paused
		var slot time.Time
		slot, passed = lifecycle.Rescheduled(j, old, next, now)
		to.Slot, to.Attempt, to.RescheduledAt = s.storedPtr(slot), 0, nil
		if !j.Triggered {
			to.NextRunAt = s.storedPtr(lifecycle.DueAt(j.ID, slot, time.Duration(to.Jitter)))
		}
	}
	if err := s.insertMissed(ctx, tx, j.ID, passed); err != nil {
		return err
	}
	to.MissedSlots = j.MissedSlots - int64(len(ahead)) + passed.Total
	return nil
}

// changed reports whether changes change any of fields.
func changed(changes db.Changes, fields ...string) bool {
	for _, f := range fields {
		if _, ok := changes[f]; ok {
			return true
		}
	}
	return false
}

// JobGet returns a job by id or name; see db.Store.
func (s *Store) JobGet(ctx context.Context, ref string) (db.Job, error) {
	get := s.d.JobGet
	if !db.IsID(ref) {
		get = s.d.JobByName
	}
	j, err := get(ctx, ref)
	s.health.saw(err, false)
	return j, err
}

// resolve is the id of the job ref names: ref itself when it is an id.
func (s *Store) resolve(ctx context.Context, ref string) (string, error) {
	if db.IsID(ref) {
		return ref, nil
	}
	j, err := s.JobGet(ctx, ref)
	return j.ID, err
}

// EventList returns a page of a job's events; see db.Store.
func (s *Store) EventList(ctx context.Context, p db.EventListParams) ([]db.Event, int64, error) {
	return jobPage(ctx, s, "events", p.JobID, p.Cursor, p.Limit, s.d.EventsPage, func(e db.Event) int64 { return e.ID })
}

// EventsAfter returns the events after an id; see db.Store.
func (s *Store) EventsAfter(ctx context.Context, after int64, kinds []string, limit int) ([]db.Event, error) {
	events, err := s.d.EventsAfter(ctx, after, kinds, limit)
	s.health.saw(err, false)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return events, nil
}

// runEvents are the events that run, of j, ending at now adds to its job's
// timeline as j becomes after: a run that gave up (its firstFailure set
// when it makes the schedule failing), a schedule that recovered (its
// failing ended, or its quiet spell), and for a job with a ping URL, its
// success. They name the run's own slot (that of an operator's extra run
// is when it was asked for), or j's when the run has none.
func (s *Store) runEvents(j, after db.Job, r lifecycle.Result, p db.RunFinishParams, run db.Run, now time.Time) []db.Event {
	var kinds []string
	switch {
	case r.GaveUp:
		kinds = append(kinds, db.EventGaveUp)
	case p.Outcome == db.OutcomeSucceeded && (j.FailingSince != nil && after.FailingSince == nil || j.QuietSince != nil):
		kinds = append(kinds, db.EventRecovered)
	}
	if p.Outcome == db.OutcomeSucceeded && pinged(j) {
		kinds = append(kinds, db.EventSucceeded)
	}
	if len(kinds) == 0 {
		return nil // most runs: nothing is built
	}
	at, start := s.stored(now), s.stored(*run.StartedAt)
	ev := db.RunEvent{RunID: run.ID, Slot: cmp.Or(run.Slot, j.Slot), Attempt: j.Attempt, Generation: j.LeaseGeneration,
		StartedAt: &start, Error: p.Error, Output: p.Output, FirstFailure: j.FailingSince == nil && after.FailingSince != nil}
	out := make([]db.Event, len(kinds))
	for i, kind := range kinds {
		out[i] = s.event(j, kind, at, ev)
	}
	return out
}

// event is an event of kind on j's timeline at at, about run.
func (s *Store) event(j db.Job, kind string, at time.Time, run db.RunEvent) db.Event {
	b, _ := json.Marshal(run) // plain values: it cannot fail
	return db.Event{JobID: j.ID, At: at, Kind: kind, Detail: b}
}

// pinged reports whether j has a ping URL, whose runs' starts and ends
// go on its timeline.
func pinged(j db.Job) bool { return j.Notify != nil && j.Notify.Ping != "" }
