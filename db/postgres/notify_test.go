package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/internal/syncbuf"
)

// listening opens two stores on one new database, a listener and a writer,
// and returns them once the listener's wake-ups, until stop, hear the
// writer's jobs of typ.
func listening(t *testing.T, typ string) (listener, writer *postgres.Store, wakes <-chan struct{}, stop func()) {
	t.Helper()
	url := postgrestest.URL(t)
	listener, writer = postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	wakes = listener.Wakeups(ctx)
	postgrestest.AwaitListening(t, writer, wakes, typ)
	return listener, writer, wakes, stop
}

// TestStore_Wakeups: a job created due now on one node wakes the other
// node's listener, a job due in an hour does not, nor one due now in
// another schema of the same database, and the channel closes when its
// context ends.
func TestStore_Wakeups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listener, writer, wakes, stop := listening(t, "t")
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
	listener.TakeWakeups()

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
	if due := listener.TakeWakeups(); !maps.Equal(due, map[string]int{"t": 1}) {
		t.Errorf("announced: got %v, want t: 1", due)
	}
	if due := listener.TakeWakeups(); due == nil || len(due) > 0 {
		t.Errorf("announced again: got %v, want none", due)
	}

	stop()
	for range wakes {
	}
}

// TestStore_WakeupsCount: a wake-up says how many jobs of each type became
// due, counting only those due soon, and adds up what came since the
// consumer last took it; one whose counts do not fit a notification says
// that jobs of any type may be due.
func TestStore_WakeupsCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	listener, writer, wakes, _ := listening(t, "warm-up")
	create := func(types ...string) {
		t.Helper()
		ps := make([]db.JobCreateParams, len(types))
		for i, typ := range types {
			ps[i] = db.JobCreateParams{Type: typ}
		}
		ps = append(ps, db.JobCreateParams{Type: "later", RunAt: writer.Now().Add(time.Hour)})
		if _, err := writer.JobCreateBatch(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	// Until the jobs created now are heard: the warm-up's last
	// notifications may still be on their way.
	await := func(typ string, n int) (got map[string]int, anyType bool) {
		t.Helper()
		got = map[string]int{}
		deadline := time.After(30 * time.Second)
		for got[typ] < n {
			select {
			case <-wakes:
			case <-deadline:
				t.Fatalf("announced %v, want %d of %s", got, n, typ)
			}
			due := listener.TakeWakeups()
			anyType = anyType || due == nil
			for typ, n := range due {
				got[typ] += n
			}
		}
		delete(got, "warm-up")
		return got, anyType
	}

	create("a", "a", "b")
	create("a")
	if got, unknown := await("a", 3); unknown || !maps.Equal(got, map[string]int{"a": 3, "b": 1}) {
		t.Errorf("announced: got %v (unknown %v), want a: 3, b: 1", got, unknown)
	}

	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("type-with-a-rather-long-name-%03d", i)
	}
	create(append(many, "z")...)
	// A signal left from the first jobs may come first, with nothing new
	// to take.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-wakes:
		case <-deadline:
			t.Fatal("no wake-up for jobs of any type, for 401 types")
		}
		due := listener.TakeWakeups()
		if due == nil {
			break
		}
		if due["z"] != 0 {
			t.Fatalf("announced for 401 types: got %v, want nil (jobs of any type)", due)
		}
	}
}

// TestStore_WakeupsReconnect: when the listener's connection is killed,
// the loss is logged, and wake-ups come again over a new connection.
func TestStore_WakeupsReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s := postgrestest.OpenURL(t, url)
	var logs syncbuf.Buffer
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
	if due := s.TakeWakeups(); due != nil {
		t.Error("the wake-up of a reconnect says which jobs are due; it cannot know")
	}
	postgrestest.AwaitListening(t, s, wakes, "t") // from a notification after the listener's connection was killed
}

// TestStore_WakeupsOutageLogsFew: a listener whose server is out of reach
// for seconds (connections refused) warns of the loss and of each new kind
// of failure, not of every attempt to reconnect (about one a second here,
// then one every 5 s for as long as the outage lasts).
func TestStore_WakeupsOutageLogsFew(t *testing.T) {
	t.Parallel()
	s, p := openProxied(t)
	var logs syncbuf.Buffer
	s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	lctx, stop := context.WithCancel(context.Background())
	defer stop()
	wakes := s.Wakeups(lctx)
	postgrestest.AwaitListening(t, s, wakes, "t")
	p.Cut()
	// Attempts at 0.1, 0.3, 0.7, 1.5, 3.1 and 6.3 s: seven failures in a
	// row within 7 s, unless the machine is slow.
	time.Sleep(7 * time.Second)
	if n := strings.Count(logs.String(), "LISTEN connection lost"); n == 0 || n > 3 {
		t.Errorf("the outage logged %d warnings; want the loss and a line per new kind of failure (at most 3):\n%s", n, logs.String())
	}
}

// TestStore_WakeupsReconnectListening: the wake-up sent on reconnecting
// comes once the new connection LISTENs, so that a job created after it
// wakes the listener: none falls between the wake-up and the LISTEN.
func TestStore_WakeupsReconnectListening(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	s, writer := postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wakes := s.Wakeups(lctx)
	postgrestest.AwaitListening(t, writer, wakes, "warm-up")
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for round := range 5 {
		var killed int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE query LIKE 'LISTEN %' AND query LIKE '%' || current_schema() || '%'`).Scan(&killed); err != nil || killed != 1 {
			t.Fatalf("round %d: terminated %d LISTEN backends, %v; want the listener's one", round, killed, err)
		}
		select { // the signal sent as it reconnects
		case <-wakes:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: no wake-up as the listener reconnects", round)
		}
		if due := s.TakeWakeups(); due != nil {
			t.Fatalf("round %d: the reconnect's wake-up says %v; it cannot know", round, due)
		}
		typ := fmt.Sprintf("after-%d", round)
		if _, _, err := writer.JobCreate(ctx, db.JobCreateParams{Type: typ}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wakes:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: a job created after the reconnect's wake-up woke nobody", round)
		}
		if due := s.TakeWakeups(); due[typ] != 1 {
			t.Fatalf("round %d: got %v, want %s: 1", round, due, typ)
		}
	}
}
