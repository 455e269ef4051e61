package handlers

import (
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
)

func TestHandler_ScheduleCheck(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)

	t.Run("Valid", func(t *testing.T) {
		res := e.do(http.MethodPost, "/schedules/check", `{"schedule": "30 2 * * *", "timezone": "America/New_York"}`)
		res.wantStatus(t, http.StatusOK)
		var got scheduleCheckResponse
		res.decode(t, &got)
		// testNow is 2026-03-01 05:00 EST; the spring-forward gap of
		// 2026-03-08 is past the fifth slot.
		want := []string{"2026-03-02T02:30:00-05:00", "2026-03-03T02:30:00-05:00", "2026-03-04T02:30:00-05:00",
			"2026-03-05T02:30:00-05:00", "2026-03-06T02:30:00-05:00"}
		if !got.Valid || len(got.Next) != len(want) {
			t.Fatalf("got %+v, want valid with %v", got, want)
		}
		for i := range want {
			if got.Next[i] != want[i] {
				t.Errorf("next[%d]: got %s, want %s", i, got.Next[i], want[i])
			}
		}
	})
	for _, c := range []struct {
		name, body, field, detail string
		status                    int
	}{
		{"BadSchedule", `{"schedule": "61 * * * *"}`, "schedule", "not a cron expression", 422},
		{"EmptySchedule", `{"schedule": ""}`, "schedule", "the schedule is empty", 422},
		{"BadTimezone", `{"schedule": "@hourly", "timezone": "Mars/Olympus"}`, "timezone", "not an IANA timezone", 422},
		{"UnknownField", `{"schedule": "@hourly", "tz": "UTC"}`, "tz", "unknown field", 422},
		{"NotJSON", `{`, "", "not valid JSON", 400},
		{"TooMany", `{"schedule": "@hourly", "n": 100}`, "n", "n must be from 1 to", 422},
		{"Negative", `{"schedule": "@hourly", "n": -1}`, "n", "not -1", 422},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := e.do(http.MethodPost, "/schedules/check", c.body).wantProblem(t, c.status, c.detail)
			if p.Field != c.field {
				t.Errorf("field: got %q, want %q", p.Field, c.field)
			}
		})
	}
}

