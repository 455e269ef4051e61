package handlers

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sked-dev/sked/internal/syncbuf"
)

// from sends a GET path to e's API as if from the address remote, with
// the extra headers given as name, value pairs.
func (e *testEnv) from(remote, path string, headers ...string) response {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.api.ServeHTTP(rec, req)
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: rec.Code, header: rec.Header(), body: b}
}

// stopAuthClock stops the clock of e's limit on wrong tokens, so that no
// budget grows back while a test runs, and returns a function that moves it.
func stopAuthClock(e *testEnv) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.api.h.authLimit.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	return func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
}

// TestAuth_WrongTokensLimited: an address that sent authFailBurst wrong
// tokens is answered 429 with Retry-After, whatever its token, until its
// budget grows back; another address is not touched, and right tokens
// spend nothing.
func TestAuth_WrongTokensLimited(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"right", "other"}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	advance := stopAuthClock(e)
	const guesser, operator = "192.0.2.1:40000", "192.0.2.2:40000"

	// Right tokens spend nothing, however many.
	for range 3 * authFailBurst {
		e.from(guesser, "/jobs", "Authorization", "Bearer right").wantStatus(t, http.StatusOK)
	}
	for i := range authFailBurst {
		e.from(guesser, "/jobs", "Authorization", "Bearer guess"+strconv.Itoa(i)).wantProblem(t, http.StatusUnauthorized, "not one this server accepts")
	}
	// Past its budget, the address is refused whatever its token, but for
	// one right from it before: another right token would tell a guesser
	// it is right.
	for _, token := range []string{"guess", "other"} {
		res := e.from(guesser, "/jobs", "Authorization", "Bearer "+token)
		res.wantProblem(t, http.StatusTooManyRequests, "too many requests with a wrong bearer token came from this address")
		if got, want := res.header.Get("Retry-After"), strconv.Itoa(int(authFailEvery/time.Second)); got != want {
			t.Errorf("Retry-After %q, want %q", got, want)
		}
		if res.header.Get(roleHeader) != "" {
			t.Errorf("a refused request was told its role %q", res.header.Get(roleHeader))
		}
	}
	// A token right from the address before it ran out goes on: the
	// worker or dashboard that used it is not shut out by a client at the
	// same address (a worker left with a revoked token, a guesser behind
	// the same NAT), and its answer tells a guesser nothing new.
	e.from(guesser, "/jobs", "Authorization", "Bearer right").wantStatus(t, http.StatusOK)
	// /readyz tells a failure's cause only to a right token: it does not
	// judge new tokens for a limited address either.
	if e.api.h.mayUseAPI(readyzFrom(guesser, "Bearer other")) {
		t.Error("mayUseAPI judged a token for an address past its budget")
	}
	if !e.api.h.mayUseAPI(readyzFrom(guesser, "Bearer right")) {
		t.Error("mayUseAPI refused a token right from the address before")
	}
	// A request without a bearer token guesses nothing: answered as ever.
	e.from(guesser, "/jobs").wantProblem(t, http.StatusUnauthorized, "requires a bearer token")
	// The operator, at another address, goes on; so do the health probes.
	e.from(operator, "/jobs", "Authorization", "Bearer right").wantStatus(t, http.StatusOK)
	e.from(operator, "/jobs", "Authorization", "Bearer typo").wantProblem(t, http.StatusUnauthorized, "not one this server accepts")
	e.from(guesser, "/healthz").wantStatus(t, http.StatusOK)

	// One guess more after authFailEvery.
	advance(authFailEvery)
	e.from(guesser, "/jobs", "Authorization", "Bearer right").wantStatus(t, http.StatusOK)
	e.from(guesser, "/jobs", "Authorization", "Bearer guess").wantProblem(t, http.StatusUnauthorized, "not one this server accepts")
	e.from(guesser, "/jobs", "Authorization", "Bearer other").wantStatus(t, http.StatusTooManyRequests)

	// The 429s are logged, a line a minute at most, naming the address.
	if n := strings.Count(logs.String(), "requests refused (429) from addresses that sent too many wrong tokens"); n != 1 ||
		!strings.Contains(logs.String(), "last_from=192.0.2.1") {
		t.Errorf("%d lines of 429s, want one naming 192.0.2.1:\n%s", n, logs.String())
	}
	// /metrics counts them: wrong tokens, and the requests refused.
	if failed, refused := e.api.AuthFailures(); failed != authFailBurst+2 || refused != 4 {
		t.Errorf("AuthFailures = %d failed, %d refused; want %d, 4", failed, refused, authFailBurst+2)
	}
}

