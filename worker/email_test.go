package worker_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"slices"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/smtptest"
	"github.com/sked-dev/sked/internal/testneeds"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/worker"
)

// emailJob is a job of kind email with the given payload.
func emailJob(t *testing.T, sink, subject, body string) *worker.Job {
	t.Helper()
	raw, err := json.Marshal(worker.EmailPayload{Sink: sink, Subject: subject, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return &worker.Job{ID: "01JTESTJOB", Type: "email", Payload: raw, Attempt: 1, Output: &worker.Tail{Max: 4096}}
}

// sinkFor is an SMTP sink that sends to srv as user (none when empty).
func sinkFor(srv *smtptest.Server, user, pass string, implicit bool) notify.SMTP {
	return notify.SMTP{
		Name: "smtp://test@" + srv.Host + ":" + srv.Port, Host: srv.Host, Port: srv.Port, ImplicitTLS: implicit,
		Username: user, Password: pass, From: "sked@example.com", To: []string{"ops@example.com", "oncall@example.org"},
	}
}

func TestMailer_StartTLS(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Config{TLS: smtptest.StartTLS, Username: "alerts", Password: "p@ss:w/rd"})
	sink := sinkFor(srv, "alerts", "p@ss:w/rd", false)
	m := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{sink}, TLSConfig: &tls.Config{RootCAs: srv.Roots}})
	subject := "sked: nightly-backup gave up après 3 attempts"
	body := "nightly-backup failed.\n.a line that starts with a dot\n" + strings.Repeat("long line ", 20) + "\nlast line"
	if err := m.Handle(context.Background(), emailJob(t, sink.Name, subject, body)); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("server accepted %d messages, want 1", len(msgs))
	}
	got := msgs[0]
	if !got.TLS || got.AuthUser != "alerts" || srv.PlainAuth() {
		t.Errorf("session: tls %v, user %q, auth in plain text %v; want STARTTLS before AUTH as alerts", got.TLS, got.AuthUser, srv.PlainAuth())
	}
	if got.From != "sked@example.com" || !slices.Equal(got.To, sink.To) {
		t.Errorf("envelope from %q to %q, want sked@example.com to %q", got.From, got.To, sink.To)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(got.Data)))
	if err != nil {
		t.Fatal(err)
	}
	dec := new(mime.WordDecoder)
	gotSubject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"From": "sked@example.com", "To": "ops@example.com, oncall@example.org", "Message-Id": "<01JTESTJOB@example.com>",
		"Auto-Submitted": "auto-generated", "Sked-Job-Id": "01JTESTJOB", "Mime-Version": "1.0",
		"Content-Type": "text/plain; charset=utf-8", "Content-Transfer-Encoding": "quoted-printable",
	} {
		if v := msg.Header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if gotSubject != subject {
		t.Errorf("Subject = %q, want %q", gotSubject, subject)
	}
	if _, err := msg.Header.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	raw, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	if b := strings.ReplaceAll(string(raw), "\r\n", "\n"); b != body+"\n" { // DATA ends with a line break
		t.Errorf("body = %q, want %q", b, body)
	}
}

func TestMailer_ImplicitTLS(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Config{TLS: smtptest.Implicit, Username: "alerts", Password: "secret"})
	sink := sinkFor(srv, "alerts", "secret", true)
	m := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{sink}, TLSConfig: &tls.Config{RootCAs: srv.Roots}})
	if err := m.Handle(context.Background(), emailJob(t, sink.Name, "hello", "body")); err != nil {
		t.Fatal(err)
	}
	if msgs := srv.Messages(); len(msgs) != 1 || !msgs[0].TLS || msgs[0].AuthUser != "alerts" {
		t.Fatalf("messages = %+v, want one over TLS from alerts", msgs)
	}
}

