package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	listener, writer := postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wakes := listener.Wakeups(lctx)
	postgrestest.AwaitListening(t, writer, wakes, "t")
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

// TestStore_WakeupsReconnect: when the listener's connection is killed,
// the loss is logged, and wake-ups come again over a new connection.
func TestStore_WakeupsReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	var logs syncBuffer
	s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wakes := s.Wakeups(lctx)
	postgrestest.AwaitListening(t, s, wakes, "t") // at first
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || current_schema() || '%'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d LISTEN backends, %v; want the listener's one", killed, err)
	}
	waitLog := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "LISTEN connection lost") {
		if time.Now().After(waitLog) {
			t.Fatalf("no warning of the lost connection; log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select { // the signal sent as it reconnects, for what it missed
	case <-wakes:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up as the listener reconnects")
	}
	postgrestest.AwaitListening(t, s, wakes, "t") // from a notification after the listener's connection was killed
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }
