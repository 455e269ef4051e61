package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/failpoint"
	"github.com/sked-dev/sked/lifecycle"
	"github.com/sked-dev/sked/schedule"
)

// wakeHorizon is how soon a job must be due for its write to wake the
// dispatchers of other processes (Tx.Notify); later jobs are found by their
// next look at the due time.
const wakeHorizon = 5 * time.Second

// JobCreate inserts a job; see db.Store.
func (s *Store) JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error) {
	jobs, created, err := s.createJobs(ctx, []db.JobCreateParams{p}, false)
	if err != nil {
		return db.Job{}, false, err
	}
	return jobs[0], created[0], nil
}

// JobCreateBatch inserts jobs in one transaction; see db.Store.
func (s *Store) JobCreateBatch(ctx context.Context, ps []db.JobCreateParams) ([]db.Job, error) {
	if err := db.CheckBatch(len(ps)); err != nil {
		return nil, err
	}
	jobs, _, err := s.createJobs(ctx, ps, true)
	return jobs, err
}

// createJobs builds the jobs of ps and inserts them in one transaction, all
// or none. A taken idempotency key yields the job that holds it and
// created=false. In a batch, a validation error names its element.
func (s *Store) createJobs(ctx context.Context, ps []db.JobCreateParams, batch bool) (jobs []db.Job, created []bool, err error) {
	err = s.inTx(ctx, func(tx Tx) error {
		jobs, created, err = s.CreateIn(ctx, tx, ps, batch)
		return err
	})
	if err != nil {
		return nil, nil, wrap(err, "create jobs")
	}
	return jobs, created, nil
}

