package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// JobCreateRequest is the body of POST /jobs and PUT /jobs/by-name/{name}
// (wire.JobCreateRequest, which the server's in-process Enqueue takes too).
type JobCreateRequest = wire.JobCreateRequest

// RequestOf is the request that defines job j as it is (db.SpecOf): what
// `sked export` writes and JobPut takes back. A one-off job's due time is
// not part of it.
func RequestOf(j db.Job) JobCreateRequest {
	return wire.RequestOf(db.SpecOf(j))
}

// JobCreate creates a job. created is false when the idempotency key named
// an existing job, which is returned unchanged.
func (c *Client) JobCreate(ctx context.Context, req JobCreateRequest) (job db.Job, created bool, err error) {
	resp, err := c.doResponse(ctx, http.MethodPost, "/jobs", req, &job)
	if err != nil {
		return db.Job{}, false, err
	}
	return job, resp.StatusCode == http.StatusCreated, nil
}

// JobGet returns the job of an id or a name; an *Error unwrapping to
// db.ErrNotFound if there is none.
func (c *Client) JobGet(ctx context.Context, id string) (db.Job, error) {
	job, _, err := c.JobGetDated(ctx, id)
	return job, err
}

// JobWait polls the job of an id or a name every poll (0: 500ms; at least
// 100ms) until it has ended (done, dead or cancelled; see
// db.JobState.Final) and returns it as it ended: a recurring job ends only
// when cancelled. A 503 (the server restarting, its database failing over)
// is asked again at the next poll. A request that got no answer is sent
// again after a pause that starts at poll and doubles with each one in a
// row, up to 8s; once the server has given no answer for NoAnswerLimit
// (a minute by default) the wait ends with an error wrapping ErrNoAnswer
// and its own. The end of ctx ends it with an error wrapping ctx.Err();
// both return the job as last read (zero if none was). Any other error
// ends the wait too.
func (c *Client) JobWait(ctx context.Context, id string, poll time.Duration) (db.Job, error) {
	return pollUntil(ctx, c.waiting(poll), "job "+id, func(ctx context.Context) (db.Job, bool, error) {
		job, err := c.JobGet(ctx, id)
		return job, err == nil && job.State.Final(), err
	})
}

// JobGetWait is JobGet that waits out a server that cannot answer yet,
// as JobWait does: a 503 (its database out of reach, the server
// restarting) is asked again every poll, and a request that got no answer
// after waits doubling from poll, until the server has given no answer for
// NoAnswerLimit (an error wrapping ErrNoAnswer) or the end of ctx. A wait
// begins with it, so that one begun while its server or database is down
// waits as one under way does.
func (c *Client) JobGetWait(ctx context.Context, id string, poll time.Duration) (db.Job, error) {
	return pollUntil(ctx, c.waiting(poll), "job "+id, func(ctx context.Context) (db.Job, bool, error) {
		job, err := c.JobGet(ctx, id)
		return job, err == nil, err
	})
}

// ErrNoAnswer is the end of a wait (JobWait, TriggeredRunWait) whose
// server stopped answering: it gave no answer for the client's
// NoAnswerLimit.
var ErrNoAnswer = errors.New("the server stopped answering")

// DefaultNoAnswerLimit is how long a wait asks a server that gives no
// answer before it gives up (Client.NoAnswerLimit): long enough for a
// server restarting (a container replaced, a migration, a slow machine),
// short enough that one gone is said while someone still watches.
const DefaultNoAnswerLimit = time.Minute

// noAnswerPauseMax is the longest pause of a wait between requests that
// got no answer (see waiting.pauseAfter).
const noAnswerPauseMax = 8 * time.Second

// waiting is how a wait (pollUntil) goes: it reads every poll, and asks a
// server that gives no answer for noAnswer since its last answer (or the
// wait's start), by the clock of now and pause.
type waiting struct {
	poll, noAnswer time.Duration
	now            func() time.Time
	// pause waits d, or until ctx ends (its error then).
	pause func(ctx context.Context, d time.Duration) error
}