func TestHandler_JobPreview(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	preview := func(t *testing.T, id, query string) []fireTime {
		t.Helper()
		res := e.do(http.MethodGet, "/jobs/"+id+"/preview"+query, "")
		res.wantStatus(t, http.StatusOK)
		var got []fireTime
		res.decode(t, &got)
		return got
	}

	t.Run("Recurring", func(t *testing.T) {
		j := e.create(`{"type": "t", "schedule": "0 9 * * *", "timezone": "Europe/Berlin"}`, http.StatusCreated)
		got := preview(t, j.ID, "?n=3")
		want := []fireTime{
			{At: "2026-03-02T09:00:00+01:00", UTC: "2026-03-02T08:00:00Z"},
			{At: "2026-03-03T09:00:00+01:00", UTC: "2026-03-03T08:00:00Z"},
			{At: "2026-03-04T09:00:00+01:00", UTC: "2026-03-04T08:00:00Z"},
		}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("[%d]: got %v, want %v", i, got[i], want[i])
			}
		}
		if n := len(preview(t, j.ID, "")); n != DefaultPreviewCount {
			t.Errorf("default count: got %d, want %d", n, DefaultPreviewCount)
		}
	})
	t.Run("EveryCountsFromItsSlot", func(t *testing.T) {
		var elapsed atomic.Int64 // since testNow, for the store's clock
		e := newTestEnv(t, nil)
		e.store.NowFunc = func() time.Time { return testNow.Add(time.Duration(elapsed.Load())) }
		j := e.create(`{"type": "t", "schedule": "@every 90s"}`, http.StatusCreated)
		elapsed.Store(int64(30 * time.Second))
		res := e.do(http.MethodGet, "/jobs/"+j.ID+"/preview?n=2", "")
		res.wantStatus(t, http.StatusOK)
		var got []fireTime
		res.decode(t, &got)
		want := []string{j.Slot.UTC().Format(time.RFC3339Nano), j.Slot.Add(90 * time.Second).UTC().Format(time.RFC3339Nano)}
		if len(got) != 2 || got[0].UTC != want[0] || got[1].UTC != want[1] {
			t.Errorf("got %v, want %v: the pending slot and the one 90 s after it", got, want)
		}
	})
	t.Run("AfterSkip", func(t *testing.T) {
		j := e.create(`{"type": "t", "schedule": "0 9 * * *", "timezone": "Europe/Berlin"}`, http.StatusCreated)
		e.do(http.MethodPost, "/jobs/"+j.ID+"/skip", "").wantStatus(t, http.StatusOK)
		if got := preview(t, j.ID, "?n=1"); len(got) != 1 || got[0].UTC != "2026-03-03T08:00:00Z" {
			t.Errorf("got %v, want the slot after the skipped one (2026-03-03T08:00:00Z)", got)
		}
	})
	t.Run("PausedAfterSkip", func(t *testing.T) {
		// Skipped to the 3rd, then paused: resumed, it runs the 3rd's
		// slot, not the skipped one.
		j := e.create(`{"type": "t", "schedule": "0 9 * * *", "timezone": "Europe/Berlin"}`, http.StatusCreated)
		e.do(http.MethodPost, "/jobs/"+j.ID+"/skip", "").wantStatus(t, http.StatusOK)
		e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", "").wantStatus(t, http.StatusOK)
		if got := preview(t, j.ID, "?n=1"); len(got) != 1 || got[0].UTC != "2026-03-03T08:00:00Z" {
			t.Errorf("got %v, want the slot it skipped to (2026-03-03T08:00:00Z)", got)
		}
	})
	t.Run("OneOff", func(t *testing.T) {
		j := e.create(`{"type": "t", "runAt": "2026-03-05T00:00:00Z"}`, http.StatusCreated)
		if got := preview(t, j.ID, ""); len(got) != 1 || got[0].UTC != "2026-03-05T00:00:00Z" {
			t.Errorf("got %v, want the one runAt", got)
		}
	})
	t.Run("Paused", func(t *testing.T) {
		// Paused at 10:00 with a past pending slot (09:00 is in the past
		// for a job created before it): fires after now, or after the
		// pause's end, never the slots it sleeps through.
		j := e.create(`{"type": "t", "schedule": "0 * * * *"}`, http.StatusCreated)
		e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", "").wantStatus(t, http.StatusOK)
		got := preview(t, j.ID, "?n=2")
		if len(got) != 2 || got[0].UTC != "2026-03-01T11:00:00Z" || got[0].Note != "if resumed before" {
			t.Errorf("paused until resumed: got %v, want 11:00 on, each if resumed before", got)
		}
		e.do(http.MethodPost, "/jobs/"+j.ID+"/pause", `{"until": "2026-03-01T15:30:00Z"}`).wantStatus(t, http.StatusOK)
		if got := preview(t, j.ID, "?n=1"); len(got) != 1 || got[0].UTC != "2026-03-01T16:00:00Z" || got[0].Note != "" {
			t.Errorf("paused until 15:30: got %v, want 16:00", got)
		}
	})
	t.Run("RunningOneOff", func(t *testing.T) {
		j := e.create(`{"type": "runs-now"}`, http.StatusCreated)
		e.claimOne(`{"workerId": "w", "types": ["runs-now"], "wait": "0s"}`)
		if got := preview(t, j.ID, ""); len(got) != 0 {
			t.Errorf("a running one-off job: got %v, want none (its slot is the run under way)", got)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		j := e.create(`{"type": "t", "schedule": "@hourly"}`, http.StatusCreated)
		e.do(http.MethodDelete, "/jobs/"+j.ID, "").wantStatus(t, http.StatusNoContent)
		if got := preview(t, j.ID, ""); len(got) != 0 {
			t.Errorf("got %v, want none", got)
		}
	})
	t.Run("BadCount", func(t *testing.T) {
		j := e.create(`{"type": "t", "schedule": "@hourly"}`, http.StatusCreated)
		e.do(http.MethodGet, "/jobs/"+j.ID+"/preview?n=0", "").wantProblem(t, http.StatusBadRequest, "n \"0\" must be")
	})
	t.Run("NotFound", func(t *testing.T) {
		e.do(http.MethodGet, "/jobs/nope/preview", "").wantProblem(t, http.StatusNotFound, `job "nope" does not exist`)
	})
}

