package cli

import (
	"os"
	"os/user"
	"testing"
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
