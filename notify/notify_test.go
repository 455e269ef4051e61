package notify_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/internal/smtptest"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/worker"
)

func TestParseSink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      string
		want    notify.Sink
		wantErr string
	}{
		{in: "webhook:https://example.com/hook", want: notify.Sink{Kind: "webhook", URL: "https://example.com/hook"}},
		{in: "ntfy:https://ntfy.sh/alerts", want: notify.Sink{Kind: "ntfy", URL: "https://ntfy.sh/", Topic: "alerts"}},
		{in: "ntfy:http://nas.lan/ntfy/alerts", want: notify.Sink{Kind: "ntfy", URL: "http://nas.lan/ntfy/", Topic: "alerts"}}, // behind a proxy's prefix
		{in: "gotify:https://g.example.com/?token=abc", want: notify.Sink{Kind: "gotify", URL: "https://g.example.com/message", Token: "abc"}},
		{in: "slack:https://hooks.slack.com/services/T1/B2/xyz", want: notify.Sink{Kind: "slack", URL: "https://hooks.slack.com/services/T1/B2/xyz"}},
		{in: "discord:https://discord.com/api/webhooks/1/abc", want: notify.Sink{Kind: "discord", URL: "https://discord.com/api/webhooks/1/abc"}},
		{in: "smtp://alerts:s3cret@mail.example.com:587?to=a@example.com&to=b@example.com&from=sked@example.com", want: notify.Sink{Kind: "smtp", SMTP: &notify.SMTP{
			Name: "smtp://alerts:xxxxx@mail.example.com:587?to=a@example.com&to=b@example.com&from=sked@example.com",
			Host: "mail.example.com", Port: "587", Username: "alerts", Password: "s3cret", From: "sked@example.com", To: []string{"a@example.com", "b@example.com"},
		}}},
		{in: "smtps://me%40example.com:s3cret%3F@mail.example.com?to=ops@example.com", want: notify.Sink{Kind: "smtp", SMTP: &notify.SMTP{
			Name: "smtps://me%40example.com:xxxxx@mail.example.com?to=ops@example.com",
			Host: "mail.example.com", Port: "465", ImplicitTLS: true, Username: "me@example.com", Password: "s3cret?", From: "me@example.com", To: []string{"ops@example.com"},
		}}},
		{in: "smtp://mail.example.com:465?to=a@example.com&from=s@example.com", want: notify.Sink{Kind: "smtp", SMTP: &notify.SMTP{
			Name: "smtp://mail.example.com:465?to=a@example.com&from=s@example.com", Host: "mail.example.com", Port: "465", ImplicitTLS: true,
			From: "s@example.com", To: []string{"a@example.com"},
		}}},
		{in: "smtp://relay.lan:25?to=a@example.com&from=s@example.com", want: notify.Sink{Kind: "smtp", SMTP: &notify.SMTP{
			Name: "smtp://relay.lan:25?to=a@example.com&from=s@example.com", Host: "relay.lan", Port: "25", From: "s@example.com", To: []string{"a@example.com"},
		}}},

		{in: "https://example.com", wantErr: `"https://example.com" is a URL without a kind: write it as webhook:https://example.com`},
		{in: "http://127.0.0.1:9999/SECRET", wantErr: "write it as webhook:http://127.0.0.1:9999/… for"},
		{in: "teams:https://x", wantErr: "unknown kind"},
		{in: "webhook:ftp://x", wantErr: "not an absolute http(s) URL"},
		{in: "ntfy:https://ntfy.sh/", wantErr: "topic"},
		{in: "gotify:https://g.example.com/", wantErr: "token"},
		{in: "slack:https://hooks.slack.com", wantErr: "whole webhook URL"},
		{in: "nocolon", wantErr: "kind:URL"},
		// A webhook's path and query may be its secret: an error names the
		// sink by its kind and host.
		{in: "gotify:gotify.example.com/?token=AppTokSECRET", wantErr: `notify sink "gotify:…": not an absolute http(s) URL`},
		{in: "teams:https://x.example.com/hook/SECRET", wantErr: `notify sink "teams:https://x.example.com/…": unknown kind "teams"`},
		{in: "slack:ftp://hooks.slack.com/services/T/B/SECRET", wantErr: `"slack:ftp://hooks.slack.com/…": not an absolute http(s) URL`},
		{in: "smtp:alerts:s3cret@mail.example.com", wantErr: "write an email sink as a URL"},
		{in: "smtp://alerts:s3cret@mail.example.com:587", wantErr: "at least one recipient"},
		{in: "smtp://alerts:s3cret@mail.example.com?to=a@example.com", wantErr: "give the sender as from="},
		{in: "smtp://alerts:s3cret@mail.example.com?to=ops&from=s@example.com", wantErr: `recipient "ops" is not an email address`},
		{in: "smtp://alerts:s3cret@mail.example.com?to=a@example.com&from=sked", wantErr: `sender "sked" is not an email address`},
		{in: "smtp://alerts:s3cret@mail.example.com?to=a@example.com&from=s@example.com&cc=b@example.com", wantErr: `unknown parameter "cc"`},
		{in: "smtp://alerts:s3c?ret@mail.example.com?to=a@example.com", wantErr: "percent-encode"},
		{in: "smtp://alerts:s3cret@/?to=a@example.com", wantErr: "name the SMTP server"},
		{in: "smtp://alerts:s3cret@mail.example.com/inbox?to=a@example.com", wantErr: "no path"},
		{in: "smtp://:s3cret@mail.example.com?to=a@example.com&from=s@example.com", wantErr: "user name is empty"},
	} {
		got, err := notify.ParseSink(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseSink(%q) err = %v, want %q", c.in, err, c.wantErr)
			} else if strings.Contains(err.Error(), "s3c") || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("ParseSink(%q) err = %v shows the password", c.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSink(%q) = %+v (%+v), %v; want %+v (%+v)", c.in, got, got.SMTP, err, c.want, c.want.SMTP)
		}
	}
}

