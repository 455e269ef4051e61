package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sked-dev/sked/db/engine"
	"github.com/sked-dev/sked/db/postgres"
)

// TestStore_NowNeverAhead reads the store's clock while every connection
// of its pool is busy, so that the database reads its clock only when one
// is freed, late in the call. Now is advice a worker waits by before it
// starts a job claimed ahead of its due time: it must never be ahead of the
// database's clock, or the job starts early. Pass: the time Now answered is
// not after the database's clock read once it answered.
func TestStore_NowNeverAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := poolOfTwo(t, "now_ahead")
	release := holdPool(ctx, s)
	answered := make(chan time.Time)
	go func() { answered <- s.Now() }()
	time.Sleep(time.Second) // how long the pool stays busy: the fault's length, not a wait for a condition
	close(release)
	got := <-answered
	var dbNow time.Time
	if err := c.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if got.After(dbNow) {
		t.Errorf("Now answered %s, %s ahead of the database's clock read after it (%s)",
			got.Format(time.RFC3339Nano), got.Sub(dbNow), dbNow.UTC().Format(time.RFC3339Nano))
	}
}

// TestStore_NowReadOnceWhenStale asks the store's clock from many
// goroutines at once when its reading has grown old while every connection
// of the pool is busy: one of them reads the database's clock again, the
// others answer at once from the old reading, as a busy pool's workers
// each ask when they start a job. Before, each went to the database,
// taking a connection from the claims and completions each time the
// reading grew old. Pass: all but one answer while the pool is still busy.
func TestStore_NowReadOnceWhenStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := poolOfTwo(t, "now_once")
	first := s.Now()
	time.Sleep(1100 * time.Millisecond) // past the store's clock refresh (a second), for the reading to be old
	release := holdPool(ctx, s)
	const callers = 20
	answered := askNow(s, callers)
	// The pool stays busy at most until a caller that read the clock
	// itself would have given up on a connection (its call's timeout, 2s),
	// so that one that did answers only after the release.
	busy := time.After(1500 * time.Millisecond)
	for i := range callers - 1 {
		select {
		case got := <-answered:
			if got.Before(first) {
				t.Fatalf("Now went back: %s, after %s", got, first)
			}
		case <-busy:
			close(release)
			t.Fatalf("%d of %d calls of Now answered while the pool was busy; want all but the one that reads the clock", i, callers)
		}
	}
	close(release)
}

// holdPool takes both connections of s, a pool of two (poolOfTwo), each
// in a transaction of its own, until release is closed.
func holdPool(ctx context.Context, s *postgres.Store) (release chan struct{}) {
	held, release := make(chan struct{}), make(chan struct{})
	for range 2 {
		go postgres.InTx(ctx, s, func(engine.Tx) error {
			held <- struct{}{}
			<-release
			return nil
		})
		<-held
	}
	return release
}

// TestStore_NowWaitsForOneReading asks a store that has no reading of the
// database's clock yet for its time from several callers at once, while
// every connection of its pool is busy: one reads the clock and gives up
// after its call's timeout (2s), and the others, which wait for that
// reading, answer then with this machine's clock. Before, each waiter
// read again in turn when the one before gave up: the last of five
// answered after five timeouts. Pass: all answer before the pool is
// released, after three timeouts' time.
func TestStore_NowWaitsForOneReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := poolOfTwo(t, "now_first")
	release := holdPool(ctx, s)
	const callers = 5
	answered := askNow(s, callers)
	busy := time.After(6 * time.Second)
	for i := range callers {
		select {
		case <-answered:
		case <-busy:
			close(release)
			t.Fatalf("%d of %d calls of Now answered while the pool was busy; want all, after one reading's timeout", i, callers)
		}
	}
	close(release)
}

// askNow calls s.Now from n goroutines at once and sends their answers.
func askNow(s *postgres.Store, n int) <-chan time.Time {
	answered := make(chan time.Time, n)
	for range n {
		go func() { answered <- s.Now() }()
	}
	return answered
}