// waiting is the wait of c that reads every poll (0: 500ms; at least
// 100ms), by this machine's clock.
func (c *Client) waiting(poll time.Duration) waiting {
	if poll == 0 {
		poll = 500 * time.Millisecond
	}
	return waiting{
		poll: max(poll, 100*time.Millisecond), noAnswer: cmp.Or(c.NoAnswerLimit, DefaultNoAnswerLimit),
		now: time.Now, pause: sleep,
	}
}

// pauseAfter is the pause after the n-th read in a row that got no
// answer (n from 1): the poll doubled per such read, up to
// noAnswerPauseMax (or the poll, if longer).
func (w waiting) pauseAfter(n int) time.Duration {
	most := max(w.poll, noAnswerPauseMax)
	d := w.poll
	for ; n > 1 && d < most; n-- {
		d *= 2
	}
	return min(d, most)
}

// sleep waits d, or until ctx ends (its error then).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ErrTriggerDropped is the end of a wait for an operator's extra run that
// will not run: see TriggeredRunWait.
var ErrTriggerDropped = errors.New("the triggered run was dropped before it started")

// TriggeredRunWait polls as JobWait does until the operator's extra run of
// a recurring job ends, and returns that run as it ended. triggered is the
// job as JobTrigger returned it: the run is the first one claimed after it
// (of a lease generation above triggered's) marked db.ReasonManual that
// was not handed back unstarted (released: the job runs it again), not a
// slot of the schedule nor a later trigger's. A pause (or a cancel) before
// the run starts drops it: the wait then ends with an error wrapping
// ErrTriggerDropped that says how the job is. The end of ctx returns the
// run as last read (zero if it had not started) with an error wrapping
// ctx.Err(); a server that stopped answering, with an error wrapping
// ErrNoAnswer, as JobWait's.
func (c *Client) TriggeredRunWait(ctx context.Context, triggered db.Job, poll time.Duration) (db.Run, error) {
	id := triggered.ID
	return pollUntil(ctx, c.waiting(poll), "the triggered run of job "+id, func(ctx context.Context) (db.Run, bool, error) {
		// The job first: a trigger it no longer holds has its run listed
		// by the time the runs are read, if it ran.
		job, err := c.JobGet(ctx, id)
		if err != nil {
			return db.Run{}, false, err
		}
		run, found, err := c.triggeredRun(ctx, triggered)
		switch {
		case err != nil:
			return db.Run{}, false, err
		case found:
			return run, run.Outcome != db.OutcomeRunning, nil
		case !job.Triggered || job.State.Final():
			return db.Run{}, false, fmt.Errorf("job %s is %s and its trigger is gone (a pause drops an operator's run that has not started): %w", id, job.State, ErrTriggerDropped)
		}
		return db.Run{}, false, nil
	})
}

// triggeredRun is the run of the trigger that returned triggered (see
// TriggeredRunWait), found false while it has not started. It reads the
// job's runs, newest first, back to the first run claimed before the
// trigger.
func (c *Client) triggeredRun(ctx context.Context, triggered db.Job) (run db.Run, found bool, err error) {
	for cursor := int64(0); ; {
		runs, next, err := c.RunList(ctx, db.RunListParams{JobID: triggered.ID, Cursor: cursor})
		if err != nil {
			return db.Run{}, false, err
		}
		for _, r := range runs {
			switch {
			case r.Generation == 0: // a missed slot: no claim
			case r.Generation <= triggered.LeaseGeneration:
				return run, found, nil
			case r.Reason == db.ReasonManual && r.Outcome != db.OutcomeReleased:
				run, found = r, true // the oldest such is the trigger's
			}
		}
		if next == 0 {
			return run, found, nil
		}
		cursor = next
	}
}

