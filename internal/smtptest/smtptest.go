// Package smtptest runs a real SMTP server (github.com/emersion/go-smtp) on
// a loopback address for tests, and records the messages it accepts.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TLS modes of a Server.
const (
	NoTLS    = iota // plain text only
	StartTLS        // offers STARTTLS
	Implicit        // TLS from the first byte
)

// Config says how a Server behaves.
type Config struct {
	Host string // listen address; "" means 127.0.0.1
	TLS  int    // NoTLS, StartTLS or Implicit
	// Username and Password, when set, are the only credentials AUTH
	// PLAIN accepts, and a message needs them.
	Username, Password string
	// RejectRcpt answers RCPT TO for these addresses with the code.
	RejectRcpt map[string]int
}

// Message is one message the server accepted.
type Message struct {
	From string
	To   []string
	Data []byte // as received, dot-unstuffed
	// TLS and AuthUser are the session's state when the message came.
	TLS      bool
	AuthUser string
}

// Server is an SMTP server under test.
type Server struct {
	Host, Port string
	// Roots trusts the server's self-signed certificate (for 127.0.0.1).
	Roots *x509.CertPool

	mu        sync.Mutex
	messages  []Message // guarded by mu
	authPlain bool      // guarded by mu: AUTH was attempted before TLS
}

// Start runs a server for cfg until the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	cert, roots := selfSigned(t)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == Implicit {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s := &Server{Roots: roots}
	s.Host, s.Port, _ = net.SplitHostPort(ln.Addr().String())
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{srv: s, cfg: cfg, conn: c}, nil
	}))
	srv.Domain = "smtptest.local"
	srv.AllowInsecureAuth = true              // so that a client that sends a password in plain text can be caught
	srv.ErrorLog = log.New(io.Discard, "", 0) // a test log line after the test ends would panic
	if cfg.TLS == StartTLS {
		srv.TLSConfig = tlsCfg
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			t.Errorf("smtp server: %v", err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return s
}

// Messages returns the messages accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// PlainAuth reports whether a client sent AUTH over an unencrypted
// connection.
func (s *Server) PlainAuth() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authPlain
}

// session is one SMTP session.
type session struct {
	srv  *Server
	cfg  Config
	conn *smtp.Conn
	msg  Message
	user string
}

func (s *session) tls() bool { _, ok := s.conn.TLSConnectionState(); return ok }

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	if !s.tls() {
		s.srv.mu.Lock()
		s.srv.authPlain = true
		s.srv.mu.Unlock()
	}
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != s.cfg.Username || password != s.cfg.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials"}
		}
		s.user = username
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.cfg.Username != "" && s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.msg = Message{From: from}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if code := s.cfg.RejectRcpt[to]; code != 0 {
		return &smtp.SMTPError{Code: code, Message: "recipient refused by the test"}
	}
	s.msg.To = append(s.msg.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.Data, s.msg.TLS, s.msg.AuthUser = b, s.tls(), s.user
	s.srv.mu.Lock()
	s.srv.messages = append(s.srv.messages, s.msg)
	s.srv.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.msg = Message{} }
func (s *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1, ::1 and localhost, and a
// pool that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "smtptest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}