// A password goes only over TLS: to a server that offers no STARTTLS, on
// an address other than localhost, sked does not send it.
func TestMailer_NoPasswordWithoutTLS(t *testing.T) {
	t.Parallel()
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		testneeds.Skip(t, testneeds.Linux, "no loopback address besides 127.0.0.1 ("+err.Error()+")")
	} else {
		ln.Close()
	}
	srv := smtptest.Start(t, smtptest.Config{Host: "127.0.0.2", TLS: smtptest.NoTLS, Username: "alerts", Password: "secret"})
	sink := sinkFor(srv, "alerts", "secret", false)
	m := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{sink}})
	err := m.Handle(context.Background(), emailJob(t, sink.Name, "hello", "body"))
	if err == nil || !worker.IsPermanent(err) || !strings.Contains(err.Error(), "offers no STARTTLS") {
		t.Fatalf("Handle = %v, want a permanent error about STARTTLS", err)
	}
	if srv.PlainAuth() || len(srv.Messages()) != 0 {
		t.Fatalf("the server saw AUTH in plain text (%v) or a message (%d)", srv.PlainAuth(), len(srv.Messages()))
	}
}

func TestMailer_Errors(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.Config{TLS: smtptest.StartTLS, Username: "alerts", Password: "secret",
		RejectRcpt: map[string]int{"gone@example.com": 550, "full@example.com": 452}})
	trusted := &tls.Config{RootCAs: srv.Roots}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedHost, closedPort, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()

	for _, tt := range []struct {
		name      string
		edit      func(*notify.SMTP)
		tls       *tls.Config
		permanent bool
		msg       string
	}{
		{"RecipientGone", func(s *notify.SMTP) { s.To = []string{"gone@example.com"} }, trusted, true, "recipient gone@example.com: 550"},
		{"MailboxFull", func(s *notify.SMTP) { s.To = []string{"full@example.com"} }, trusted, false, "recipient full@example.com: 452"},
		{"BadPassword", func(s *notify.SMTP) { s.Password = "wrong" }, trusted, true, "sign in as alerts: 535"},
		{"UntrustedCertificate", func(*notify.SMTP) {}, nil, true, "starttls"},
		{"Unreachable", func(s *notify.SMTP) { s.Host, s.Port = closedHost, closedPort }, trusted, false, "connect"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := sinkFor(srv, "alerts", "secret", false)
			tt.edit(&sink)
			m := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{sink}, TLSConfig: tt.tls})
			err := m.Handle(context.Background(), emailJob(t, sink.Name, "hello", "body"))
			if err == nil || worker.IsPermanent(err) != tt.permanent || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Handle = %v (permanent %v), want permanent %v and %q", err, worker.IsPermanent(err), tt.permanent, tt.msg)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestMailer_ValidatePayload(t *testing.T) {
	t.Parallel()
	sink := notify.SMTP{Name: "smtp://a:xxxxx@mail.example.com:587?to=ops@example.com", Host: "mail.example.com", Port: "587", From: "a@example.com", To: []string{"ops@example.com"}}
	m := worker.NewMailer(worker.MailerConfig{Sinks: []notify.SMTP{sink}})
	good := `{"sink": "smtp://a:xxxxx@mail.example.com:587?to=ops@example.com", "subject": "hi", "body": "text"}`
	if err := m.ValidatePayload("email", json.RawMessage(good)); err != nil {
		t.Errorf("good payload: %v", err)
	}
	err := m.ValidatePayload("email", json.RawMessage(`{"sink": "smtp://other@mail.example.com", "subject": "hi"}`))
	var ve *db.ValidationError
	if !errors.As(err, &ve) || ve.Field != "payload.sink" || !strings.Contains(ve.Msg, sink.Name) {
		t.Errorf("unknown sink: %v, want a payload.sink error naming %s", err, sink.Name)
	}
	if err := m.Handle(context.Background(), emailJob(t, "smtp://other@mail.example.com", "hi", "")); !worker.IsPermanent(err) {
		t.Errorf("Handle of an unknown sink = %v, want a permanent error", err)
	}
	if err := m.ValidatePayload("http", json.RawMessage(`{"url": "https://example.com"}`)); err != nil {
		t.Errorf("other kinds are checked as by ValidatePayload: %v", err)
	}
}
