package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/textproto"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/clip"
	"github.com/sked-dev/sked/notify"
)

// EmailPayload is the payload of kind "email": a plain-text message to the
// recipients of one of the server's SMTP sinks.
type EmailPayload struct {
	// Sink names the SMTP sink by its notify.SMTP.Name: the URL given to
	// sked serve --notify with its password masked. Required.
	Sink string `json:"sink"`
	// Subject is one line of text. Required.
	Subject string `json:"subject"`
	// Body is the message, plain UTF-8 text.
	Body string `json:"body,omitempty"`
}

// MailerConfig configures kind "email".
type MailerConfig struct {
	// Sinks are the SMTP sinks messages go through, passwords included.
	Sinks []notify.SMTP
	// TLSConfig is cloned for each connection, with ServerName set to the
	// sink's host; nil verifies the server against the system's roots.
	TLSConfig *tls.Config
}

// Mailer runs kind "email": it sends each job's message through the SMTP
// sink its payload names. The sinks, and their passwords, are the server's
// configuration, given to NewMailer; a payload can only name one. So the
// jobs, which any API client may list, show who gets mail but never the
// password, and a client cannot send mail to anyone else.
type Mailer struct {
	sinks map[string]notify.SMTP // by Name; immutable
	tls   *tls.Config            // never nil
}

// NewMailer returns the mailer of cfg's sinks.
func NewMailer(cfg MailerConfig) *Mailer {
	m := &Mailer{sinks: map[string]notify.SMTP{}, tls: cfg.TLSConfig}
	if m.tls == nil {
		m.tls = &tls.Config{}
	}
	for _, s := range cfg.Sinks {
		m.sinks[s.Name] = s
	}
	return m
}

// ValidatePayload is ValidatePayload that also refuses an email payload
// naming a sink the mailer does not have.
func (m *Mailer) ValidatePayload(typ string, payload json.RawMessage) error {
	if typ != "email" {
		return ValidatePayload(typ, payload)
	}
	var p EmailPayload
	if err := parseEmailPayload(payload, &p); err != nil {
		return err
	}
	_, err := m.sink(p.Sink)
	return err
}

// sink returns the sink named name, or a *db.ValidationError naming the
// sinks there are.
func (m *Mailer) sink(name string) (notify.SMTP, error) {
	s, ok := m.sinks[name]
	if !ok {
		names := slices.Sorted(maps.Keys(m.sinks))
		return s, &db.ValidationError{Field: "payload.sink", Msg: fmt.Sprintf("%q is not an SMTP sink of this server; name one of %q", name, names)}
	}
	return s, nil
}

// Handle is the handler of kind "email". It connects to the sink's server
// (implicit TLS on port 465 and smtps://, else STARTTLS when the server
// offers it), signs in with AUTH PLAIN when the sink has a user, and sends
// the message to the sink's recipients, with these headers:
//
//	From, To: the sink's sender and recipients
//	Subject: the payload's subject (RFC 2047-encoded when not ASCII)
//	Date, MIME-Version, Content-Type: text/plain; charset=utf-8
//	Content-Transfer-Encoding: quoted-printable
//	Message-ID: <job id@sender's domain>, the same for every attempt
//	Auto-Submitted: auto-generated (RFC 3834: no vacation replies)
//	Sked-Job-Id: the job's id
//
// A password is sent only over TLS, or to localhost. A network error or a
// 4xx reply is a retryable error; a 5xx reply, a certificate that does not
// verify, a server without STARTTLS when a password must be sent, and a
// bad payload are Permanent errors. The connection is bound to ctx, and the
// error of a send cut short by ctx wraps ctx.Err().
func (m *Mailer) Handle(ctx context.Context, job *Job) error {
	var p EmailPayload
	if err := parseEmailPayload(job.Payload, &p); err != nil {
		return Permanent(err)
	}
	s, err := m.sink(p.Sink)
	if err != nil {
		return Permanent(err)
	}
	msg, err := message(s, p, job.ID, time.Now())
	if err != nil {
		return Permanent(err)
	}
	if err := m.send(ctx, s, msg); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return err
	}
	return nil
}