// CreateIn creates the jobs of ps inside tx, as JobCreate and JobCreateBatch
// do in a transaction of their own; with batch, a validation error names
// its element. A dialect uses it to create jobs in a transaction its caller
// holds (postgres.Store.JobCreateTx).
func (s *Store) CreateIn(ctx context.Context, tx Tx, ps []db.JobCreateParams, batch bool) ([]db.Job, []bool, error) {
	jobs := make([]db.Job, len(ps))
	for i, p := range ps {
		j, err := s.newJob(p, tx.Now())
		var ve *db.ValidationError
		if batch && errors.As(err, &ve) {
			err = &db.ValidationError{Field: fmt.Sprintf("jobs[%d].%s", i, ve.Field), Msg: ve.Msg}
		}
		if err != nil {
			return nil, nil, err
		}
		jobs[i] = j
	}
	created, err := s.insert(ctx, tx, jobs)
	var reused *db.KeyReusedError
	if batch && errors.As(err, &reused) {
		reused.Field = fmt.Sprintf("jobs[%d].idempotencyKey", reused.Index)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(jobs) > 1 {
		failpoint.Hit(failpoint.MidBatchInsert)
	}
	return jobs, created, s.wakeIfDue(ctx, tx, pointers(jobs)...)
}

// insert inserts jobs and reports which it created. Where an idempotency
// key is taken by the same request, the job that holds it replaces the one
// in jobs; by another request, it is a *db.KeyReusedError. A name taken is
// a *db.ConflictError.
func (s *Store) insert(ctx context.Context, tx Tx, jobs []db.Job) ([]bool, error) {
	created := make([]bool, len(jobs))
	all := make([]int, len(jobs))
	for i := range all {
		all[i] = i
	}
	// Keys already held: the same request sent again, or a reused key.
	fresh, err := s.settleKeys(ctx, tx, jobs, all)
	if err != nil {
		return nil, err
	}
	if err := s.checkNames(ctx, tx, jobs, fresh); err != nil {
		return nil, err
	}
	batch := jobs // as a rule, none was sent before
	if len(fresh) < len(jobs) {
		batch = make([]db.Job, len(fresh))
		for k, i := range fresh {
			batch[k] = jobs[i]
		}
	}
	ins, err := tx.JobsInsert(ctx, batch)
	if err != nil {
		return nil, err
	}
	var lost []int // keys taken meanwhile, or twice in this batch
	for k, i := range fresh {
		if created[i] = ins[k]; !ins[k] {
			lost = append(lost, i)
		}
	}
	gone, err := s.settleKeys(ctx, tx, jobs, lost)
	if err != nil {
		return nil, err
	}
	if len(gone) > 0 {
		// The job that held the key was cancelled between the insert and
		// the read: nothing holds it now, and the caller tries again.
		return nil, fmt.Errorf("%w: the job holding idempotency key %q was cancelled meanwhile", db.ErrBusy, jobs[gone[0]].IdempotencyKey)
	}
	return created, nil
}

// settleKeys puts, in place of each job of idx whose idempotency key a job
// holds, that job, after checking that the same request made it; it
// returns the others.
func (s *Store) settleKeys(ctx context.Context, tx Tx, jobs []db.Job, idx []int) (rest []int, err error) {
	var keys []string
	for _, i := range idx {
		if k := jobs[i].IdempotencyKey; k != "" {
			keys = append(keys, k)
		}
	}
	byKey := map[string]db.Job{}
	if len(keys) > 0 {
		holders, err := tx.JobsByKey(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("read jobs by idempotency key: %w", err)
		}
		for _, h := range holders {
			byKey[h.IdempotencyKey] = h
		}
	}
	for _, i := range idx {
		h, ok := byKey[jobs[i].IdempotencyKey]
		switch {
		case !ok || jobs[i].IdempotencyKey == "":
			rest = append(rest, i)
		case h.RequestHash != "" && h.RequestHash != jobs[i].RequestHash && !db.ReservedKey(h.IdempotencyKey):
			// A key sked makes (a backfill's slot) stands for its slot,
			// whatever the job's definition has become since.
			inBatch := slices.ContainsFunc(jobs, func(j db.Job) bool { return j.ID == h.ID })
			return nil, &db.KeyReusedError{Key: h.IdempotencyKey, Job: h, InBatch: inBatch, Index: i}
		default:
			jobs[i] = h
		}
	}
	return rest, nil
}

// checkNames refuses the jobs of idx whose name a job that is not
// cancelled holds, or an earlier one of them takes.
func (s *Store) checkNames(ctx context.Context, tx Tx, jobs []db.Job, idx []int) error {
	var names []string
	seen := map[string]bool{}
	for _, i := range idx {
		n := jobs[i].Name
		if n == "" {
			continue
		}
		if seen[n] {
			return &db.ConflictError{Msg: fmt.Sprintf("two jobs of the request are named %q; a name belongs to one job", n)}
		}
		seen[n] = true
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil
	}
	holders, err := tx.JobsByName(ctx, names)
	if err != nil {
		return fmt.Errorf("read jobs by name: %w", err)
	}
	if len(holders) == 0 {
		return nil
	}
	h := holders[0]
	if h.State == db.StateDone {
		// A done job cannot be cancelled: it keeps its name until pruned.
		return &db.ConflictError{State: h.State, Msg: fmt.Sprintf(
			"the name %q belongs to job %s (done), which keeps it until it is pruned; give the new job another name, or rename that one (PATCH /jobs/%s with another name)",
			h.Name, h.ID, h.ID)}
	}
	return &db.ConflictError{State: h.State, Msg: fmt.Sprintf(
		"the name %q belongs to job %s (%s); change that job (PATCH /jobs/%s or PUT /jobs/by-name/%s), or cancel it first",
		h.Name, h.ID, h.State, h.Name, h.Name)}
}

// newJob is the job p creates at now, as the database will hold it (times
// at its precision, durations in milliseconds, every default filled in), so
// that creating needs no read back. The error is a *db.ValidationError when
// the schedule does not parse or never fires.
func (s *Store) newJob(p db.JobCreateParams, now time.Time) (db.Job, error) {
	now = s.stored(now)
	id := db.NewID(now)
	slot, due, err := lifecycle.FirstSlot(p, id, now)
	if err != nil {
		return db.Job{}, err
	}
	ms := func(d time.Duration) db.Duration { return db.Duration(d.Truncate(time.Millisecond)) }
	def := db.DefaultsFor(p.Type)
	if s.DefaultsFunc != nil {
		def = s.DefaultsFunc(p.Type)
	}
	j := db.Job{
		ID: id, Name: p.Name, Type: p.Type, Payload: p.Payload, Schedule: p.Schedule, Notify: p.Notify,
		Timezone: cmp.Or(p.Timezone, "UTC"), State: db.StateReady,
		NextRunAt: s.storedPtr(due), Slot: s.storedPtr(slot),
		MaxAttempts: cmp.Or(p.MaxAttempts, def.MaxAttempts), IdempotencyKey: p.IdempotencyKey,
		Timeout: ms(cmp.Or(p.Timeout, db.DefaultTimeout)), Backoff: ms(cmp.Or(p.Backoff, def.Backoff)),
		Jitter: ms(p.Jitter), ExpectSuccessWithin: ms(p.ExpectSuccessWithin),
		CreatedAt: now, UpdatedAt: now,
	}
	if p.IdempotencyKey != "" {
		// Only a key is checked against the request that took it
		// (settleKeys); a job without one has no fingerprint to store,
		// and a batch of them is spared hashing each job's definition.
		j.RequestHash = p.Fingerprint()
	}
	if len(j.Payload) == 0 {
		j.Payload = []byte("{}")
	}
	if j.Recurring() {
		j.Overlap, j.Misfire = cmp.Or(p.Overlap, db.OverlapSkip), cmp.Or(p.Misfire, db.MisfireRunOnce)
	}
	j.KeepWatchFrom()
	return j, nil
}

// JobList returns a page of jobs, newest first; see db.Store.
func (s *Store) JobList(ctx context.Context, p db.JobListParams) ([]db.Job, string, error) {
	limit := db.PageLimit(p.Limit)
	jobs, err := s.d.JobsPage(ctx, p, limit+1)
	s.health.saw(err, false)
	if err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	jobs, next := db.Page(jobs, limit, func(j db.Job) string { return j.ID })
	return append([]db.Job{}, jobs...), next, nil
}

// JobCancel cancels a job no worker holds; see db.Store.
func (s *Store) JobCancel(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "cancel", db.EventCancelled, func(tx Tx, j db.Job) (db.Job, error) {
		noop, err := lifecycle.Cancel(j, func() (*db.Run, error) {
			r, err := tx.RunLive(ctx, j.ID, j.LeaseGeneration)
			if err != nil {
				return nil, fmt.Errorf("read live run of %s: %w", j.ID, err)
			}
			return &r, nil
		})
		if err != nil || noop {
			return j, err
		}
		to := j
		to.State, to.NextRunAt = db.StateCancelled, nil
		to.QuietSince = nil // no switch watches a cancelled job
		return s.update(ctx, tx, j, to)
	})
}

