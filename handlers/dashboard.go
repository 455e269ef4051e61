package handlers

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
)

// The endpoints the dashboard reads beside the jobs API: queue counts, the
// sampled history, a job's next fire times and a schedule check.

// Bounds of GET /jobs/{id}/preview?n=.
const (
	DefaultPreviewCount = 5
	MaxPreviewCount     = 50
)

// statsResponse is the body of GET /stats.
type statsResponse struct {
	At                    time.Time             `json:"at"`
	States                map[db.JobState]int64 `json:"states"` // every state present
	DueNextMinute         int64                 `json:"dueNextMinute"`
	OldestReadyAgeSeconds float64               `json:"oldestReadyAgeSeconds"` // 0 when no ready job is due
	DueByType             map[string]typeDue    `json:"dueByType"`             // types with a job due within a minute
	RunningByType         map[string]int64      `json:"runningByType"`
	MissedSlots           int64                 `json:"missedSlots"`
	QuietSchedules        int64                 `json:"quietSchedules"`   // whose dead-man's switch fired
	FailingSchedules      int64                 `json:"failingSchedules"` // whose last firing gave up
}

// typeDue is how far behind one type's ready jobs are, in GET /stats.
type typeDue struct {
	DueNextMinute         int64   `json:"dueNextMinute"`
	OldestReadyAgeSeconds float64 `json:"oldestReadyAgeSeconds"` // 0 when none is due yet
}

// fireTime is one entry of GET /jobs/{id}/preview: the instant in the job's
// timezone and in UTC, and a note when daylight saving time moved the slot
// or fires it once where its wall-clock time happens twice.
type fireTime struct {
	At   string `json:"at"`
	UTC  string `json:"utc"`
	Note string `json:"note,omitempty"`
}

// scheduleCheckRequest is the body of POST /schedules/check.
type scheduleCheckRequest struct {
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
	N        int    `json:"n"` // how many fire times; 0: DefaultPreviewCount
}

// scheduleCheckResponse is the answer to a valid schedule: its next fire
// times (RFC 3339 in its timezone), and the same with DST notes.
type scheduleCheckResponse struct {
	Valid bool       `json:"valid"`
	Next  []string   `json:"next"`
	Fires []fireTime `json:"fires"`
}

// errNoStats answers GET /stats/series when the server was built without
// the source they read.
var errNoStats = &requestError{Status: http.StatusNotFound, Msg: "statistics are not available from this server"}

// handleStats serves GET /stats: the jobs per state and the ready queue now.
func (h *handler) handleStats(w http.ResponseWriter, r *http.Request) {
	now := h.store.Now()
	st, err := h.store.Stats(r.Context(), now)
	if err != nil {
		h.error(w, r, fmt.Errorf("read stats: %w", err))
		return
	}
	resp := statsResponse{
		At: now, States: st.JobsByState, DueNextMinute: st.DueNextMinute,
		OldestReadyAgeSeconds: db.Age(st.ReadyOldestDue, now).Seconds(), DueByType: make(map[string]typeDue, len(st.DueByType)),
		RunningByType: st.RunningByType, MissedSlots: st.MissedSlots,
		QuietSchedules: st.QuietSchedules, FailingSchedules: st.FailingSchedules,
	}
	for typ, d := range st.DueByType {
		resp.DueByType[typ] = typeDue{DueNextMinute: d.NextMinute, OldestReadyAgeSeconds: db.Age(d.Oldest, now).Seconds()}
	}
	h.writeJSON(w, r, http.StatusOK, resp)
}

// handleStatsSeries serves GET /stats/series: the history kept in memory by
// the server's sampler.
func (h *handler) handleStatsSeries(w http.ResponseWriter, r *http.Request) {
	if h.seriesFunc == nil {
		h.error(w, r, errNoStats)
		return
	}
	h.writeJSON(w, r, http.StatusOK, h.seriesFunc())
}