// readyzFrom is a GET /readyz from remote with the Authorization auth.
func readyzFrom(remote, auth string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	req.RemoteAddr = remote
	req.Header.Set("Authorization", auth)
	return req
}

// TestAuth_WrongTokensAtOnce: wrong tokens sent all at once from one
// address are judged no more than its budget allows.
func TestAuth_WrongTokensAtOnce(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) { c.Tokens = []string{"right"} })
	stopAuthClock(e)
	const n = 5 * authFailBurst
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/jobs", nil)
			req.RemoteAddr = "198.51.100.1:1"
			req.Header.Set("Authorization", "Bearer guess"+strconv.Itoa(i))
			rec := httptest.NewRecorder()
			e.api.ServeHTTP(rec, req)
			statuses <- rec.Code
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusUnauthorized] != authFailBurst || count[http.StatusTooManyRequests] != n-authFailBurst {
		t.Errorf("statuses %v, want %d 401 and the rest 429", count, authFailBurst)
	}
}

// TestAuth_TrustedProxies: behind a trusted proxy the client's address is
// the one X-Forwarded-For names; from any other peer the header is ignored,
// so that a guesser cannot claim a new address with each request.
func TestAuth_TrustedProxies(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"right"}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	stopAuthClock(e)
	const proxy = "10.1.2.3:5000"
	for i := range authFailBurst {
		e.from(proxy, "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113.9").wantStatus(t, http.StatusUnauthorized)
		// A peer that is not a proxy names another address each time.
		e.from("192.0.2.7:1", "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113."+strconv.Itoa(100+i)).
			wantStatus(t, http.StatusUnauthorized)
	}
	e.from(proxy, "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113.9").wantStatus(t, http.StatusTooManyRequests)
	e.from("192.0.2.7:1", "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113.1").wantStatus(t, http.StatusTooManyRequests)
	// Another client through the same proxy is not touched.
	e.from(proxy, "/jobs", "Authorization", "Bearer right", "X-Forwarded-For", "203.0.113.10").wantStatus(t, http.StatusOK)
}

// TestAuth_NoAddress: requests without an IP address (a unix socket's,
// or an embedding program's without RemoteAddr) share one budget of wrong
// tokens, as the clients behind one proxy do: the peer of a unix socket
// is often a proxy for the network. Their X-Forwarded-For is not read,
// whatever the trusted proxies, and addresses are not touched.
func TestAuth_NoAddress(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"right"}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	})
	stopAuthClock(e)
	for i := range authFailBurst {
		remote := []string{"", "@"}[i%2]
		e.from(remote, "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113."+strconv.Itoa(i)).wantStatus(t, http.StatusUnauthorized)
	}
	for _, remote := range []string{"", "@", "/run/sked.sock"} {
		e.from(remote, "/jobs", "Authorization", "Bearer guess", "X-Forwarded-For", "203.0.113.200").wantStatus(t, http.StatusTooManyRequests)
	}
	e.from("192.0.2.1:1", "/jobs", "Authorization", "Bearer guess").wantStatus(t, http.StatusUnauthorized)
}