// send delivers msg through sink s.
func (m *Mailer) send(ctx context.Context, s notify.SMTP, msg []byte) error {
	addr := net.JoinHostPort(s.Host, s.Port)
	fail := func(step string, err error) error {
		err = fmt.Errorf("send mail via %s: %s: %w", addr, step, err)
		var te *textproto.Error
		var ce *tls.CertificateVerificationError
		if errors.As(err, &te) && te.Code >= 500 || errors.As(err, &ce) {
			return Permanent(err)
		}
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail("connect", err)
	}
	raw := conn
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return fail("connect", err)
		}
	}
	if s.ImplicitTLS {
		tc := tls.Client(conn, m.tlsFor(s.Host))
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail("tls", err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, s.Host)
	if err != nil {
		return fail("greeting", err)
	}
	defer c.Close()
	if !s.ImplicitTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(m.tlsFor(s.Host)); err != nil {
				return fail("starttls", err)
			}
		} else if s.Username != "" && !localhost(s.Host) {
			return Permanent(fmt.Errorf("send mail via %s: the server offers no STARTTLS, and sked sends a password only over TLS; "+
				"if it speaks TLS from the start, use smtps:// or port 465", addr))
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, s.Host)); err != nil {
			return fail("sign in as "+s.Username, err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fail("sender "+s.From, err)
	}
	for _, to := range s.To {
		if err := c.Rcpt(to); err != nil {
			return fail("recipient "+to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail("data", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fail("data", err)
	}
	if err := w.Close(); err != nil {
		return fail("data", err)
	}
	if err := c.Quit(); err != nil {
		return fail("quit", err)
	}
	return nil
}

// tlsFor is the mailer's TLS configuration for a server named host.
func (m *Mailer) tlsFor(host string) *tls.Config {
	c := m.tls.Clone()
	c.ServerName = host
	return c
}

// localhost reports whether host is one net/smtp's PlainAuth lets a
// password go to without TLS.
func localhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// maxSubject bounds the subject line, so that its header stays under the
// 998 characters a line of mail may have.
const maxSubject = 200

// message is the RFC 5322 message of payload p sent through s by job
// jobID at now.
func message(s notify.SMTP, p EmailPayload, jobID string, now time.Time) ([]byte, error) {
	subject := clip.Runes(p.Subject, maxSubject)
	domain := s.From[strings.LastIndexByte(s.From, '@')+1:]
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", s.From)
	header("To", strings.Join(s.To, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+jobID+"@"+domain+">")
	header("Auto-Submitted", "auto-generated")
	header("Sked-Job-Id", jobID)
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(p.Body)); err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return nil, fmt.Errorf("encode mail body: %w", err)
	}
	return b.Bytes(), nil
}

// parseEmailPayload decodes and checks an email payload; its errors are
// *db.ValidationError.
func parseEmailPayload(raw []byte, p *EmailPayload) error {
	const example = `{"sink": "smtp://alerts:xxxxx@mail.example.com:587?to=ops@example.com", "subject": "Backup done", "body": "…"}`
	if err := decodeStrict(raw, p, "email", example, "sink", "subject", "body"); err != nil {
		return err
	}
	switch {
	case p.Sink == "":
		return &db.ValidationError{Field: "payload.sink", Msg: "is required: the SMTP sink given to sked serve --notify, with its password shown as xxxxx"}
	case strings.TrimSpace(p.Subject) == "":
		return &db.ValidationError{Field: "payload.subject", Msg: "is required: one line of text"}
	case strings.ContainsFunc(p.Subject, unicode.IsControl):
		return &db.ValidationError{Field: "payload.subject", Msg: "must be one line, without line breaks or control characters"}
	case strings.ContainsRune(p.Body, 0):
		return &db.ValidationError{Field: "payload.body", Msg: "must be text, without NUL characters"}
	}
	return nil
}