// JobPause pauses a ready job, or a running schedule when its run ends;
// see db.Store.
func (s *Store) JobPause(ctx context.Context, id string) (db.Job, error) {
	return s.JobPauseUntil(ctx, db.JobPauseParams{ID: id})
}

// JobPauseUntil pauses a ready job, or a running schedule when its run
// ends; see db.Store.
func (s *Store) JobPauseUntil(ctx context.Context, p db.JobPauseParams) (db.Job, error) {
	return s.transition(ctx, p.ID, "pause", db.EventPaused, func(tx Tx, j db.Job) (db.Job, error) {
		noop, err := lifecycle.Pause(j, p, tx.Now())
		if err != nil || noop {
			return j, err
		}
		to := j
		to.PauseReason, to.PauseUntil = p.Reason, s.storedPtr(p.Until)
		if j.State == db.StateRunning {
			to.PauseRequested = true // see finished
		} else {
			to.State, to.Triggered = db.StatePaused, false
			to.QuietSince = nil // no switch watches a paused job
		}
		return s.update(ctx, tx, j, to)
	})
}

// JobResume resumes a paused job; see db.Store.
func (s *Store) JobResume(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "resume", db.EventResumed, func(tx Tx, j db.Job) (db.Job, error) {
		noop, err := lifecycle.Resume(j)
		if err != nil || noop {
			return j, err
		}
		if j.State == db.StateRunning { // it was to pause when its run ends
			to := j
			to.PauseRequested, to.PauseReason, to.PauseUntil = false, "", nil
			return s.update(ctx, tx, j, to)
		}
		return s.resume(ctx, tx, j, tx.Now())
	})
}

