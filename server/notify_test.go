package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/internal/smtptest"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
)

// call sends a JSON request to the server and returns the status and body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// waitUntil polls cond until it holds; it fails the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

// With an SMTP sink configured the server runs kind email: a job that
// names the sink sends its message, and the job the API shows names the
// sink without its password.
func TestServer_Email(t *testing.T) {
	mailSrv := smtptest.Start(t, smtptest.Config{Username: "alerts", Password: "s3cret"})
	sink, err := notify.ParseSink("smtp://alerts:s3cret@127.0.0.1:" + mailSrv.Port + "?to=ops@example.com&from=sked@example.com")
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, server.Config{NotifySinks: []notify.Sink{sink}})

	payload, _ := json.Marshal(map[string]any{"type": "email", "payload": map[string]string{
		"sink": sink.SMTP.Name, "subject": "Certificates renewed", "body": "all 3 renewed",
	}})
	status, body := call(t, "POST", r.base+"/jobs", string(payload))
	if status != http.StatusCreated {
		t.Fatalf("POST /jobs: %d %s", status, body)
	}
	var job struct{ JobID string }
	if err := json.Unmarshal([]byte(body), &job); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the message to arrive", func() bool { return len(mailSrv.Messages()) == 1 })
	if msg := mailSrv.Messages()[0]; msg.AuthUser != "alerts" || !strings.Contains(string(msg.Data), "Subject: Certificates renewed") {
		t.Errorf("message from %q: %s", msg.AuthUser, msg.Data)
	}
	if status, body := call(t, "GET", r.base+"/jobs/"+job.JobID, ""); status != http.StatusOK || strings.Contains(body, "s3cret") || !strings.Contains(body, "alerts:xxxxx@") {
		t.Errorf("GET /jobs/%s: %d %s; want the sink named with its password masked", job.JobID, status, body)
	}

	status, body = call(t, "POST", r.base+"/jobs", `{"type": "email", "payload": {"sink": "smtp://mallory@mail.example.com?to=x@example.com", "subject": "hi"}}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "payload.sink") || !strings.Contains(body, "not an SMTP sink of this server") {
		t.Errorf("email job naming an unknown sink: %d %s", status, body)
	}

	// A job's own notify settings are checked against the server's sinks.
	status, body = call(t, "POST", r.base+"/jobs", `{"type": "noop", "notify": {"sinks": ["`+sink.SMTP.Name+`"]}}`)
	if status != http.StatusCreated {
		t.Errorf("job notifying the server's email sink: %d %s", status, body)
	}
	status, body = call(t, "POST", r.base+"/jobs", `{"type": "noop", "notify": {"sinks": ["smtp://mallory:pw@mail.example.com?from=m@example.com&to=x@example.com"]}}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"notify.sinks"`) || !strings.Contains(body, "is not one sked serve was started with") {
		t.Errorf("job notifying an email sink the server lacks: %d %s", status, body)
	}
}

// Without an SMTP sink, creating an email job says how to configure one.
func TestServer_EmailWithoutSink(t *testing.T) {
	r := start(t, server.Config{})
	status, body := call(t, "POST", r.base+"/jobs", `{"type": "email", "payload": {"sink": "smtp://a@b?to=c@d", "subject": "hi"}}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "--notify smtp://") {
		t.Errorf("email job without a sink: %d %s", status, body)
	}
}

// A dead job's notification links to its page under --public-url.
func TestServer_NotificationLinksToJobPage(t *testing.T) {
	events := make(chan notify.Event, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var e notify.Event
		if err := json.NewDecoder(req.Body).Decode(&e); err == nil {
			events <- e
		}
	}))
	defer hook.Close()
	sink, err := notify.ParseSink("webhook:" + hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, server.Config{EnableExec: true, AllowPrivateTargets: true, NotifySinks: []notify.Sink{sink}, PublicURL: "https://sked.example.com/ops/"})
	status, body := call(t, "POST", r.base+"/jobs", `{"type": "exec", "payload": {"command": ["false"]}, "maxAttempts": 1}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /jobs: %d %s", status, body)
	}
	var job struct{ JobID string }
	if err := json.Unmarshal([]byte(body), &job); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.Kind != notify.KindDead || e.JobID != job.JobID || e.URL != "https://sked.example.com/ops/#/jobs/"+job.JobID {
			t.Errorf("event = %+v, want job_dead of %s linking to its page", e, job.JobID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30 s")
	}
}
