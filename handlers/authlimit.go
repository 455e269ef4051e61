package handlers

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Wrong bearer tokens are limited per client address, so that a machine on
// the network cannot guess tokens at the speed of its link: each address
// may send authFailBurst wrong tokens at once and then one per
// authFailEvery; past that its requests answer 429 with Retry-After until
// it has one to spend.
//
// A limited address is refused whatever its token: were a right token let
// through there, the 429s would only say "wrong", and the guessing would go
// on at full speed. A right token does not spend anything, and a request
// without a bearer token guesses nothing: it is neither counted nor
// refused. Other addresses are not touched: the operator whose dashboard
// is on another machine goes on while one guesses.
const (
	authFailBurst = 20
	authFailEvery = 3 * time.Second
	// authFailClients bounds the addresses remembered. An address whose
	// budget is whole again is forgotten when room is needed; while more
	// than this many are short of theirs, new ones share one budget.
	authFailClients = 10000
)

// authLimiter keeps the budgets of wrong tokens of the client addresses
// that sent some.
type authLimiter struct {
	burst int           // wrong tokens an address may send at once: authFailBurst
	every time.Duration // then one per every: authFailEvery

	mu      sync.Mutex
	clients map[netip.Prefix]*rate.Limiter // guarded by mu
	now     func() time.Time               // the clock; time.Now but in tests
	swept   time.Time                      // when clients was last swept; guarded by mu
	shared  *rate.Limiter                  // of the addresses past authFailClients

	failed  atomic.Int64 // wrong bearer tokens, since the start
	refused atomic.Int64 // requests answered 429, since the start
}

// newAuthLimiter is a limiter that allows each address burst wrong tokens
// at once, then one per every.
func newAuthLimiter(burst int, every time.Duration) *authLimiter {
	l := &authLimiter{burst: burst, every: every, clients: map[netip.Prefix]*rate.Limiter{}, now: time.Now}
	l.shared = l.newBudget()
	return l
}

// newBudget is the budget of wrong tokens of an address that has sent none
// yet.
func (l *authLimiter) newBudget() *rate.Limiter {
	return rate.NewLimiter(rate.Every(l.every), l.burst)
}

// authLimitError refuses a request whose address sent too many wrong
// tokens: 429, with Retry-After.
type authLimitError struct{ wait time.Duration }

func (e *authLimitError) Error() string {
	return "too many requests with a wrong bearer token came from this address"
}

// retryAfter is e's wait in whole seconds, rounded up, as Retry-After has it.
func (e *authLimitError) retryAfter() int { return int(math.Ceil(e.wait.Seconds())) }

// admit decides at now whether client may have a bearer token looked at:
// a nil error, or an *authLimitError saying how long to wait. When it may,
// the caller calls done with whether the token was a wrong one; a wrong
// one spends one of the client's budget.
//
// The client holds one of its budget while its token is looked at, so
// that many requests sent at once cannot all pass on the last one; a right
// token gives it back.
func (l *authLimiter) admit(client netip.Prefix, now time.Time) (done func(wrong bool), err error) {
	res := l.budget(client, now).ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		l.refused.Add(1)
		return nil, &authLimitError{wait: d}
	}
	return func(wrong bool) {
		if wrong {
			l.failed.Add(1)
		} else {
			res.CancelAt(now)
		}
	}, nil
}

// budget is client's budget at now, new if it has none: its own, or the
// shared one while authFailClients addresses with budgets short of whole
// are kept.
func (l *authLimiter) budget(client netip.Prefix, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim := l.clients[client]; lim != nil {
		return lim
	}
	if len(l.clients) >= authFailClients && now.Sub(l.swept) >= l.every {
		// An address whose budget is whole again is as good as new: it
		// is forgotten. The sweep is spaced, so that a full table costs
		// one walk each l.every, not one for each request.
		l.swept = now
		for c, lim := range l.clients {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.clients, c)
			}
		}
	}
	if len(l.clients) >= authFailClients {
		return l.shared
	}
	lim := l.newBudget()
	l.clients[client] = lim
	return lim
}

// counts are the wrong bearer tokens and the requests refused 429 since
// the start.
func (l *authLimiter) counts() (failed, refused int64) {
	return l.failed.Load(), l.refused.Load()
}

// AuthFailures are the requests with a wrong bearer token, and those
// refused (429) because their address had sent too many, since the start.
func (a *API) AuthFailures() (failed, refused int64) { return a.h.authLimit.counts() }

// clientOf is the address r's guesses are counted under: the address the
// request came from, or, when that is one of trusted (reverse proxies),
// the last address in X-Forwarded-For that is not. An IPv6 address counts
// as its /64, which one machine usually has whole. X-Forwarded-For is never
// read from a peer that is not trusted: any client may send one.
func clientOf(r *http.Request, trusted []netip.Prefix) netip.Prefix {
	addr := peerAddr(r.RemoteAddr)
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a hop we cannot read: the last one we could is the client
			}
			addr = hop.Unmap()
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

// peerAddr is the IP address of a RemoteAddr ("192.0.2.1:5678"), the
// invalid zero address when it has none (a test's or a unix socket's).
func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, _ := netip.ParseAddr(host)
	return addr.Unmap()
}

// isTrusted reports whether addr is in one of trusted.
func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
