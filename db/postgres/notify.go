package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/internal/failurelog"
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

// maxPayload is the longest NOTIFY payload the server takes (8,000 bytes,
// less one).
const maxPayload = 7999

// wakePayload is the NOTIFY payload announcing due: a JSON object of job
// type to count. Counts too many to fit announce nothing: the empty
// payload, which listeners take as "jobs of any type, how many unknown", as
// they do a payload they cannot read (one from a node of another version).
func wakePayload(due map[string]int) string {
	b, err := json.Marshal(due)
	if err != nil || len(b) > maxPayload {
		return ""
	}
	return string(b)
}

// woken is what the wake-ups signalled since their consumer last took them.
type woken struct {
	mu      sync.Mutex
	due     map[string]int // jobs announced due, by type
	unknown bool           // some wake-up did not say which
}

// add records a wake-up's payload.
func (w *woken) add(payload string) {
	var due map[string]int
	if payload == "" || json.Unmarshal([]byte(payload), &due) != nil {
		w.addUnknown()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.due == nil {
		w.due = map[string]int{}
	}
	for typ, n := range due {
		w.due[typ] += n
	}
}

// addUnknown records a wake-up that does not say which jobs are due.
func (w *woken) addUnknown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unknown = true
}

// take returns and forgets what was recorded: nil when some wake-up did
// not say which jobs are due.
func (w *woken) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := w.due
	if w.unknown {
		due = nil
	} else if due == nil {
		due = map[string]int{}
	}
	w.due, w.unknown = nil, false
	return due
}

// TakeWakeups says what the signals of Wakeups announced since the last
// call: how many jobs of each type became due on any node, this one
// included (empty when
// an earlier call took them), or nil when some signal could not say, and
// jobs of any type may be due (a reconnect, whose lost notifications are
// unknown; a node of another version; more types than a notification
// holds). A consumer that wakes everything on each signal need not call it.
func (s *Store) TakeWakeups() map[string]int {
	return s.woken.take()
}

// Wakeups LISTENs on its own connection and signals the returned channel
// (buffered, one pending signal) whenever some node commits a write that
// makes a job due soon, so the caller's dispatcher can claim at once;
// TakeWakeups says which jobs. A dropped connection is re-established with
// a backoff (100 ms, doubling to 5 s, from 100 ms again once LISTEN holds),
// and one signal is sent after each reconnect, once LISTEN holds, since
// notifications in between are lost. The loss and the failed attempts to
// reconnect are warnings to s.Logger as a failurelog.Log logs failures (an
// outage of the database is a few lines), and LISTEN holding again after
// them an INFO line. The channel is closed when ctx ends.
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
		var failures failurelog.Log
		holds := func() { failures.Worked(log, "wake-ups from other nodes: LISTEN holds again") }
		for reconnect := false; ctx.Err() == nil; reconnect = true {
			listened, err := s.listen(ctx, c, reconnect, holds)
			if err == nil || ctx.Err() != nil {
				return
			}
			if listened {
				backoff = first
			}
			failures.Failed(log, slog.LevelWarn, "wake-ups from other nodes: LISTEN connection lost; claims rely on polling until it is back",
				err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
	return c
}

// listen holds one connection LISTENing on the store's channel and forwards its
// notifications to c until ctx ends or the connection fails; listened says
// whether LISTEN held before it failed. It calls holds once LISTEN holds.
// On a reconnect it signals c once LISTEN holds, for the notifications
// lost since the last connection: sent before, it would miss those
// committed between it and the LISTEN.
func (s *Store) listen(ctx context.Context, c chan struct{}, reconnect bool, holds func()) (listened bool, err error) {
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
	holds()
	if reconnect {
		s.woken.addUnknown()
		wake(c)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		s.woken.add(n.Payload)
		wake(c)
	}
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
