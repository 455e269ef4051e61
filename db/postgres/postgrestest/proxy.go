package postgrestest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a PostgreSQL server until Cut, which
// does to the stores connected through it what a server stopped or out of
// reach does: open connections end and new ones are refused. Silence does
// what a server that stops answering does. Restore lets them connect
// again, at the same address, as a server started again.
type Proxy struct {
	t      testing.TB
	target string // host:port of the server
	addr   string // host:port of the proxy

	mu     sync.Mutex
	ln     net.Listener // nil while cut
	silent bool         // connections are accepted and never answered
	conns  []net.Conn
}

// NewProxy starts a proxy to the server of url (from URL or ServerURL) on a
// free port of 127.0.0.1; it is cut when the test ends.
func NewProxy(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: u.Host, addr: "127.0.0.1:0"}
	p.Restore()
	t.Cleanup(p.Cut)
	return p
}

// URL is serverURL (from URL or ServerURL) through the proxy.
func (p *Proxy) URL(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	u.Host = p.addr
	p.mu.Unlock()
	return u.String()
}

// Cut closes the listener and every connection through it: new
// connections are refused, and those open end.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Silence does to the stores connected through it what a server that
// stops answering does (its host gone, a firewall dropping its packets):
// open connections end, and new ones are accepted but never answered, so
// that they wait out the URL's connect_timeout.
func (p *Proxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore forwards connections again, after Cut (listening again on the
// proxy's address) or Silence (ending the connections it left unanswered,
// such as a cancel request pgx would wait on for 15 s).
func (p *Proxy) Restore() {
	p.t.Helper()
	p.mu.Lock()
	if p.silent {
		p.silent = false
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
	listening := p.ln != nil
	p.mu.Unlock()
	if listening {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy to PostgreSQL: listen again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go p.accept(ln)
}

// accept forwards the connections ln accepts until it is closed.
func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.silent {
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // cut meanwhile
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}