// JobResumeDue resumes the paused jobs whose pause has run out, each as of
// its end, with an EventResumed by sked on its timeline; see db.Store.
func (s *Store) JobResumeDue(ctx context.Context) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx Tx) error {
		jobs, err := tx.JobsPauseOver(ctx, maxSweep)
		if err != nil {
			return err
		}
		var events []db.Event
		for _, j := range jobs {
			out, err := s.resume(ctx, tx, j, *j.PauseUntil)
			switch {
			case unparseable(err):
				_, err = s.setAside(ctx, tx, j, j, err) // kept paused: not counted
			case err == nil:
				n++
				events = append(events, s.controlEvent(db.WithActor(ctx, skedActor), tx, db.EventResumed, j.ID,
					controlDetail(db.EventResumed, j, out)))
			}
			if err != nil {
				return err
			}
		}
		if len(events) == 0 {
			return nil
		}
		return tx.EventsInsert(ctx, events)
	})
	if err != nil {
		return 0, fmt.Errorf("resume paused jobs: %w", err)
	}
	return n, nil
}

// maxSweep bounds the jobs one sweep (reap, resume) moves in a transaction.
const maxSweep = 500

// resume moves paused job j back to ready as of at. A one-off job keeps its
// due time and attempts; a recurring job resumes at its first slot due at
// or after at, and the slots due before at that it slept through are
// recorded missed (paused).
func (s *Store) resume(ctx context.Context, tx Tx, j db.Job, at time.Time) (db.Job, error) {
	to := j
	to.State, to.PauseReason, to.PauseUntil = db.StateReady, "", nil
	if j.Recurring() {
		to.WatchFrom = s.storedPtr(lifecycle.WatchAgain(j, at)) // the switch was off: its window starts again
		sched, err := parse(j)
		if err != nil {
			return db.Job{}, err
		}
		// A pending retry is dropped; the sleep counts from the slot after.
		pending := *j.Slot
		if lifecycle.RetryPending(j) {
			pending = lifecycle.NextSlot(j, sched)
		}
		slot, missed := lifecycle.Resumed(sched, pending, at, schedule.Offset(j.ID, time.Duration(j.Jitter)))
		if err := s.insertMissed(ctx, tx, j.ID, missed); err != nil {
			return db.Job{}, err
		}
		to.Slot, to.NextRunAt = s.storedPtr(slot), s.storedPtr(lifecycle.DueAt(j.ID, slot, time.Duration(j.Jitter)))
		to.Attempt, to.MissedSlots, to.RescheduledAt = 0, j.MissedSlots+missed.Total, nil
	}
	out, err := s.update(ctx, tx, j, to)
	if err != nil {
		return db.Job{}, err
	}
	return out, s.wakeIfDue(ctx, tx, &out)
}

// JobRetry puts a dead job back to ready; see db.Store.
func (s *Store) JobRetry(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "retry", db.EventRetried, func(tx Tx, j db.Job) (db.Job, error) {
		if err := lifecycle.Retry(j); err != nil {
			return db.Job{}, err
		}
		to := j
		to.State, to.NextRunAt, to.Attempt = db.StateReady, s.storedPtr(tx.Now()), 0
		out, err := s.update(ctx, tx, j, to)
		if err != nil {
			return db.Job{}, err
		}
		return out, s.wakeIfDue(ctx, tx, &out)
	})
}