func TestClientOf(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, c := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:80", nil, "192.0.2.1"},
		{"192.0.2.1:80", []string{"198.51.100.1"}, "192.0.2.1"},                      // not a proxy: ignored
		{"[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2:3:4:5:6"},                   // IPv6
		{"[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},                                  // IPv4 in IPv6
		{"10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},                    // through a proxy
		{"10.0.0.1:80", []string{"6.6.6.6, 198.51.100.1, 10.0.0.2"}, "198.51.100.1"}, // the last not a proxy; the first is the client's to say
		{"10.0.0.1:80", []string{"6.6.6.6", "198.51.100.1"}, "198.51.100.1"},         // several headers are one list
		{"10.0.0.1:80", []string{"nonsense, 10.0.0.2"}, "10.0.0.2"},                  // an unreadable hop ends the walk
		{"10.0.0.1:80", nil, "10.0.0.1"},                                             // a proxy's own request
		{"[fd00::1]:80", []string{"2001:db8::1"}, "2001:db8::1"},
		{"10.0.0.1:80", []string{"198.51.100.1:4711"}, "198.51.100.1"}, // a hop with its port
		{"10.0.0.1:80", []string{"[2001:db8::1]:80"}, "2001:db8::1"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = c.remote
		for _, v := range c.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		if got := clientOf(req, trusted).String(); got != c.want {
			t.Errorf("clientOf(%s, X-Forwarded-For %q) = %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

// TestAuthLimiter_IPv6: an IPv6 address has its own budget, and its /64
// (a network segment, where a machine can take any address) one of
// authFailNetShare addresses: a neighbour of a guessing address goes on,
// and a guesser that takes a new address for each guess gets that many
// addresses' worth.
func TestAuthLimiter_IPv6(t *testing.T) {
	t.Parallel()
	l := newAuthLimiter(authFailBurst, authFailEvery)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	try := func(addr netip.Addr, wrong bool) error {
		done, err := l.admit(addr, tokenDigest{}, now)
		if err == nil {
			done(wrong)
		}
		return err
	}
	guesser, neighbour := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	var judged int
	for try(guesser, true) == nil {
		judged++
	}
	if judged != authFailBurst {
		t.Errorf("one IPv6 address had %d wrong tokens judged, want %d", judged, authFailBurst)
	}
	if err := try(neighbour, false); err != nil {
		t.Errorf("the right token of a neighbour in the same /64: %v", err)
	}
	for i := 0x100; i < 0x100+2*authFailNetShare*authFailBurst; i++ {
		if try(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}), true) == nil {
			judged++
		}
	}
	if judged != authFailNetShare*authFailBurst {
		t.Errorf("a /64 had %d wrong tokens judged, want %d", judged, authFailNetShare*authFailBurst)
	}
	if err := try(netip.MustParseAddr("2001:db8:0:1::1"), true); err != nil {
		t.Errorf("a guess from another /64: %v", err)
	}
}

// TestAuthLimiter_Bounded: the limiter keeps at most authFailClients
// addresses; past that, new ones share a budget, and an address whose
// budget is whole again is forgotten when room is needed.
func TestAuthLimiter_Bounded(t *testing.T) {
	t.Parallel()
	l := newAuthLimiter(authFailBurst, authFailEvery)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	guess := func(i int, at time.Time) error {
		done, err := l.admit(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), tokenDigest{}, at)
		if err == nil {
			done(true)
		}
		return err
	}
	for i := range authFailClients {
		if err := guess(i, now); err != nil {
			t.Fatalf("address %d: %v", i, err)
		}
	}
	// New addresses share one budget now.
	var refused int
	for i := range 2 * authFailBurst {
		if guess(authFailClients+i, now) != nil {
			refused++
		}
	}
	if len(l.clients) != authFailClients || refused != authFailBurst {
		t.Errorf("kept %d addresses, refused %d new ones; want %d, %d", len(l.clients), refused, authFailClients, authFailBurst)
	}
	// Once the old budgets are whole again, a new address has its own.
	later := now.Add(authFailEvery)
	if err := guess(authFailClients+2*authFailBurst, later); err != nil {
		t.Fatalf("a new address once the old budgets were whole: %v", err)
	}
	if len(l.clients) != 1 {
		t.Errorf("kept %d addresses, want the new one only", len(l.clients))
	}
}

// TestAuthLimiter_KnownBounded: the limiter knows the right tokens of at
// most authFailClients addresses; past that, those not right for
// authKnownFor are forgotten when room is needed.
func TestAuthLimiter_KnownBounded(t *testing.T) {
	t.Parallel()
	l := newAuthLimiter(authFailBurst, authFailEvery)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	right := func(i int, at time.Time) netip.Addr {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		done, err := l.admit(addr, tokenDigest{1}, at)
		if err != nil {
			t.Fatalf("address %d: %v", i, err)
		}
		done(false)
		return addr
	}
	for i := range authFailClients + 10 {
		right(i, now)
	}
	if len(l.known) != authFailClients {
		t.Fatalf("%d addresses known, want %d", len(l.known), authFailClients)
	}
	later := now.Add(authKnownFor)
	addr := right(authFailClients+10, later)
	if len(l.known) != 1 || !l.knows(addr, tokenDigest{1}, later) || l.knows(addr, tokenDigest{2}, later) {
		t.Fatalf("after a day: %d addresses known, want only the new one's token", len(l.known))
	}
}

// TestAuth_TrustedProxiesMapped: a proxy range of IPv4 addresses written
// in IPv6 (::ffff:10.0.0.0/104) trusts those addresses, which requests
// come from unmapped (see ProxyPrefix).
func TestAuth_TrustedProxiesMapped(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, func(c *Config) {
		c.Tokens = []string{"right"}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104"), netip.MustParsePrefix("::ffff:192.0.2.7/128")}
	})
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	if !slices.Equal(e.api.h.trustedProxies, want) {
		t.Fatalf("trusted proxies %v, want %v", e.api.h.trustedProxies, want)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "[::ffff:10.1.2.3]:80"
	req.Header.Set("X-Forwarded-For", "198.51.100.1")
	if got := clientOf(req, e.api.h.trustedProxies); got.String() != "198.51.100.1" {
		t.Errorf("clientOf through a mapped proxy range = %s, want 198.51.100.1", got)
	}
}
