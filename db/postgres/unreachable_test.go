package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
)

// TestStore_Unreachable cuts a store off its server, as a PostgreSQL that
// is stopped or restarting does: every call fails with ErrUnreachable
// (the API's 503 with Retry-After), not an error of no known kind (500).
func TestStore_Unreachable(t *testing.T) {
	u, err := url.Parse(postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.addr()
	s := postgrestest.OpenURL(t, u.String())
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	for name, call := range map[string]func() error{
		"create": func() error { _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); return err },
		"get":    func() error { _, err := s.JobGet(ctx, j.ID); return err },
		"list":   func() error { _, _, err := s.JobList(ctx, db.JobListParams{}); return err },
		"claim":  func() error { _, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Max: 1}); return err },
		"pause":  func() error { _, err := s.JobPause(ctx, j.ID); return err },
		"stats":  func() error { _, err := s.Stats(ctx, s.Now()); return err },
		"runs":   func() error { _, _, err := s.RunList(ctx, db.RunListParams{JobID: j.ID}); return err },
		"next":   func() error { _, _, err := s.JobNextDue(ctx, nil); return err },
	} {
		if err := call(); !errors.Is(err, db.ErrUnreachable) {
			t.Errorf("%s with the server out of reach: %v; want ErrUnreachable", name, err)
		}
	}
}

// proxy forwards TCP connections to a server until cut.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// cut closes the listener and every connection through it: new
// connections are refused, and those open end.
func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestStore_DeadlineIsNotUnreachable: a call whose context runs out is
// not taken for a server out of reach.
func TestStore_DeadlineIsNotUnreachable(t *testing.T) {
	s := postgrestest.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "t"}); err == nil || errors.Is(err, db.ErrUnreachable) {
		t.Fatalf("create with its time out: %v; want an error that is not ErrUnreachable", err)
	}
}
