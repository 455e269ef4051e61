package main

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestFaults_LockedWritesAnswer holds the database's write lock from another
// process for longer than sked waits for it, while 14 clients create jobs
// at once, each with its own idempotency key.
//
// Pass: every create gets an answer, 201 or 503, though the client waits
// only twice the write bound of 5 s and the lock is held for three times it
// (before the bound, writes queued behind each other, 5 s each, for up to a
// minute, and some got no answer); once the lock is gone and stragglers had
// time to land, exactly the jobs answered 201 exist: a write answered 503
// never commits later.
func TestFaults_LockedWritesAnswer(t *testing.T) {
	r := newFaultRig(t, t.TempDir())
	r.http.Timeout = 2 * writeBound
	p := r.start("")
	waitFor(t, "sked to listen", r.listening)
	other := openWritable(t, r.db)
	defer other.Close()
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	const clients = 14
	answers := make([]problemAnswer, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { answers[i] = r.postJob(r.jobBody(keyOf(i), false)) })
	}
	time.Sleep(3 * writeBound)
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	time.Sleep(writeBound) // a write still queued in the server would land now
	refused := 0
	for i, a := range answers {
		switch a.Status {
		case http.StatusCreated:
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Errorf("create %d answered %+v after %s; want 201 or 503\n%s", i, a, a.Took, p.log())
		}
	}
	if refused == 0 {
		t.Errorf("no create was refused while the lock was held past the bound: %+v", answers)
	}
	var longest time.Duration
	for i, a := range answers {
		longest = max(longest, a.Took)
		var n int
		if err := other.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE idempotency_key = ?`, keyOf(i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if exists, want := n == 1, a.Status == http.StatusCreated; exists != want {
			t.Errorf("create %d answered %d, yet the job exists = %v", i, a.Status, exists)
		}
	}
	t.Logf("%d of %d creates refused while locked; longest answer %s", refused, clients, longest.Round(time.Millisecond))
}

// writeBound is how long sked serve lets a write wait for the database
// (db/sqlite writeWait).
const writeBound = 5 * time.Second

func keyOf(i int) string { return "locked-" + string(rune('a'+i)) }
