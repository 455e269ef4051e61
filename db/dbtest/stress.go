package dbtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// testStressLifecycle runs claims, renewals, finishes, cancels, pauses,
// triggers, skips, changes of schedule, reaps and sweeps at once for four
// seconds, the clock moving, then checks the ledger: no job has two running
// runs, a running job has exactly its lease's run running, no slot is
// both missed and run or missed twice, and no call failed with anything
// but the errors callers branch on (stale, not found, conflict).
func testStressLifecycle(t *testing.T, f *fixture) {
	const jobs = 60
	var ids []string
	for i := range jobs {
		p := db.JobCreateParams{Type: "noop", MaxAttempts: 3, Backoff: time.Second}
		if i%3 == 0 {
			p.Schedule = "@every 5s"
		}
		ids = append(ids, f.create(p).ID)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		bad  []error
		stop = make(chan struct{})
	)
	check := func(what string, err error) {
		var ce *db.ConflictError
		if err == nil || errors.Is(err, db.ErrStale) || errors.Is(err, db.ErrNotFound) || errors.As(err, &ce) {
			return
		}
		mu.Lock()
		bad = append(bad, fmt.Errorf("%s: %w", what, err))
		mu.Unlock()
	}
	loop := func(fn func(i int)) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(i)
			}
		})
	}
	for w := range 4 {
		loop(func(i int) {
			cs, err := f.Store.RunClaim(f.ctx, db.RunClaimParams{WorkerID: fmt.Sprintf("w%d", w), Max: 5, Lease: 3 * time.Second})
			check("claim", err)
			for k, c := range cs {
				_, err := f.Store.RunHeartbeat(f.ctx, db.RunHeartbeatParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Lease: 3 * time.Second})
				check("heartbeat", err)
				out := []db.Outcome{db.OutcomeSucceeded, db.OutcomeFailed, db.OutcomeReleased}[(i+k)%3]
				_, err = f.Store.RunFinish(f.ctx, db.RunFinishParams{JobID: c.Job.ID, Generation: c.Job.LeaseGeneration, Outcome: out, Retryable: true, Error: errorFor(out)})
				check("finish", err)
			}
		})
	}
	loop(func(i int) {
		id := ids[i%jobs]
		switch i % 5 {
		case 0:
			_, err := f.Store.JobPause(f.ctx, id)
			check("pause", err)
		case 1:
			_, err := f.Store.JobResume(f.ctx, id)
			check("resume", err)
		case 2:
			_, err := f.Store.JobRequestCancelRun(f.ctx, id)
			check("cancel-run", err)
		case 3:
			_, err := f.Store.JobRetry(f.ctx, id)
			check("retry", err)
		case 4:
			if i%97 == 4 {
				_, err := f.Store.JobCancel(f.ctx, id)
				check("cancel", err)
			}
		}
	})
	loop(func(i int) {
		id := ids[(i*3)%jobs] // recurring
		switch i % 4 {
		case 0:
			_, err := f.Store.JobTrigger(f.ctx, id)
			check("trigger", err)
		case 1:
			_, err := f.Store.JobSkipNext(f.ctx, id)
			check("skip", err)
		case 2:
			j, err := f.Store.JobGet(f.ctx, id)
			check("get", err)
			spec := db.SpecOf(j)
			spec.Schedule = []string{"@every 5s", "@every 7s", "*/10 * * * * *"}[i%3]
			spec.Jitter = time.Duration(i%2) * time.Second
			_, err = f.Store.JobRedefine(f.ctx, db.JobRedefineParams{ID: id, Spec: spec})
			if !errors.Is(err, db.ErrInvalid) {
				check("redefine", err)
			}
		case 3:
			_, err := f.Store.JobQuietSweep(f.ctx)
			check("quiet", err)
		}
	})
	loop(func(int) {
		_, err := f.Store.RunReapExpired(f.ctx)
		check("reap", err)
		_, err = f.Store.JobResumeDue(f.ctx)
		check("resume due", err)
		time.Sleep(time.Millisecond)
	})
	loop(func(int) {
		f.Clock.Advance(500 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	})
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	for _, err := range bad[:min(len(bad), 10)] {
		t.Error(err)
	}
	for _, id := range ids {
		j := f.get(id)
		running := 0
		for _, r := range f.runs(id) {
			if r.Outcome == db.OutcomeRunning {
				running++
				if j.State != db.StateRunning || r.Generation != j.LeaseGeneration {
					t.Errorf("job %s %s gen %d has a running run of gen %d", id, j.State, j.LeaseGeneration, r.Generation)
				}
			}
		}
		missed, ran := map[time.Time]int{}, map[time.Time]int{}
		for _, r := range f.runs(id) {
			if r.Slot == nil || r.Reason == db.ReasonManual || r.SlotCount > 0 {
				continue
			}
			switch r.Outcome {
			case db.OutcomeMissed:
				missed[*r.Slot]++
			case db.OutcomeReleased, db.OutcomeLeaseExpired, db.OutcomeRunning:
			default:
				if r.Attempt == 1 {
					ran[*r.Slot]++
				}
			}
		}
		for slot, n := range missed {
			if n > 1 || ran[slot] > 0 {
				t.Errorf("job %s slot %s: missed %d times, ran %d times", id, slot.Format(time.RFC3339Nano), n, ran[slot])
			}
		}
		for slot, n := range ran {
			if n > 1 && j.Recurring() {
				t.Errorf("job %s slot %s: first attempt ended %d times", id, slot.Format(time.RFC3339Nano), n)
			}
		}
		if want := map[bool]int{true: 1, false: 0}[j.State == db.StateRunning]; running != want {
			t.Errorf("job %s %s: %d running runs, want %d", id, j.State, running, want)
		}
	}
}