// pollUntil calls read every w.poll until it reads a value that has
// ended, and returns it. A read answered 503 is made again at the next
// poll; one that got no answer after w.pauseAfter such reads in a row,
// until the server has given no answer for w.noAnswer: that ends the wait
// with the value as last read (zero if none was) and an error wrapping
// ErrNoAnswer and its own, that names what. Any other error ends the
// wait, as does the end of ctx, which returns the value as last read with
// an error wrapping ctx.Err() that names what.
func pollUntil[T any](ctx context.Context, w waiting, what string, read func(context.Context) (v T, ended bool, err error)) (T, error) {
	var last T
	answered := w.now()
	for unanswered := 0; ; {
		next := w.poll
		v, ended, err := read(ctx)
		switch {
		case err == nil && ended:
			return v, nil
		case err == nil:
			last, unanswered, answered = v, 0, w.now()
		case ctx.Err() != nil: // ended during the request
			return last, fmt.Errorf("wait for %s to end: %w", what, ctx.Err())
		case !failsOver(ctx, err):
			var zero T
			return zero, err
		case errors.As(err, new(*Error)): // a 503: an answer
			unanswered, answered = 0, w.now()
		default:
			if w.now().Sub(answered) >= w.noAnswer {
				return last, fmt.Errorf("wait for %s to end: %w: %w", what, ErrNoAnswer, err)
			}
			unanswered++
			next = w.pauseAfter(unanswered)
		}
		if err := w.pause(ctx, next); err != nil {
			return last, fmt.Errorf("wait for %s to end: %w", what, err)
		}
	}
}

// Now is the time that decides what is due on the server: its test clock
// (GET /test/clock) when it runs on one, else this machine's clock, which
// the server's wall clock is kept to. A time to come given as a duration
// (sked pause --until 2h) is added to it.
func (c *Client) Now(ctx context.Context) (time.Time, error) {
	var clock struct {
		Now time.Time `json:"now"`
	}
	err := c.do(ctx, http.MethodGet, "/test/clock", nil, &clock)
	switch {
	case err == nil:
		return clock.Now, nil
	case IsStatus(err, http.StatusNotFound):
		return time.Now(), nil
	}
	return time.Time{}, fmt.Errorf("read the server's clock: %w", err)
}

// JobGetDated is JobGet with the server's time of its answer (its Date
// header, to the second; zero when it has none), by the clock that says
// what is due: compare the job's times with it, not with this machine's
// clock, which may differ.
func (c *Client) JobGetDated(ctx context.Context, id string) (db.Job, time.Time, error) {
	var job db.Job
	resp, err := c.doResponse(ctx, http.MethodGet, jobPath(id, ""), nil, &job)
	if err != nil {
		return db.Job{}, time.Time{}, err
	}
	at, _ := http.ParseTime(resp.Header.Get("Date"))
	return job, at, nil
}

// JobPatch changes the definition of the job of an id or a name by a JSON
// merge patch (RFC 7386), e.g. map[string]any{"schedule": "0 4 * * *",
// "jitter": nil}: a member sets a field, nil (null) removes it (back to its
// default), an object merges into an object. It returns the changed job.
// An *Error of 422 (db.ErrInvalid) names a bad field, one of 409
// (db.ErrConflict) says the job changed meanwhile: patch again.
func (c *Client) JobPatch(ctx context.Context, id string, patch any) (db.Job, error) {
	var job db.Job
	_, err := c.send(ctx, http.MethodPatch, jobPath(id, ""), "application/merge-patch+json", patch, &job)
	return job, err
}

// JobPut gives the job named name the definition req (whose Name may be
// left empty), creating it when no job that is not cancelled has the name,
// and returns what it did: the job, whether it was created, what changed.
// With dryRun it returns what it would do and writes nothing.
func (c *Client) JobPut(ctx context.Context, name string, req JobCreateRequest, dryRun bool) (db.JobPutResult, error) {
	path := "/jobs/by-name/" + url.PathEscape(name)
	if dryRun {
		path += "?dryRun=true"
	}
	var res db.JobPutResult
	err := c.do(ctx, http.MethodPut, path, req, &res)
	return res, err
}

// JobList returns a page of jobs, newest first, and the cursor of the next
// page ("" on the last). Zero fields of p are left to the server.
func (c *Client) JobList(ctx context.Context, p db.JobListParams) (jobs []db.Job, next string, err error) {
	q := url.Values{}
	setQuery(q, "state", string(p.State))
	setQuery(q, "type", p.Type)
	setQuery(q, "name", p.Name)
	setQuery(q, "health", p.Health)
	setQuery(q, "cursor", p.Cursor)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var page struct {
		Jobs       []db.Job `json:"jobs"`
		NextCursor string   `json:"nextCursor"`
	}
	if err := c.do(ctx, http.MethodGet, withQuery("/jobs", q), nil, &page); err != nil {
		return nil, "", err
	}
	return page.Jobs, page.NextCursor, nil
}