// JobRequestCancelRun marks a running job for cooperative cancellation; see
// db.Store.
func (s *Store) JobRequestCancelRun(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "request cancel", db.EventCancelRequested, func(tx Tx, j db.Job) (db.Job, error) {
		if err := lifecycle.CancelRun(j); err != nil {
			return db.Job{}, err
		}
		to := j
		to.CancelRequested = true
		return s.update(ctx, tx, j, to)
	})
}

// JobTrigger makes a ready job run once now; see db.Store. A one-off job
// simply becomes due; a recurring one gets an extra run and keeps its
// pending slot.
func (s *Store) JobTrigger(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "trigger", db.EventTriggered, func(tx Tx, j db.Job) (db.Job, error) {
		if err := lifecycle.Trigger(j, tx.Now()); err != nil {
			return db.Job{}, err
		}
		to := j
		to.NextRunAt, to.Triggered = s.storedPtr(tx.Now()), j.Recurring()
		out, err := s.update(ctx, tx, j, to)
		if err != nil {
			return db.Job{}, err
		}
		return out, s.wakeIfDue(ctx, tx, &out)
	})
}

// JobSkipNext skips the pending slot of a recurring job; see db.Store.
func (s *Store) JobSkipNext(ctx context.Context, id string) (db.Job, error) {
	return s.transition(ctx, id, "skip", db.EventSkipped, func(tx Tx, j db.Job) (db.Job, error) {
		if err := lifecycle.SkipNext(j); err != nil {
			return db.Job{}, err
		}
		sched, err := parse(j)
		if err != nil {
			return db.Job{}, err
		}
		// Skipping a pending retry drops it; its slot is not missed.
		var skipped lifecycle.Missed
		if !lifecycle.RetryPending(j) {
			skipped = lifecycle.Missed{Slots: []time.Time{*j.Slot}, Total: 1, Reason: db.MissedSkipped}
		}
		if err := s.insertMissed(ctx, tx, j.ID, skipped); err != nil {
			return db.Job{}, err
		}
		to := j
		next := lifecycle.NextSlot(j, sched)
		to.Slot, to.NextRunAt, to.Attempt, to.MissedSlots, to.RescheduledAt = s.storedPtr(next), nil, 0, j.MissedSlots+skipped.Total, nil
		to.WatchFrom = s.storedPtr(lifecycle.SkipWatchFrom(j, tx.Now())) // no false alarm for the slot skipped
		if next.IsZero() {
			to.State, to.Slot = db.StateDone, j.Slot
		} else {
			to.NextRunAt = s.storedPtr(lifecycle.DueAt(j.ID, next, time.Duration(j.Jitter)))
		}
		return s.update(ctx, tx, j, to)
	})
}

