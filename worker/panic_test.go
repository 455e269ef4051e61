package worker_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/worker"
)

// A handler that panics fails its run with the panic's value, and the
// pool goes on running jobs.
func TestPool_HandlerPanicFailsTheRun(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"bug": func(context.Context, *worker.Job) error { panic("nil map") },
		"ok":  func(context.Context, *worker.Job) error { return nil },
	}})
	bug := create(t, s, db.JobCreateParams{Type: "bug", MaxAttempts: 1})
	p.Wake()
	waitState(t, s, bug.ID, db.StateDead)
	if rs := runs(t, s, bug.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeFailed || rs[0].Error != "handler panicked: nil map" {
		t.Fatalf("runs %+v, want one failed with the panic", rs)
	}
	ok := create(t, s, db.JobCreateParams{Type: "ok"})
	p.Wake()
	waitState(t, s, ok.ID, db.StateDone)
}

// A handler that ends its goroutine instead of returning (runtime.Goexit,
// as a test's t.FailNow or require calls) fails its run, and the pool goes
// on: the job stayed running, its lease renewed, for as long as the
// process lived.
func TestPool_HandlerGoexitFailsTheRun(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	p, _ := startPool(t, s, worker.PoolConfig{Handlers: map[string]worker.HandlerFunc{
		"failnow": func(context.Context, *worker.Job) error { runtime.Goexit(); return nil },
		"ok":      func(context.Context, *worker.Job) error { return nil },
	}})
	j := create(t, s, db.JobCreateParams{Type: "failnow", MaxAttempts: 1})
	p.Wake()
	waitState(t, s, j.ID, db.StateDead)
	if rs := runs(t, s, j.ID); len(rs) != 1 || rs[0].Outcome != db.OutcomeFailed || !strings.Contains(rs[0].Error, "runtime.Goexit") {
		t.Fatalf("runs %+v, want one failed saying the handler did not return", rs)
	}
	ok := create(t, s, db.JobCreateParams{Type: "ok"})
	p.Wake()
	waitState(t, s, ok.ID, db.StateDone)
}
