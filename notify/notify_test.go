package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/notify"
)

func TestParseSink(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    notify.Sink
		wantErr string
	}{
		{in: "webhook:https://example.com/hook", want: notify.Sink{Kind: "webhook", URL: "https://example.com/hook"}},
		{in: "ntfy:https://ntfy.sh/alerts", want: notify.Sink{Kind: "ntfy", URL: "https://ntfy.sh/", Topic: "alerts"}},
		{in: "gotify:https://g.example.com/?token=abc", want: notify.Sink{Kind: "gotify", URL: "https://g.example.com/message", Token: "abc"}},
		{in: "https://example.com", wantErr: "unknown kind"},
		{in: "slack:https://x", wantErr: "unknown kind"},
		{in: "webhook:ftp://x", wantErr: "not an absolute http(s) URL"},
		{in: "ntfy:https://ntfy.sh/", wantErr: "topic"},
		{in: "gotify:https://g.example.com/", wantErr: "token"},
		{in: "nocolon", wantErr: "kind:URL"},
	} {
		got, err := notify.ParseSink(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseSink(%q) err = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSink(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestNotifier_EnqueuesOncePerSink(t *testing.T) {
	s := sqlitetest.Open(t)
	ctx := context.Background()
	var sinks []notify.Sink
	for _, in := range []string{"webhook:https://example.com/hook", "ntfy:https://ntfy.sh/alerts", "gotify:https://g.example.com/?token=abc"} {
		sink, err := notify.ParseSink(in)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, sink)
	}
	n := &notify.Notifier{Store: s, Sinks: sinks}
	e := notify.Event{Kind: notify.KindDead, JobID: "j1", Title: "job j1 is dead", Message: "boom", At: time.Now(), Key: "dead:j1:1"}
	for range 2 { // the second time is a no-op
		if err := n.Notify(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{Type: "http"})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("enqueued %d http jobs (%v), want 3", len(jobs), err)
	}
	bodies := map[string]map[string]any{}
	for _, j := range jobs {
		var p struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
			Body    map[string]any    `json:"body"`
		}
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			t.Fatal(err)
		}
		bodies[p.URL] = p.Body
		if p.URL == "https://g.example.com/message" && p.Headers["X-Gotify-Key"] != "abc" {
			t.Errorf("gotify token header missing: %v", p.Headers)
		}
	}
	if bodies["https://example.com/hook"]["kind"] != notify.KindDead || bodies["https://ntfy.sh/"]["topic"] != "alerts" ||
		bodies["https://g.example.com/message"]["title"] != "job j1 is dead" {
		t.Fatalf("payload bodies = %v", bodies)
	}
}