// parseSinks parses each sink or fails the test.
func parseSinks(t *testing.T, in ...string) []notify.Sink {
	t.Helper()
	var sinks []notify.Sink
	for _, s := range in {
		sink, err := notify.ParseSink(s)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, sink)
	}
	return sinks
}

// webhookEvent notifies e through a webhook sink and returns the event as
// the sink would receive it.
func webhookEvent(t *testing.T, n *notify.Notifier, s *sqlite.Store, e notify.Event) notify.Event {
	t.Helper()
	ctx := context.Background()
	if err := n.Notify(ctx, e); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{Type: notify.TypeHTTP, Limit: 1})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs = %v, %v", jobs, err)
	}
	var p struct{ Body notify.Event }
	if err := json.Unmarshal(jobs[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Body
}

// Every text names the job by its name when it has one, else by its id.
func TestNotify_NameFirst(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	n := &notify.Notifier{Store: s, Sinks: parseSinks(t, "webhook:https://example.com/hook")}
	slot := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	for i, e := range []notify.Event{
		{Kind: notify.KindGaveUp, Schedule: "0 2 * * *", Slot: slot, Attempts: 3, Error: "exit status 1"},
		{Kind: notify.KindGaveUp, Slot: slot, Attempts: 3, Error: "exit status 1"},
		{Kind: notify.KindDead, Attempts: 5, MaxAttempts: 5, Error: "503"},
		{Kind: notify.KindQuiet, Schedule: "@hourly", ExpectSuccessWithin: db.Duration(2 * time.Hour)},
		{Kind: notify.KindRecovered, At: slot},
	} {
		for _, name := range []string{"nightly-backup", ""} {
			e.JobID, e.JobName, e.JobType, e.Key = "01JOBID", name, "exec", strings.Repeat("k", i+1)+name
			got := webhookEvent(t, n, s, e)
			subject, who := "nightly-backup", "nightly-backup (exec, job 01JOBID)"
			if name == "" {
				subject, who = "01JOBID", "job 01JOBID (exec)"
			}
			if !strings.HasPrefix(got.Title, "sked: "+subject+" ") || !strings.Contains(got.Message, who) {
				t.Errorf("%s named %q: title %q, message %q; want %q first and %q", e.Kind, name, got.Title, got.Message, subject, who)
			}
		}
	}
	got := webhookEvent(t, n, s, notify.Event{Kind: notify.KindGaveUp, JobID: "01JOBID", JobType: "exec", Schedule: "0 2 * * *", Slot: slot, Attempts: 3, Error: "exit status 1", Key: "full"})
	want := "job 01JOBID (exec) gave up on its slot 2026-03-08T02:00:00Z: all 3 attempts failed. Last error: exit status 1. The schedule \"0 2 * * *\" goes on at its next slot."
	if got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
	got = webhookEvent(t, n, s, notify.Event{Kind: notify.KindGaveUp, JobID: "01JOBID", JobType: "exec", Schedule: "0 2 * * *", Slot: slot, Attempts: 1, Error: "exit status 1", Key: "one"})
	if want := "sked: 01JOBID gave up after 1 attempt"; got.Title != want || !strings.Contains(got.Message, ": its one attempt failed.") {
		t.Errorf("one attempt: title %q, message %q; want %q and its one attempt", got.Title, got.Message, want)
	}
}

// request is what a test server received.
type request struct {
	path   string
	header http.Header
	body   []byte
}

// recorder is an HTTP server that records every request and answers 204.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs map[string]request // by path; guarded by mu
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{reqs: map[string]request{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs[req.URL.RequestURI()] = request{path: req.URL.RequestURI(), header: req.Header.Clone(), body: b}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) get(path string) (request, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, ok := r.reqs[path]
	return req, ok
}

// deliver runs the store's jobs with the real handlers (http to loopback,
// and email through mailer) until done reports true; it fails the test
// after a minute.
func deliver(t *testing.T, s *sqlite.Store, mailer *worker.Mailer, done func() bool) {
	t.Helper()
	kinds := map[string]worker.HandlerFunc{"http": worker.HTTP(worker.HTTPConfig{AllowPrivate: true})}
	if mailer != nil {
		kinds["email"] = mailer.Handle
	}
	pool := worker.NewPool(worker.PoolConfig{Store: s, Handlers: notify.Handlers(kinds), WorkerID: "notify-test", NowFunc: s.Now, MaxIdle: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pool.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	}()
	for deadline := time.Now().Add(time.Minute); !done(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("deliveries did not arrive within a minute")
		}
	}
}

// A run_gave_up event reaches every kind of sink through the real job
// path, each in its own format, with the name first, the output tail and a
// link to the job's page.
func TestNotifier_Sinks(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	web := newRecorder(t)
	mailSrv := smtptest.Start(t, smtptest.Config{TLS: smtptest.StartTLS, Username: "alerts", Password: "s3cret"})
	sinks := parseSinks(t,
		"webhook:"+web.URL+"/hook",
		"ntfy:"+web.URL+"/alerts",
		"gotify:"+web.URL+"/gotify/?token=gtok",
		"slack:"+web.URL+"/slack/T1/B2/x",
		"discord:"+web.URL+"/discord/1/abc",
		"smtp://alerts:s3cret@127.0.0.1:"+mailSrv.Port+"?to=ops@example.com&from=sked@example.com",
	)
	mailer := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{*sinks[5].SMTP}, TLSConfig: &tls.Config{RootCAs: mailSrv.Roots}})
	n := &notify.Notifier{Store: s, Sinks: sinks, PublicURL: "https://sked.example.com/"}

	slot := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	finished := slot.Add(time.Minute)
	job := db.Job{ID: "01JOBID", Type: "exec", Schedule: "0 2 * * *", MaxAttempts: 3, LastError: "exit status 1"}
	run := db.Run{ID: 42, JobID: job.ID, Slot: &slot, Attempt: 3, FinishedAt: &finished, Outcome: db.OutcomeFailed, GaveUp: true,
		Error: "exit status 1", Output: "dumping db\n<!channel> @everyone ```oops```\ndisk full"}
	e := notify.GaveUp(job, run)
	e.JobName = "nightly-backup" // as the store will give it
	if err := n.Notify(ctx, e); err != nil {
		t.Fatal(err)
	}
	deliver(t, s, mailer, func() bool {
		for _, p := range []string{"/hook", "/", "/gotify/message", "/slack/T1/B2/x", "/discord/1/abc"} {
			if _, ok := web.get(p); !ok {
				return false
			}
		}
		return len(mailSrv.Messages()) == 1
	})

	title := "sked: nightly-backup gave up after 3 attempts"
	link := "https://sked.example.com/#/jobs/01JOBID"
	decode := func(path string, v any) {
		t.Helper()
		req, _ := web.get(path)
		if err := json.Unmarshal(req.body, v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, req.body)
		}
	}

	var hook notify.Event
	decode("/hook", &hook)
	if hook.Kind != notify.KindGaveUp || hook.JobName != "nightly-backup" || hook.RunID != 42 || !hook.Slot.Equal(slot) || hook.Attempts != 3 ||
		hook.Error != "exit status 1" || hook.Output != run.Output || hook.URL != link || hook.Title != title || hook.Key != "gave_up:01JOBID:42" {
		t.Errorf("webhook event = %+v", hook)
	}

	var ntfy struct{ Topic, Title, Message, Click string }
	decode("/", &ntfy)
	if ntfy.Topic != "alerts" || ntfy.Title != title || ntfy.Click != link || !strings.Contains(ntfy.Message, "disk full") || !strings.HasSuffix(ntfy.Message, "\n\n"+link) {
		t.Errorf("ntfy = %+v", ntfy)
	}

	var gotify struct {
		Title, Message string
		Extras         map[string]map[string]map[string]string
	}
	decode("/gotify/message", &gotify)
	if req, _ := web.get("/gotify/message"); req.header.Get("X-Gotify-Key") != "gtok" {
		t.Errorf("gotify token header = %q", req.header.Get("X-Gotify-Key"))
	}
	if gotify.Title != title || gotify.Extras["client::notification"]["click"]["url"] != link || !strings.Contains(gotify.Message, "disk full") {
		t.Errorf("gotify = %+v", gotify)
	}

	var slack struct {
		Text   string
		Blocks []struct {
			Type string
			Text struct{ Type, Text string }
		}
	}
	decode("/slack/T1/B2/x", &slack)
	if len(slack.Blocks) != 3 || slack.Blocks[0].Text.Type != "mrkdwn" || !strings.HasPrefix(slack.Blocks[0].Text.Text, "*"+title+"*\nnightly-backup (exec, job 01JOBID)") ||
		!strings.HasPrefix(slack.Blocks[1].Text.Text, "```") || slack.Blocks[2].Text.Text != "<"+link+"|Open nightly-backup in sked>" {
		t.Errorf("slack blocks = %+v", slack.Blocks)
	}
	if strings.Contains(slack.Text, "<!channel>") || !strings.Contains(slack.Text, "&lt;!channel&gt;") || strings.Count(slack.Text, "```") != 2 ||
		!strings.Contains(slack.Text, "<"+link+"|") {
		t.Errorf("slack text escapes the output and carries the link? %q", slack.Text)
	}

	var discord struct {
		Username string
		Embeds   []struct{ Title, URL, Description, Timestamp string }
		Mentions struct{ Parse []string } `json:"allowed_mentions"`
	}
	decode("/discord/1/abc", &discord)
	if len(discord.Embeds) != 1 || discord.Embeds[0].Title != title || discord.Embeds[0].URL != link || discord.Mentions.Parse == nil ||
		len(discord.Mentions.Parse) != 0 || strings.Count(discord.Embeds[0].Description, "```") != 2 || discord.Embeds[0].Timestamp != "2026-03-08T02:01:00Z" {
		t.Errorf("discord = %+v", discord)
	}

	msg := mailSrv.Messages()[0]
	if !msg.TLS || msg.AuthUser != "alerts" || msg.To[0] != "ops@example.com" {
		t.Errorf("mail session = tls %v, user %q, to %q", msg.TLS, msg.AuthUser, msg.To)
	}
	m, err := mail.ReadMessage(strings.NewReader(string(msg.Data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	body, _ := io.ReadAll(quotedprintable.NewReader(m.Body))
	if subject != title || !strings.Contains(string(body), "nightly-backup (exec, job 01JOBID) gave up") ||
		!strings.Contains(string(body), "disk full") || !strings.Contains(string(body), link) {
		t.Errorf("mail subject %q, body %q", subject, body)
	}

	// Every delivery is an ordinary job, done, and the email job, which
	// any API client may list, does not hold the password.
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil || len(jobs) != 6 {
		t.Fatalf("jobs = %d, %v; want 6", len(jobs), err)
	}
	for _, j := range jobs {
		if j.State != db.StateDone || !notify.IsDelivery(j.IdempotencyKey) {
			t.Errorf("delivery %s (%s, key %q) is %s", j.ID, j.Type, j.IdempotencyKey, j.State)
		}
		if strings.Contains(string(j.Payload), "s3cret") {
			t.Errorf("the %s job's payload shows the SMTP password: %s", j.Type, j.Payload)
		}
	}
}

func TestNotifier_EnqueuesOncePerSink(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t)
	ctx := context.Background()
	n := &notify.Notifier{Store: s, Sinks: parseSinks(t, "webhook:https://example.com/hook", "ntfy:https://ntfy.sh/alerts",
		"smtp://a:b@mail.example.com?to=ops@example.com&from=sked@example.com")}
	e := notify.Dead(db.Job{ID: "j1", Type: "http", Attempt: 3, MaxAttempts: 3, LastError: "boom", UpdatedAt: time.Now()}, db.Run{ID: 1})
	for range 2 { // the second time is a no-op
		if err := n.Notify(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	jobs, _, err := s.JobList(ctx, db.JobListParams{})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("enqueued %d jobs (%v), want 3", len(jobs), err)
	}
	for _, j := range jobs {
		if j.MaxAttempts != 8 || time.Duration(j.Backoff) != 5*time.Second {
			t.Errorf("%s delivery retries %d times from %s, want 8 from 5s", j.Type, j.MaxAttempts, time.Duration(j.Backoff))
		}
	}
}

// Events keyed by what stays the same when they are emitted again.
func TestEvents_Keys(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC)
	j := db.Job{ID: "j1", Type: "exec", Schedule: "@daily", QuietSince: &at, UpdatedAt: at, ExpectSuccessWithin: db.Duration(time.Hour)}
	for _, c := range []struct {
		e    notify.Event
		kind string
		key  string
	}{
		{notify.GaveUp(j, db.Run{ID: 7, Slot: &at, Attempt: 2, FinishedAt: &at}), "run_gave_up", "gave_up:j1:7"},
		{notify.Recovered(j, at), "schedule_recovered", "recovered:j1:2026-03-08T02:00:00Z"},
		{notify.Quiet(j, at, j.ExpectSuccessWithin), "schedule_quiet", "quiet:j1:2026-03-08T02:00:00Z"},
		{notify.Dead(j, db.Run{ID: 7}), "job_dead", "dead:j1:2026-03-08T02:00:00Z"},
		{notify.ClockStep(at.Add(time.Hour), at), "clock_step", "clock:2026-03-08T02:00:00Z"},
	} {
		if c.e.Kind != c.kind || c.e.Key != c.key || !c.e.At.Equal(at) {
			t.Errorf("%s event: kind %q, key %q, at %s; want %q at %s", c.kind, c.e.Kind, c.e.Key, c.e.At, c.key, at)
		}
	}
}

func TestIsDelivery(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{"notify:0:dead:j1:x": true, "ping:start:j1:3": true, "": false, "backfill:j1:x": false, "nightly": false} {
		if got := notify.IsDelivery(key); got != want {
			t.Errorf("IsDelivery(%q) = %v, want %v", key, got, want)
		}
	}
}
