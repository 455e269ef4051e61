package handlers

import (
	"maps"
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
// A limited address is refused whatever its token, but for the tokens that
// were right from it before it ran out: were any right token let through
// there, the 429s would only say "wrong", and the guessing would go on at
// full speed; a token already right from the address tells a guesser
// nothing new, and the workers and dashboards that used it go on while a
// client at the same address (a worker left with a revoked token, a
// guesser behind the same NAT) spends the budget. A right token does not
// spend anything, and a request without a bearer token guesses nothing:
// it is neither counted nor refused. Other addresses are not touched: the
// operator whose dashboard is on another machine goes on while one
// guesses.
const (
	authFailBurst = 20
	authFailEvery = 3 * time.Second
	// authFailClients bounds the addresses remembered. An address whose
	// budget is whole again is forgotten when room is needed; while more
	// than this many are short of theirs, new ones share one budget.
	authFailClients = 10000
	// authFailNetShare is how many addresses' budgets an IPv6 /64 has,
	// besides each address's own. The machines of one network segment
	// share its /64, and a machine can take any address in it: one
	// address that guesses does not spend its neighbours' budget, and one
	// that takes a new address for each guess gets no more than this many
	// addresses' worth.
	authFailNetShare = 10
	// authKnownFor is how long a token right from an address stays known
	// there, since it was last right, so that it passes while the address
	// is limited.
	authKnownFor = 24 * time.Hour
)

// authLimiter keeps the budgets of wrong tokens of the client addresses
// that sent some.
type authLimiter struct {
	burst int           // wrong tokens an address may send at once: authFailBurst
	every time.Duration // then one per every: authFailEvery

	mu      sync.Mutex
	clients map[netip.Prefix]*rate.Limiter // by address (/32, /128) and IPv6 /64; guarded by mu
	now     func() time.Time               // the clock; time.Now but in tests
	swept   time.Time                      // when clients was last swept; guarded by mu
	// sweptKnown is when known was last swept; guarded by mu.
	sweptKnown time.Time
	shared     *rate.Limiter // of the addresses past authFailClients
	// known are the tokens right from each address, with when each was
	// last, at most authFailClients addresses (a token is one of the
	// configured ones, so an address has few); guarded by mu.
	known map[netip.Addr]map[tokenDigest]time.Time

	failed  atomic.Int64 // wrong bearer tokens, since the start
	refused atomic.Int64 // requests answered 429, since the start
}

// newAuthLimiter is a limiter that allows each address burst wrong tokens
// at once, then one per every.
func newAuthLimiter(burst int, every time.Duration) *authLimiter {
	l := &authLimiter{burst: burst, every: every, clients: map[netip.Prefix]*rate.Limiter{}, known: map[netip.Addr]map[tokenDigest]time.Time{}, now: time.Now}
	l.shared = l.newBudget(netip.Prefix{})
	return l
}

// newBudget is the budget of wrong tokens of key that has sent none yet:
// an address's, or an IPv6 /64's, which is authFailNetShare addresses'.
func (l *authLimiter) newBudget(key netip.Prefix) *rate.Limiter {
	if key.Addr().Is6() && key.Bits() == 64 {
		return rate.NewLimiter(rate.Every(l.every/authFailNetShare), l.burst*authFailNetShare)
	}
	return rate.NewLimiter(rate.Every(l.every), l.burst)
}

// budgetKeys are the budgets a guess from client spends: its address's,
// and an IPv6 address's /64's too.
func budgetKeys(client netip.Addr) []netip.Prefix {
	keys := []netip.Prefix{netip.PrefixFrom(client, client.BitLen())}
	if network, err := client.Prefix(64); err == nil && client.Is6() {
		keys = append(keys, network)
	}
	return keys
}

// authLimitError refuses a request whose address sent too many wrong
// tokens: 429, with Retry-After.
type authLimitError struct{ wait time.Duration }

func (e *authLimitError) Error() string {
	return "too many requests with a wrong bearer token came from this address"
}

// retryAfter is e's wait in whole seconds, rounded up, as Retry-After has it.
func (e *authLimitError) retryAfter() int { return int(math.Ceil(e.wait.Seconds())) }

// admit decides at now whether client may have bearer token digest looked
// at: a nil error, or an *authLimitError saying how long to wait. When it
// may, the caller calls done with whether the token was a wrong one; a
// wrong one spends one of the client's budget, a right one is known from
// client since. A client with no budget left may still have its known
// tokens looked at.
//
// The client holds one of its budget while its token is looked at, so
// that many requests sent at once cannot all pass on the last one; a right
// token gives it back.
func (l *authLimiter) admit(client netip.Addr, digest tokenDigest, now time.Time) (done func(wrong bool), err error) {
	var held []*rate.Reservation
	var wait time.Duration
	for _, key := range budgetKeys(client) {
		res := l.budget(key, now).ReserveN(now, 1)
		held = append(held, res)
		wait = max(wait, res.DelayFrom(now))
	}
	giveBack := func() {
		for _, res := range held {
			res.CancelAt(now)
		}
	}
	if wait > 0 {
		giveBack()
		if l.knows(client, digest, now) {
			return func(wrong bool) {}, nil
		}
		l.refused.Add(1)
		return nil, &authLimitError{wait: wait}
	}
	return func(wrong bool) {
		if wrong {
			l.failed.Add(1)
			return
		}
		giveBack()
		l.remember(client, digest, now)
	}, nil
}

// knows reports whether digest was right from client within authKnownFor
// before now.
func (l *authLimiter) knows(client netip.Addr, digest tokenDigest, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.known[client][digest]
	return ok && now.Sub(last) < authKnownFor
}

// remember records that digest was right from client at now. When
// authFailClients addresses are known, those whose tokens are all older
// than authKnownFor are forgotten, at most once each l.every; while that
// leaves no room, a new address is not remembered.
func (l *authLimiter) remember(client netip.Addr, digest tokenDigest, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tokens := l.known[client]
	if tokens == nil {
		if len(l.known) >= authFailClients && now.Sub(l.sweptKnown) >= l.every {
			l.sweptKnown = now
			for c, ts := range l.known {
				maps.DeleteFunc(ts, func(_ tokenDigest, last time.Time) bool { return now.Sub(last) >= authKnownFor })
				if len(ts) == 0 {
					delete(l.known, c)
				}
			}
		}
		if len(l.known) >= authFailClients {
			return
		}
		tokens = map[tokenDigest]time.Time{}
		l.known[client] = tokens
	}
	tokens[digest] = now
}

// budget is key's budget at now, new if it has none: its own, or the
// shared one while authFailClients budgets short of whole are kept.
func (l *authLimiter) budget(key netip.Prefix, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim := l.clients[key]; lim != nil {
		return lim
	}
	if len(l.clients) >= authFailClients && now.Sub(l.swept) >= l.every {
		// A budget that is whole again is as good as new: it is
		// forgotten. The sweep is spaced, so that a full table costs one
		// walk each l.every, not one for each request.
		l.swept = now
		for c, lim := range l.clients {
			if lim.TokensAt(now) >= float64(lim.Burst()) {
				delete(l.clients, c)
			}
		}
	}
	if len(l.clients) >= authFailClients {
		return l.shared
	}
	lim := l.newBudget(key)
	l.clients[key] = lim
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
// the last address in X-Forwarded-For that is not. X-Forwarded-For is
// never read from a peer that is not trusted: any client may send one.
func clientOf(r *http.Request, trusted []netip.Prefix) netip.Addr {
	addr := peerAddr(r.RemoteAddr)
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop := peerAddr(strings.TrimSpace(hops[i]))
			if !hop.IsValid() {
				break // a hop we cannot read: the last one we could is the client
			}
			addr = hop
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	return addr
}

// peerAddr is the IP address of a RemoteAddr or an X-Forwarded-For hop
// ("192.0.2.1:5678", "[2001:db8::1]:80", "192.0.2.1"), the invalid zero
// address when it has none (a unix socket's, "unknown").
func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, _ := netip.ParseAddr(host)
	return addr.Unmap()
}

// ProxyPrefix is p as Config.TrustedProxies compares it: masked, and a
// range of IPv4 addresses written in IPv6 (::ffff:10.0.0.0/104) written in
// IPv4 (10.0.0.0/8), as the addresses compared with it are (see peerAddr):
// else it would match none.
func ProxyPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// proxyPrefixes is ProxyPrefix of each of prefixes.
func proxyPrefixes(prefixes []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		out[i] = ProxyPrefix(p)
	}
	return out
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
