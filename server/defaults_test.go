package server

import (
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

func TestParseJobDefaults(t *testing.T) {
	got, err := ParseJobDefaults("http=10/5m, exec=3/, *=/30s")
	if err != nil {
		t.Fatal(err)
	}
	f := defaultsFunc(got)
	for typ, want := range map[string]db.Defaults{
		"http":   {MaxAttempts: 10, Backoff: 5 * time.Minute},
		"exec":   {MaxAttempts: 3, Backoff: db.DefaultBackoff}, // its own entry leaves backoff to sked
		"report": {MaxAttempts: db.DefaultMaxAttempts, Backoff: 30 * time.Second},
	} {
		if d := f(typ); d != want {
			t.Errorf("defaults of %s = %+v, want %+v", typ, d, want)
		}
	}
	if got, err := ParseJobDefaults("http=1000/1m"); err != nil || got["http"].MaxAttempts != 1000 {
		t.Errorf("ParseJobDefaults(http=1000/1m) = %+v, %v; want 1000 attempts, the most a job may have", got, err)
	}
	if d := defaultsFunc(nil)("http"); d != db.DefaultsFor("http") || d.MaxAttempts != 25 {
		t.Errorf("without overrides, http = %+v, want sked's own 25 attempts", d)
	}
	for _, bad := range []string{"http", "http=0/1m", "http=x/1m", "http=3/-1s", "=3/1s", "http=1001/1m", "*=1000000000/", "http=3/500us", "http=3/0s", "ht tp=3/1s", "exec;rm=3/1s"} {
		if _, err := ParseJobDefaults(bad); err == nil || !strings.Contains(err.Error(), "job defaults") {
			t.Errorf("ParseJobDefaults(%q) = %v, want an error saying how to write it", bad, err)
		}
	}
}