// JobBackfill runs the slots of a time range once each; see db.Store. Slots
// that already have a succeeded run of the schedule are not run again.
func (s *Store) JobBackfill(ctx context.Context, p db.JobBackfillParams) (db.Backfill, error) {
	out := db.Backfill{JobIDs: []string{}} // [] in JSON when no slot is in the range
	_, err := s.transition(ctx, p.ID, "backfill", "", func(tx Tx, j db.Job) (db.Job, error) {
		if err := lifecycle.BackfillRange(p, tx.Now()); err != nil {
			return db.Job{}, err
		}
		if err := lifecycle.Backfillable(j); err != nil {
			return db.Job{}, err
		}
		sched, err := parse(j)
		if err != nil {
			return db.Job{}, err
		}
		slots, left, total, err := lifecycle.Backfill(j, sched, p)
		if err != nil {
			return db.Job{}, err
		}
		out.Slots, out.LeftToSchedule = total, left
		ran, err := tx.RunsSucceeded(ctx, j.ID, slots)
		if err != nil {
			return db.Job{}, fmt.Errorf("read succeeded slots: %w", err)
		}
		var jobs []db.Job
		for _, slot := range slots {
			if containsTime(ran, slot) {
				continue
			}
			child, err := s.newJob(db.JobCreateParams{
				Type: j.Type, Payload: j.Payload, Timezone: j.Timezone, MaxAttempts: j.MaxAttempts,
				Timeout: time.Duration(j.Timeout), Backoff: time.Duration(j.Backoff),
				IdempotencyKey: db.BackfillKeyPrefix + j.ID + ":" + slot.UTC().Format(time.RFC3339),
			}, tx.Now())
			if err != nil {
				return db.Job{}, err
			}
			child.Slot, child.ParentID = s.storedPtr(slot), j.ID
			jobs = append(jobs, child)
		}
		if len(jobs) == 0 {
			return j, nil
		}
		created, err := s.insert(ctx, tx, jobs)
		if err != nil {
			return db.Job{}, fmt.Errorf("insert backfill jobs: %w", err)
		}
		for i, c := range jobs {
			out.JobIDs = append(out.JobIDs, c.ID)
			if created[i] {
				out.Created++
			}
		}
		if out.Created > 0 {
			from, to := s.stored(p.From), s.stored(p.To)
			ev := s.controlEvent(ctx, tx, db.EventBackfilled, j.ID, db.ControlEvent{
				From: j.State, To: j.State, RangeFrom: &from, RangeTo: &to, JobsCreated: out.Created})
			if err := tx.EventsInsert(ctx, []db.Event{ev}); err != nil {
				return db.Job{}, fmt.Errorf("record backfill: %w", err)
			}
		}
		return j, s.wakeIfDue(ctx, tx, pointers(jobs)...)
	})
	return out, err
}

func containsTime(ts []time.Time, t time.Time) bool {
	for _, u := range ts {
		if u.Equal(t) {
			return true
		}
	}
	return false
}

// JobQuietSweep raises dead-man's switches; see db.Store. A switch that
// goes off is recorded on its job's timeline, by sked. The sweep records
// that it watched at most every db.WatchSeenEvery, and only while some
// schedule has a switch: on an idle server with none it writes nothing.
func (s *Store) JobQuietSweep(ctx context.Context) ([]db.Job, error) {
	var quiet []db.Job
	err := s.inTx(ctx, func(tx Tx) error {
		quiet = nil
		jobs, err := tx.JobsWatched(ctx, false)
		if err != nil {
			return err
		}
		now := tx.Now()
		if swept, err := tx.SweptAt(ctx); err != nil {
			return err
		} else if now.Sub(swept) >= db.WatchSeenEvery || now.Before(swept) {
			if err := tx.SetSweptAt(ctx, s.stored(now)); err != nil {
				return err
			}
		}
		var events []db.Event
		for _, j := range jobs {
			if !lifecycle.GoesQuiet(j, now) {
				continue
			}
			to := j
			to.QuietSince = s.storedPtr(now)
			marked, err := s.update(ctx, tx, j, to)
			if err != nil {
				return fmt.Errorf("mark job %s: %w", j.ID, err)
			}
			quiet = append(quiet, marked)
			b, _ := json.Marshal(db.QuietEvent{ExpectSuccessWithin: j.ExpectSuccessWithin, LastSuccessAt: j.LastSuccessAt}) // plain values
			events = append(events, db.Event{JobID: j.ID, At: *to.QuietSince, Kind: db.EventQuiet, Actor: skedActor, Detail: b})
		}
		if len(events) == 0 {
			return nil
		}
		return tx.EventsInsert(ctx, events)
	})
	if err != nil {
		return nil, fmt.Errorf("check quiet schedules: %w", err)
	}
	return quiet, nil
}

// JobWatchStart starts the switches' windows again after downtime; see
// db.Store. A schedule already quiet stays so until a run succeeds.
func (s *Store) JobWatchStart(ctx context.Context) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx Tx) error {
		n = 0
		jobs, err := tx.JobsWatched(ctx, true)
		if err != nil || len(jobs) == 0 {
			return err
		}
		now := tx.Now()
		swept, err := tx.SweptAt(ctx)
		if err != nil || now.Sub(swept) <= db.WatchGap {
			return err
		}
		for _, j := range jobs {
			if j.QuietSince != nil {
				continue
			}
			to := j
			to.WatchFrom = s.storedPtr(lifecycle.WatchAgain(j, now))
			if _, err := s.update(ctx, tx, j, to); err != nil {
				return fmt.Errorf("watch job %s again: %w", j.ID, err)
			}
			n++
		}
		return tx.SetSweptAt(ctx, s.stored(now))
	})
	if err != nil {
		return 0, fmt.Errorf("start watching the schedules: %w", err)
	}
	return n, nil
}