// handleJobPreview serves GET /jobs/{id}/preview?n=: the job's next n fire
// times (slot plus the job's offset) after now, in its timezone. A one-off
// job waiting to run has one; a finished or cancelled job none.
func (h *handler) handleJobPreview(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	q, err := queryParams(r, "n")
	if err != nil {
		h.error(w, r, err)
		return
	}
	n := DefaultPreviewCount
	if s := q["n"]; s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > MaxPreviewCount {
			h.error(w, r, &requestError{
				Status: http.StatusBadRequest, Field: "n",
				Msg: fmt.Sprintf("n %q must be a whole number from 1 to %d", s, MaxPreviewCount),
			})
			return
		}
	}
	job, err := h.store.JobGet(r.Context(), id)
	if err != nil {
		h.error(w, r, jobError(id, action{}, err))
		return
	}
	times := []fireTime{}
	switch {
	case job.State.Final():
	case !job.Recurring():
		if job.NextRunAt != nil && job.State != db.StateRunning { // a running one's slot is past; a retry is not planned yet
			times = append(times, fireTimeIn(*job.NextRunAt, time.UTC))
		}
	default:
		sched, err := schedule.Parse(job.Schedule, job.Timezone)
		if err != nil {
			break // a stored schedule that no longer parses fires at no time; the job, set aside, says why
		}
		offset := schedule.Offset(job.ID, time.Duration(job.Jitter))
		for _, f := range upcoming(job, sched, h.store.Now(), n) {
			ft := fireTimeIn(f.At.Add(offset), sched.Location())
			ft.Note = f.Note
			if job.State == db.StatePaused && job.PauseUntil == nil {
				if ft.Note != "" {
					ft.Note += "; "
				}
				ft.Note += "if resumed before"
			}
			times = append(times, ft)
		}
	}
	h.writeJSON(w, r, http.StatusOK, times)
}

// upcoming is the next n slots of job, a recurring job that is not over,
// whose schedule is sched: from its pending slot on (an @every schedule
// counts from it, a skip moved it), after the slot it is running, after
// now for a job without a slot, and for a paused job after now or the end
// of its pause: the slots it sleeps through are recorded missed.
func upcoming(job db.Job, sched *schedule.Schedule, now time.Time, n int) []schedule.Fire {
	switch {
	case job.State == db.StatePaused:
		if job.PauseUntil != nil && job.PauseUntil.After(now) {
			now = *job.PauseUntil
		}
		if job.Slot != nil && job.Slot.After(now) { // skipped to before the pause: resumed, it keeps that slot
			return sched.PreviewFrom(*job.Slot, n)
		}
		return sched.Preview(now, n)
	case job.Slot == nil:
		return sched.Preview(now, n)
	case job.State == db.StateRunning && !job.Triggered: // an operator's extra run keeps the pending slot
		return sched.Preview(*job.Slot, n)
	}
	return sched.PreviewFrom(*job.Slot, n)
}

func fireTimeIn(t time.Time, loc *time.Location) fireTime {
	return fireTime{At: t.In(loc).Format(time.RFC3339Nano), UTC: t.UTC().Format(time.RFC3339Nano)}
}

// handleScheduleCheck serves POST /schedules/check {schedule, timezone}: 200
// with the next five fire times, or 422 with the parser's message.
func (h *handler) handleScheduleCheck(w http.ResponseWriter, r *http.Request) {
	var req scheduleCheckRequest
	if err := h.decodeBody(w, r, &req); err != nil {
		h.error(w, r, err)
		return
	}
	// Parse checks the zone first; try it alone so a bad zone names its field.
	if _, err := schedule.Parse("@hourly", req.Timezone); err != nil {
		h.error(w, r, &db.ValidationError{Field: "timezone", Msg: "timezone: " + err.Error()})
		return
	}
	sched, err := schedule.Parse(req.Schedule, req.Timezone)
	if err != nil {
		h.error(w, r, &db.ValidationError{Field: "schedule", Msg: "schedule: " + err.Error()})
		return
	}
	if req.N < 0 || req.N > MaxPreviewCount {
		h.error(w, r, &db.ValidationError{Field: "n", Msg: fmt.Sprintf("n must be from 1 to %d (0 or none: %d), not %d", MaxPreviewCount, DefaultPreviewCount, req.N)})
		return
	}
	n := cmp.Or(req.N, DefaultPreviewCount)
	resp := scheduleCheckResponse{Valid: true, Next: []string{}, Fires: []fireTime{}}
	for _, f := range sched.Preview(h.store.Now(), n) {
		resp.Next = append(resp.Next, f.At.Format(time.RFC3339))
		ft := fireTimeIn(f.At, sched.Location())
		ft.Note = f.Note
		resp.Fires = append(resp.Fires, ft)
	}
	h.writeJSON(w, r, http.StatusOK, resp)
}
