package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
)

// Sizes of the linearizability test: rounds of linJobs fresh jobs, each
// raced by linWorkers goroutines doing linOps operations.
const (
	linRounds  = 5
	linJobs    = 3
	linWorkers = 4
	linOps     = 40
)

// linStore is what the linearizability test calls.
type linStore interface {
	JobCreate(ctx context.Context, p db.JobCreateParams) (db.Job, bool, error)
	JobCancel(ctx context.Context, id string) (db.Job, error)
	JobRetry(ctx context.Context, id string) (db.Job, error)
	RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error)
	RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error)
}

// linOp is one call: the job it names (by index in the round) and what it
// does. gen and outcome are for finish.
type linOp struct {
	job     int
	kind    string // claim, finish, cancel, retry
	gen     int64
	outcome db.Outcome
}

// linResult is what the call answered: ok (claimed, finished, cancelled,
// retried) or refused (nothing due, stale, conflict), and the generation a
// claim took.
type linResult struct {
	ok  bool
	gen int64
}

// linState is the sequential specification's state of one job: ended
// lists the outcome each ended generation's run took, " gen=outcome;" each
// (a string, so that states compare with ==).
type linState struct {
	state db.JobState
	gen   int64
	ended string
}

// linModel is the sequential specification: one job at a time (history is
// partitioned by job), every step atomic.
var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byJob := map[int][]porcupine.Operation{}
		for _, op := range h {
			j := op.Input.(linOp).job
			byJob[j] = append(byJob[j], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byJob {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return linState{state: db.StateReady} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linOp), output.(linResult)
		switch in.kind {
		case "claim":
			if s.state != db.StateReady {
				return !out.ok, s
			}
			return out.ok && out.gen == s.gen+1, linState{state: db.StateRunning, gen: s.gen + 1, ended: s.ended}
		case "finish":
			end := fmt.Sprintf(" %d=%s;", in.gen, in.outcome)
			if s.state != db.StateRunning || in.gen != s.gen {
				// A repeat of the outcome the run ended with is answered
				// as recorded; anything else is stale.
				return out.ok == strings.Contains(s.ended, end), s
			}
			next := map[db.Outcome]db.JobState{db.OutcomeReleased: db.StateReady, db.OutcomeSucceeded: db.StateDone, db.OutcomeFailed: db.StateDead}[in.outcome]
			return out.ok, linState{state: next, gen: s.gen, ended: s.ended + end}
		case "cancel":
			if s.state == db.StateRunning || s.state == db.StateDone {
				return !out.ok, s
			}
			return out.ok, linState{state: db.StateCancelled, gen: s.gen, ended: s.ended}
		default: // retry
			if s.state != db.StateDead {
				return !out.ok, s
			}
			return out.ok, linState{state: db.StateReady, gen: s.gen, ended: s.ended}
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linOp), output.(linResult)
		return fmt.Sprintf("job%d %s(gen=%d %s) -> ok=%t gen=%d", in.job, in.kind, in.gen, in.outcome, out.ok, out.gen)
	},
}

// linHistory races linWorkers goroutines over linJobs fresh jobs of s and
// records every call with its invocation and response times.
func linHistory(t *testing.T, s linStore, round int) []porcupine.Operation {
	ctx := context.Background()
	ids, types := make([]string, linJobs), make([]string, linJobs)
	for i := range ids {
		types[i] = fmt.Sprintf("lin-%d-%d", round, i)
		j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: types[i], MaxAttempts: 1000})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = j.ID
	}
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for w := range linWorkers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			claimed := make([][]int64, linJobs) // generations this worker took, per job
			for range linOps {
				op := linOp{job: rnd.IntN(linJobs)}
				switch k := rnd.IntN(40); {
				case k < 16:
					op.kind = "claim"
				case k < 35 && len(claimed[op.job]) > 0:
					gens := claimed[op.job]
					op.kind, op.gen = "finish", gens[len(gens)-1]
					if rnd.IntN(2) == 0 {
						op.gen = gens[rnd.IntN(len(gens))] // perhaps a lease long gone
					}
					// Mostly released, so that jobs change hands many times.
					op.outcome = db.OutcomeReleased
					if k := rnd.IntN(10); k < 2 {
						op.outcome = []db.Outcome{db.OutcomeSucceeded, db.OutcomeFailed}[k]
					}
				case k < 36:
					op.kind = "cancel"
				default:
					op.kind = "retry"
				}
				call := time.Since(start).Nanoseconds()
				res, err := linCall(ctx, s, op, ids[op.job], types[op.job], w)
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					t.Errorf("%s of job %d: %v", op.kind, op.job, err)
					return
				}
				if op.kind == "claim" && res.ok {
					claimed[op.job] = append(claimed[op.job], res.gen)
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: w, Input: op, Call: call, Output: res, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return history
}

