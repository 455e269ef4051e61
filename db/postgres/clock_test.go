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
	held, release := make(chan struct{}), make(chan struct{})
	for range 2 {
		go postgres.InTx(ctx, s, func(engine.Tx) error {
			held <- struct{}{}
			<-release
			return nil
		})
		<-held
	}
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
