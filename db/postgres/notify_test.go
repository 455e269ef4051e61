package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_Wakeups: a job created due now on one node wakes the other
// node's listener, a job due in an hour does not, nor one due now in
// another schema of the same database, and the channel closes when its
// context ends.
func TestStore_Wakeups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	listener, writer := open(), open()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wakes := listener.Wakeups(lctx)
	// The listener's LISTEN is in place once a notification reaches it:
	// create due jobs until one does.
	deadline := time.After(30 * time.Second)
	for listening := false; !listening; {
		if _, _, err := writer.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wakes:
			listening = true
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake-up for jobs created due now")
		}
	}
	drain := func() {
		for {
			select {
			case <-wakes:
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	drain()

	if _, _, err := writer.JobCreate(ctx, db.JobCreateParams{Type: "t", RunAt: writer.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
		t.Fatal("woken for a job due in an hour")
	case <-time.After(time.Second):
	}
	other, err := postgres.Open(ctx, postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
		t.Fatal("woken for a job of another schema")
	case <-time.After(time.Second):
	}

	if _, _, err := writer.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wakes:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up for a job created due now")
	}

	stop()
	for range wakes {
	}
}