// JobCancel cancels a job no worker holds. When a worker holds it, the
// *Error is a 409 (unwrapping to db.ErrConflict) whose detail names the run.
func (c *Client) JobCancel(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, nil)
}

// JobPause pauses a ready job and returns it; a 409 *Error otherwise.
func (c *Client) JobPause(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "pause")
}

// JobResume resumes a paused job and returns it; a 409 *Error otherwise.
func (c *Client) JobResume(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "resume")
}

// JobRetry moves a dead job back to ready and returns it; a 409 *Error
// otherwise.
func (c *Client) JobRetry(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "retry")
}

// JobCancelRun asks the handler running the job to stop; a 409 *Error when
// the job is not running.
func (c *Client) JobCancelRun(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "cancel-run")
}

// JobTrigger runs a ready job once now (for a schedule, an extra run that
// keeps the pending slot); a 409 *Error otherwise.
func (c *Client) JobTrigger(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "trigger")
}

// JobSkip records the pending slot of a recurring job as missed and moves
// to the next.
func (c *Client) JobSkip(ctx context.Context, id string) (db.Job, error) {
	return c.jobAction(ctx, id, "skip")
}

// JobPauseUntil pauses a ready job with a reason and, unless until is
// zero, resumes it by itself at until.
func (c *Client) JobPauseUntil(ctx context.Context, id, reason string, until time.Time) (db.Job, error) {
	body := map[string]string{"reason": reason}
	if !until.IsZero() {
		body["until"] = until.Format(time.RFC3339Nano)
	}
	var job db.Job
	err := c.do(ctx, http.MethodPost, jobPath(id, "/pause"), body, &job)
	return job, err
}

// JobBackfill runs each past slot of the recurring job in [from, to] once.
func (c *Client) JobBackfill(ctx context.Context, id string, from, to time.Time) (db.Backfill, error) {
	var b db.Backfill
	err := c.do(ctx, http.MethodPost, jobPath(id, "/backfill"),
		map[string]string{"from": from.Format(time.RFC3339Nano), "to": to.Format(time.RFC3339Nano)}, &b)
	return b, err
}

func (c *Client) jobAction(ctx context.Context, id, action string) (db.Job, error) {
	var job db.Job
	err := c.do(ctx, http.MethodPost, jobPath(id, "/"+action), nil, &job)
	return job, err
}

// RunList returns a page of the job's runs, newest first, and the cursor of
// the next page (0 on the last).
func (c *Client) RunList(ctx context.Context, p db.RunListParams) (runs []db.Run, next int64, err error) {
	return listPage[db.Run](ctx, c, p.JobID, "runs", p.Limit, p.Cursor)
}

// EventList returns a page of the job's timeline (changes of its definition
// and who made them, firings that gave up, recoveries), newest first, and
// the cursor of the next page (0 on the last).
func (c *Client) EventList(ctx context.Context, p db.EventListParams) (events []db.Event, next int64, err error) {
	return listPage[db.Event](ctx, c, p.JobID, "events", p.Limit, p.Cursor)
}

// listPage reads a page of GET /jobs/{id}/<what> and its Sked-Next-Cursor.
func listPage[T any](ctx context.Context, c *Client, id, what string, limit int, cursor int64) (items []T, next int64, err error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor > 0 {
		q.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	resp, err := c.doResponse(ctx, http.MethodGet, withQuery(jobPath(id, "/"+what), q), nil, &items)
	if err != nil {
		return nil, 0, err
	}
	if h := resp.Header.Get(wire.NextCursorHeader); h != "" {
		if next, err = strconv.ParseInt(h, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("read %s of %s: Sked-Next-Cursor %q is not a number", what, id, h)
		}
	}
	return items, next, nil
}

// jobPath is /jobs/{id} followed by suffix, with id escaped.
func jobPath(id, suffix string) string {
	return "/jobs/" + url.PathEscape(id) + suffix
}

func setQuery(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Workers returns GET /workers: the workers that hold jobs now or were seen
// claiming in the last hour, the most recently seen first.
func (c *Client) Workers(ctx context.Context) (wire.WorkersResponse, error) {
	var ws wire.WorkersResponse
	err := c.do(ctx, http.MethodGet, "/workers", nil, &ws)
	return ws, err
}