// linCall makes one call and turns its answer into a linResult; an error
// that is not a refusal is returned.
func linCall(ctx context.Context, s linStore, op linOp, id, typ string, worker int) (linResult, error) {
	var err error
	switch op.kind {
	case "claim":
		var claims []db.Claim
		claims, err = s.RunClaim(ctx, db.RunClaimParams{WorkerID: fmt.Sprint("w", worker), Types: []string{typ}, Max: 1, Lease: time.Hour})
		if err == nil && len(claims) == 1 {
			return linResult{ok: true, gen: claims[0].Job.LeaseGeneration}, nil
		}
	case "finish":
		p := db.RunFinishParams{JobID: id, Generation: op.gen, Outcome: op.outcome}
		_, err = s.RunFinish(ctx, p)
		if errors.Is(err, db.ErrStale) {
			return linResult{}, nil
		}
	case "cancel":
		_, err = s.JobCancel(ctx, id)
	case "retry":
		_, err = s.JobRetry(ctx, id)
	}
	if errors.Is(err, db.ErrConflict) {
		return linResult{}, nil
	}
	return linResult{ok: err == nil && op.kind != "claim"}, err
}

// unfenced is a store with its fence removed: RunFinish writes with the
// job's current generation instead of the caller's, so a worker whose lease
// was replaced still writes. The linearizability check must catch it.
type unfenced struct{ *sqlite.Store }

func (u unfenced) RunFinish(ctx context.Context, p db.RunFinishParams) (db.Job, error) {
	if j, err := u.JobGet(ctx, p.JobID); err == nil && j.State == db.StateRunning {
		p.Generation = j.LeaseGeneration
	}
	return u.Store.RunFinish(ctx, p)
}

func openLin(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sked.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStore_Linearizable races claims, finishes (with live and stale
// generations), cancels and retries on a few jobs of a real store and checks
// with porcupine that every history has a sequential explanation in which
// each call takes effect atomically between its invocation and response.
func TestStore_Linearizable(t *testing.T) {
	t.Parallel()
	s := openLin(t)
	ops := 0
	for round := range linRounds {
		h := linHistory(t, s, round)
		ops += len(h)
		if res := porcupine.CheckOperationsTimeout(linModel, h, 30*time.Second); res != porcupine.Ok {
			t.Fatalf("round %d: %d operations are not linearizable (%s)", round, len(h), res)
		}
	}
	t.Logf("%d operations in %d rounds: linearizable", ops, linRounds)
}

// TestStore_LinearizableCatchesUnfenced shows that the check has teeth: the
// same races on a store whose finish ignores the caller's generation are
// reported as not linearizable.
func TestStore_LinearizableCatchesUnfenced(t *testing.T) {
	t.Parallel()
	s := unfenced{openLin(t)}
	for round := range 10 * linRounds { // interleavings vary: allow a few rounds to hit one
		h := linHistory(t, s, round)
		if res := porcupine.CheckOperationsTimeout(linModel, h, 30*time.Second); res == porcupine.Illegal {
			t.Logf("round %d: %d operations, not linearizable, as expected", round, len(h))
			return
		}
	}
	t.Fatalf("%d rounds on a store without its fence all passed the linearizability check", 10*linRounds)
}