func TestHandler_Stats(t *testing.T) {
	t.Parallel()

	t.Run("Counts", func(t *testing.T) {
		e := newTestEnv(t, func(c *Config) {
			c.SeriesFunc = func() any { return map[string]int{"samples": 0} }
		})
		e.create(`{"type": "t"}`, http.StatusCreated)
		e.create(`{"type": "t", "runAt": "2026-03-01T09:59:00Z"}`, http.StatusCreated)
		e.create(`{"type": "u", "runAt": "2026-03-01T10:00:30Z"}`, http.StatusCreated)
		j := e.create(`{"type": "t", "runAt": "2026-03-02T00:00:00Z"}`, http.StatusCreated)
		e.do(http.MethodDelete, "/jobs/"+j.ID, "").wantStatus(t, http.StatusNoContent)

		res := e.do(http.MethodGet, "/stats", "")
		res.wantStatus(t, http.StatusOK)
		var got statsResponse
		res.decode(t, &got)
		if got.States[db.StateReady] != 3 || got.States[db.StateCancelled] != 1 || len(got.States) != len(db.AllStates) {
			t.Errorf("states: got %v, want 3 ready, 1 cancelled and every state", got.States)
		}
		if got.DueNextMinute != 3 || got.OldestReadyAgeSeconds != 60 {
			t.Errorf("got %d due, oldest %vs; want 3 due, the oldest 60s late", got.DueNextMinute, got.OldestReadyAgeSeconds)
		}
		if want := map[string]typeDue{"t": {2, 60}, "u": {1, 0}}; !maps.Equal(got.DueByType, want) {
			t.Errorf("by type: got %v, want %v (u's job is due in 30s)", got.DueByType, want)
		}
		series := e.do(http.MethodGet, "/stats/series", "")
		series.wantStatus(t, http.StatusOK)
		if string(series.body) != "{\"samples\":0}\n" {
			t.Errorf("series: got %s, want what SeriesFunc returned", series.body)
		}
	})
	t.Run("NotConfigured", func(t *testing.T) {
		e := newTestEnv(t, nil)
		e.do(http.MethodGet, "/stats/series", "").wantProblem(t, http.StatusNotFound, "not available")
	})
}

// TestHandler_JobPreviewUnparseable: the preview of a job whose stored
// schedule no longer parses (a zone a newer tz database dropped) lists no
// fire times; it answered 500.
func TestHandler_JobPreviewUnparseable(t *testing.T) {
	t.Parallel()
	store, raw := sqlitetest.OpenRaw(t)
	e := newTestEnv(t, func(c *Config) { c.Store = store })
	j := e.create(`{"type": "t", "schedule": "@hourly"}`, http.StatusCreated)
	if _, err := raw.Exec(`UPDATE jobs SET timezone = 'Mars/Olympus' WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	res := e.do(http.MethodGet, "/jobs/"+j.ID+"/preview", "")
	res.wantStatus(t, http.StatusOK)
	var got []fireTime
	if res.decode(t, &got); len(got) != 0 {
		t.Errorf("got %v, want no fire times", got)
	}
	// Paused (as a claim or a sweep sets it aside), its resume says why it
	// cannot: it said "job … is paused; it cannot be resumed (only paused
	// jobs … can be resumed)".
	if _, err := raw.Exec(`UPDATE jobs SET state = 'paused', pause_reason = 'set aside' WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	e.do(http.MethodPost, "/jobs/"+j.ID+"/resume", "").wantProblem(t, http.StatusConflict, "no longer parses")
}
