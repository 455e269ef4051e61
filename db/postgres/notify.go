package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
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
// dropped connection is re-established with a backoff (100 ms, doubling
// to 5 s, from 100 ms again once LISTEN holds), each loss and failed
// attempt a warning to s.Logger, and one signal is sent after each
// reconnect since notifications in between are lost. The channel is
// closed when ctx ends.
func (s *Store) Wakeups(ctx context.Context) <-chan struct{} {
	c := make(chan struct{}, 1)
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	go func() {
		defer close(c)
		const first = 100 * time.Millisecond
		backoff := first
		for ctx.Err() == nil {
			listened, err := s.listen(ctx, c)
			if err == nil || ctx.Err() != nil {
				return
			}
			if listened {
				backoff = first
			}
			log.Warn("wake-ups from other nodes: LISTEN connection lost; claims rely on polling until it is back",
				"err", err, "retry_in", backoff)
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
// notifications to c until ctx ends or the connection fails; listened says
// whether LISTEN held before it failed.
func (s *Store) listen(ctx context.Context, c chan struct{}) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.d.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
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
