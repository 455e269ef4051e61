package cli

import (
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// TestConnect_Actor: changes are signed USER@HOST, and with USER unset (in
// a container, under cron) by the account's name, not left anonymous.
func TestConnect_Actor(t *testing.T) {
	host, _ := os.Hostname()
	me, err := user.Current()
	if err != nil {
		t.Skipf("no current user: %v", err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"USER": "alice"}, "alice@" + host},
		{map[string]string{}, me.Username + "@" + host},
	} {
		a := &api{env: Env{Getenv: func(k string) string { return c.env[k] }}, server: "http://127.0.0.1:8080"}
		if err := a.connect(); err != nil {
			t.Fatal(err)
		}
		if a.c.Actor != c.want {
			t.Errorf("USER %q: actor %q, want %q", c.env["USER"], a.c.Actor, c.want)
		}
	}
}

func TestOverdue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, c := range []struct {
		job  db.Job
		want string
	}{
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(-5 * time.Minute)}, `due 5m0s ago and not started: no worker serving type "thumb"`},
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(-59 * time.Second)}, ""},
		{db.Job{Type: "thumb", State: db.StateReady, NextRunAt: at(time.Hour)}, ""},
		{db.Job{Type: "thumb", State: db.StateRunning, NextRunAt: at(-time.Hour)}, ""},
		{db.Job{Type: "thumb", State: db.StatePaused, NextRunAt: at(-time.Hour)}, ""},
	} {
		if got := overdue(c.job, now); !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("overdue(%s, due %v) = %q, want %q…", c.job.State, c.job.NextRunAt.Sub(now), got, c.want)
		}
	}
}
