package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/failpoint"
	"github.com/sked-dev/sked/internal/clip"
)

// maxGroup bounds the completions committed in one transaction.
const maxGroup = 512

// Claims go before completions (see yieldToClaims), within these bounds.
const (
	// claimGap is how long after a full claim that said More the next
	// claim is waited for: the caller starts the claimed runs first.
	claimGap = 2 * time.Millisecond
	// maxYield bounds how long completions wait for claims, so that a
	// stream of claims cannot hold them back for long.
	maxYield = 100 * time.Millisecond
)

// errClosed answers a RunFinish that reaches a closed store.
var errClosed = errors.New("store closed")

// finishReq is one RunFinish call waiting for the committer.
type finishReq struct {
	ctx  context.Context
	p    db.RunFinishParams
	done chan finishResult // buffered(1); receives exactly one result
}

type finishResult struct {
	job      *db.Job // the job as the run left it; nil with err
	err      error
	repeated bool // the report repeats the one its run ended with
}

// RunFinish records a run's end under its lease; see db.Store. The call is
// committed together with the other completions queued at the same time
// (group commit); it returns once that transaction is durable, with its own
// result: ErrStale for its generation alone, never for its neighbours'.
func (s *Store) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	p.Error, p.Output = clip.Head(text(p.Error), db.ErrorHeadBytes), tail(p.Output) // as the run keeps them
	req := &finishReq{ctx: ctx, p: p, done: make(chan finishResult, 1)}
	var r finishResult
	select {
	case s.finishes <- req:
		select {
		case r = <-req.done:
		case <-ctx.Done():
			r.err = ctx.Err()
		case <-s.stopped:
			// Queued after the committer's last look at the queue.
			select {
			case r = <-req.done:
			default:
				r.err = errClosed
			}
		}
	case <-ctx.Done():
		r.err = ctx.Err()
	case <-s.quit:
		r.err = errClosed
	}
	if r.err != nil {
		return db.Job{}, wrap(r.err, "finish run %s/%d", p.JobID, p.Generation)
	}
	if r.repeated {
		db.MarkRepeatReport(ctx)
	}
	return *r.job, nil
}

// commitLoop is the committer: it takes the first queued completion and
// every other one queued behind it, up to maxGroup, and commits them in one
// transaction. A group forms while the previous one is being committed, so
// a lone completion waits for nothing. It returns when Close is called,
// after answering what was queued.
func (s *Store) commitLoop() {
	defer close(s.stopped)
	group := make([]*finishReq, 0, maxGroup)
	for {
		select {
		case r := <-s.finishes:
			group = append(group[:0], r)
			if s.yield {
				s.yieldToClaims()
			}
		case <-s.quit:
			for {
				select {
				case r := <-s.finishes:
					r.done <- finishResult{err: errClosed}
				default:
					return
				}
			}
		}
	more:
		for len(group) < maxGroup {
			select {
			case r := <-s.finishes:
				group = append(group, r)
			default:
				break more
			}
		}
		s.commitGroup(group)
	}
}

// yieldToClaims waits, at most maxYield, while claims wait for the writer
// or hold it, or the next claim of a caller with more free slots is due. A
// due job waits for its claim to start, a finished one only for its record:
// in a spike, the jobs still to be claimed start sooner, and the
// completions queued meanwhile commit in fewer, larger groups.
func (s *Store) yieldToClaims() {
	deadline := time.Now().Add(maxYield)
	for {
		wait := time.Duration(s.moreUntil.Load()) - time.Since(s.epoch)
		if s.claiming.Load() > 0 {
			wait = time.Until(deadline)
		}
		wait = min(wait, time.Until(deadline))
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-s.claimsDone:
		case <-t.C:
		case <-s.quit:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// refusesAll reports whether err is the database refusing every write for
// now (locked, full or out of reach), so that retrying a group's
// completions one by one would only fail each again, one after another.
func refusesAll(err error) bool {
	return errors.Is(err, db.ErrBusy) || errors.Is(err, db.ErrStorageFull) || errors.Is(err, db.ErrUnreachable)
}

// signal makes a notification pending on c without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// commitGroup finishes the group's runs in one transaction and answers each
// caller. A stale generation changes nothing but its own record and fails
// alone. If any other error occurs the transaction is rolled back and every
// call is retried in a transaction of its own, so one bad call cannot fail
// its neighbours; unless the database refuses every write for now
// (refusesAll).
func (s *Store) commitGroup(group []*finishReq) {
	ctx := context.Background()
	results := make([]finishResult, len(group))
	err := s.inTx(ctx, func(tx Tx) error {
		var (
			ps    []db.RunFinishParams
			index []int
		)
		for i, r := range group {
			if err := r.ctx.Err(); err != nil {
				results[i].err = err
				continue
			}
			ps, index = append(ps, r.p), append(index, i)
		}
		done, err := s.finishLeased(ctx, tx, ps)
		if err != nil {
			return err
		}
		for k, i := range index {
			results[i] = done[k]
		}
		failpoint.Hit(failpoint.BeforeFinishCommit)
		return nil
	})
	if err != nil && len(group) > 1 && !refusesAll(err) {
		// Not the database refusing every write: retry each alone.
		for _, r := range group {
			s.commitGroup([]*finishReq{r})
		}
		return
	}
	for i, r := range group {
		switch {
		case err != nil:
			results[i] = finishResult{err: fmt.Errorf("commit completions: %w", err)}
		case results[i].repeated && results[i].job == nil:
			// A repeat whose job the transaction did not hold (see
			// finishStale), read now that it has ended.
			j, err := s.JobGet(r.ctx, r.p.JobID)
			results[i] = finishResult{job: &j, err: err, repeated: true}
		}
		r.done <- results[i]
	}
}