// transition reads job id (or the job of that name: the live one, else the
// newest cancelled one, as JobGet reads it) inside a write transaction and
// applies fn, which returns the job as it leaves it. When fn wrote the job
// and kind is not empty, the job's timeline gets an event of kind, by the
// actor ctx carries (db.WithActor). A name no live job has is looked up
// after that transaction, and the job it names is read in another: no
// transaction waits inside for a second connection, which a pool whose
// other connections wait likewise might never give.
func (s *Store) transition(ctx context.Context, id, what, kind string, fn func(tx Tx, j db.Job) (db.Job, error)) (db.Job, error) {
	out, err := s.transitionOnce(ctx, id, kind, fn)
	if errors.Is(err, errNoLiveName) {
		var named db.Job
		if named, err = s.d.JobByName(ctx, id); err == nil {
			out, err = s.transitionOnce(ctx, named.ID, kind, fn)
		}
	}
	if err != nil {
		return db.Job{}, wrap(err, "%s job %s", what, id)
	}
	return out, nil
}

// errNoLiveName is transitionOnce's answer to a name no live job has.
var errNoLiveName = errors.New("no live job of that name")

// transitionOnce reads job id, or the live job of that name, inside a write
// transaction and applies fn; see transition.
func (s *Store) transitionOnce(ctx context.Context, id, kind string, fn func(tx Tx, j db.Job) (db.Job, error)) (db.Job, error) {
	var out db.Job
	err := s.inTx(ctx, func(tx Tx) error {
		lock := tx.JobLock
		if !db.IsID(id) {
			lock = tx.JobLockName
		}
		j, err := lock(ctx, id)
		if errors.Is(err, db.ErrNotFound) && !db.IsID(id) {
			return errNoLiveName
		}
		if err != nil {
			return err
		}
		w := &writeWatch{Tx: tx}
		if out, err = fn(w, j); err != nil || kind == "" || !w.wrote {
			return err
		}
		return tx.EventsInsert(ctx, []db.Event{s.controlEvent(ctx, tx, kind, j.ID, controlDetail(kind, j, out))})
	})
	return out, err
}

// writeWatch is a Tx that notes whether a job was written.
type writeWatch struct {
	Tx
	wrote bool
}

func (w *writeWatch) JobsUpdate(ctx context.Context, us []JobUpdate) error {
	w.wrote = true
	return w.Tx.JobsUpdate(ctx, us)
}

// controlDetail is the detail of the event of kind, a control that moved a
// job from from to to.
func controlDetail(kind string, from, to db.Job) db.ControlEvent {
	d := db.ControlEvent{From: from.State, To: to.State}
	switch kind {
	case db.EventPaused:
		d.Reason, d.Until = to.PauseReason, to.PauseUntil
	case db.EventSkipped:
		d.Slot = from.Slot
	case db.EventCancelRequested:
		d.Generation = from.LeaseGeneration
	}
	return d
}

// controlEvent is the event of kind on job's timeline, now in tx, with
// detail, by the actor ctx carries.
func (s *Store) controlEvent(ctx context.Context, tx Tx, kind, job string, detail db.ControlEvent) db.Event {
	b, _ := json.Marshal(detail) // plain values: it cannot fail
	return db.Event{JobID: job, At: s.stored(tx.Now()), Kind: kind, Actor: db.ActorFrom(ctx), Detail: b}
}

