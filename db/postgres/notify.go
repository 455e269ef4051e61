package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// wakeChannel is the LISTEN/NOTIFY channel of "a job may be due now" for
// the jobs of schema. Channels belong to the database, not to a schema:
// each schema has its own, so that two schedulers in two schemas of one
// database (or parallel tests) do not wake each other. The public schema
// keeps the name sked_jobs.
// A name too long for an identifier (63 bytes) is named by a hash instead.
func wakeChannel(schema string) string {
	if schema == "public" {
		return "sked_jobs"
	}
	if c := "sked_jobs." + schema; len(c) <= 63 {
		return c
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("sked_jobs.%x", h.Sum64())
}

// Wakeups LISTENs on its own connection and signals the returned channel
// (buffered, one pending signal) whenever some node commits a write that
// makes a job due soon, so the caller's dispatcher can claim at once. A
// dropped connection is re-established with a backoff, and one signal is
// sent after each reconnect since notifications in between are lost. The
// channel is closed when ctx ends.
func (s *Store) Wakeups(ctx context.Context) <-chan struct{} {
	c := make(chan struct{}, 1)
	go func() {
		defer close(c)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			if err := s.listen(ctx, c); err == nil || ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			wake(c)
		}
	}()
	return c
}

// listen holds one connection LISTENing on the store's channel and forwards its
// notifications to c until ctx ends or the connection fails.
func (s *Store) listen(ctx context.Context, c chan struct{}) error {
	conn, err := pgx.ConnectConfig(ctx, s.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.d.channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake(c)
	}
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