// update writes to, the new state of job from, fenced by from's state and
// generation, and returns it as written.
func (s *Store) update(ctx context.Context, tx Tx, from, to db.Job) (db.Job, error) {
	to.UpdatedAt = s.stored(tx.Now())
	to.KeepWatchFrom()
	if err := tx.JobsUpdate(ctx, []JobUpdate{{Job: to, From: from.State}}); err != nil {
		return db.Job{}, fmt.Errorf("update job %s: %w", from.ID, err)
	}
	return to, nil
}

// wakeIfDue wakes the dispatchers of other processes when any of jobs is
// ready and due within wakeHorizon, telling them how many of each type.
func (s *Store) wakeIfDue(ctx context.Context, tx Tx, jobs ...*db.Job) error {
	horizon := tx.Now().Add(wakeHorizon)
	var due map[string]int
	for _, j := range jobs {
		if j.State == db.StateReady && j.NextRunAt != nil && !j.NextRunAt.After(horizon) {
			if due == nil {
				due = map[string]int{}
			}
			due[j.Type]++
		}
	}
	if due == nil {
		return nil
	}
	return tx.Notify(ctx, due)
}

// parse parses j's stored schedule. One that no longer parses (a zone a
// newer time zone database dropped, a row edited by hand) is a
// *storedScheduleError.
func parse(j db.Job) (*schedule.Schedule, error) {
	sched, err := schedule.Parse(j.Schedule, j.Timezone)
	if err != nil {
		return nil, &storedScheduleError{&db.ConflictError{State: j.State, Msg: fmt.Sprintf(
			"the stored schedule of job %s no longer parses (%v): change its schedule or time zone (sked edit, PATCH /jobs/%s)", j.ID, err, j.ID)}}
	}
	return sched, nil
}

// storedScheduleError is a job's stored schedule that no longer parses: a
// conflict that says how to mend it, for a control of the job; a claim,
// completion or sweep sets the job aside instead (setAside).
type storedScheduleError struct{ conflict *db.ConflictError }

func (e *storedScheduleError) Error() string { return e.conflict.Msg }
func (e *storedScheduleError) Unwrap() error { return e.conflict }

// unparseable reports whether err is a stored schedule that no longer
// parses.
func unparseable(err error) bool {
	var se *storedScheduleError
	return errors.As(err, &se)
}

// skedActor is the actor of the changes sked makes by itself: a pause run
// out, a job set aside.
const skedActor = "sked"

// setAside takes j, whose stored schedule no longer parses (err, from
// parse), out of circulation inside tx: it pauses j, with a reason that
// says why and how to mend it, keeping its slot and due time, and puts
// that on its timeline. A claim, completion or sweep that meets such a
// job sets it aside and goes on, so that one job cannot fail the
// transaction it shares with others, and with it stop every other job. j
// is as read in tx, whose state and generation fence the write; was is j
// as its timeline knows it: j itself, or, for a claim being undone, j as
// it was before the claim (ready, the claim's attempt given back). A
// running j loses its lease, whose run the caller ends or undoes.
func (s *Store) setAside(ctx context.Context, tx Tx, j, was db.Job, err error) (db.Job, error) {
	to := was
	to.State, to.PauseUntil, to.Triggered = db.StatePaused, nil, false
	to.PauseReason = err.Error() + ", then resume it"
	to.LeaseOwner, to.LeaseUntil, to.CancelRequested, to.PauseRequested = "", nil, false, false
	to.QuietSince = nil // no switch watches a paused job
	out, err := s.update(ctx, tx, j, to)
	if err != nil {
		return db.Job{}, err
	}
	ev := s.controlEvent(db.WithActor(ctx, skedActor), tx, db.EventPaused, j.ID, controlDetail(db.EventPaused, was, out))
	if err := tx.EventsInsert(ctx, []db.Event{ev}); err != nil {
		return db.Job{}, err
	}
	if s.Logger != nil {
		s.Logger.WarnContext(ctx, "job set aside, paused: its stored schedule no longer parses", "job_id", j.ID, "reason", to.PauseReason)
	}
	return out, nil
}
