package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/internal/syncbuf"
)

// TestWorkCheck_Command: sked work refuses a command it cannot run before it
// claims anything, since every job it claimed would fail without retry.
func TestWorkCheck_Command(t *testing.T) {
	f := workFlags{types: []string{"t"}, servers: []string{DefaultServer}, concurrency: 1, lease: 30 * time.Second, grace: 30 * time.Second}
	if err := f.check([]string{"sh", "-c", "true"}); err != nil {
		t.Fatalf("check(sh) = %v, want nil", err)
	}
	for _, command := range []string{"./sked-no-such-script", "sked-no-such-program-xyz"} {
		err := f.check([]string{command})
		if ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `command "`+command+`" cannot be run`) {
			t.Errorf("check(%s) = %v (exit %d), want a usage error naming the command", command, err, ExitCode(err))
		}
	}
}

// TestWorkCheck_BuiltinType: sked work refuses to claim a type sked serve
// runs itself (the server would refuse each claim), naming the type.
func TestWorkCheck_BuiltinType(t *testing.T) {
	for _, typ := range []string{"exec", "http", "email"} {
		f := workFlags{types: []string{"thumbnail", typ}, servers: []string{DefaultServer}, concurrency: 1, lease: 30 * time.Second, grace: 30 * time.Second}
		err := f.check([]string{"sh", "-c", "true"})
		if ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "--type "+typ+": sked serve runs "+typ+" jobs itself") {
			t.Errorf("check with --type %s = %v (exit %d), want a usage error naming the type", typ, err, ExitCode(err))
		}
	}
}

// TestWorkCheck_ServerWait: a negative --server-wait (or SKED_SERVER_WAIT)
// is a usage error saying what to give; 0, to stop at once, is not.
func TestWorkCheck_ServerWait(t *testing.T) {
	f := workFlags{types: []string{"t"}, servers: []string{DefaultServer}, concurrency: 1, lease: 30 * time.Second, grace: 30 * time.Second}
	if err := f.check([]string{"true"}); err != nil {
		t.Fatalf("check with --server-wait 0 = %v, want nil", err)
	}
	f.serverWait = -time.Second
	err := f.check([]string{"true"})
	if ExitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "--server-wait -1s: must not be negative") ||
		!strings.Contains(fmt.Sprint(err), "or 0 to stop at once") {
		t.Errorf("check with --server-wait -1s = %v (exit %d), want a usage error saying what to give", err, ExitCode(err))
	}
}

// TestRetryWait: the wait after n failed claims in a row doubles from 1s
// to 30s, and a random half of it is taken off; when the server sent
// Retry-After, the wait is that and a random quarter of it,
// whatever the failures before: the server says when it can answer (5s
// while its database is out of reach), and a backoff grown during an
// outage kept workers away 13 to 17 s after a 60 s one had ended.
func TestRetryWait(t *testing.T) {
	lowest, highest := func() float64 { return 0 }, func() float64 { return 0.999999 }
	for n, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second,
		6: 30 * time.Second, 7: 30 * time.Second, 64: 30 * time.Second, 1000: 30 * time.Second} {
		if lo, hi := retryWait(n, 0, lowest), retryWait(n, 0, highest); lo != full/2 || hi <= full*99/100 || hi > full {
			t.Errorf("failure %d: waits from %s to %s, want from %s to %s", n, lo, hi, full/2, full)
		}
	}
	for _, tc := range []struct {
		n        int
		after    time.Duration
		lo, hiAt time.Duration // hiAt: the wait is above 99% of it and at most it
	}{
		{1, 5 * time.Second, 5 * time.Second, 6250 * time.Millisecond},
		{5, 5 * time.Second, 5 * time.Second, 6250 * time.Millisecond},  // the backoff would be 8s to 16s
		{64, 5 * time.Second, 5 * time.Second, 6250 * time.Millisecond}, // and 15s to 30s
		{1, 40 * time.Second, 40 * time.Second, 50 * time.Second},
	} {
		if lo, hi := retryWait(tc.n, tc.after, lowest), retryWait(tc.n, tc.after, highest); lo != tc.lo || hi <= tc.hiAt*99/100 || hi > tc.hiAt {
			t.Errorf("failure %d, Retry-After %s: waits from %s to %s, want from %s to %s", tc.n, tc.after, lo, hi, tc.lo, tc.hiAt)
		}
	}
}

// TestWorkFlags_Lists: --server takes one URL, as it always did, or
// several, comma-separated or repeated, and so does SKED_SERVER; --type
// and SKED_TYPE take types the same way.
func TestWorkFlags_Lists(t *testing.T) {
	const a, b, c = "http://a:8080", "http://b:8080", "http://c:8080"
	for _, tc := range []struct {
		flag string
		args []string
		env  string
		want []string
	}{
		{"server", nil, "", []string{DefaultServer}},
		{"server", []string{"--server", a}, "", []string{a}},
		{"server", []string{"--server", a + "," + b}, "", []string{a, b}},
		{"server", []string{"--server", a, "--server", b + "," + c}, "", []string{a, b, c}},
		{"server", nil, a + "," + b, []string{a, b}},
		{"server", []string{"--server", c}, a + "," + b, []string{c}},
		{"type", []string{"--type", "x,y"}, "", []string{"x", "y"}},
		{"type", []string{"--type", "x", "--type", "y,z"}, "", []string{"x", "y", "z"}},
		{"type", nil, "x,y", []string{"x", "y"}},
	} {
		env := "SKED_" + strings.ToUpper(tc.flag)
		e := Env{Getenv: func(k string) string { return map[string]string{env: tc.env}[k] }, Stdout: io.Discard, Stderr: io.Discard}
		root, cmd := bareRoot(e), workCmd(e)
		cmd.RunE = func(*cobra.Command, []string) error { return nil }
		root.AddCommand(cmd)
		args := tc.args
		if tc.flag != "type" {
			args = append(args, "--type", "t")
		}
		err := execute(context.Background(), root, append(append([]string{"work"}, args...), "--", "true"))
		if got := cmd.Flag(tc.flag).Value.(pflag.SliceValue).GetSlice(); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q with %s=%q: got %q, %v; want %q", tc.args, env, tc.env, got, err, tc.want)
		}
	}
}

// TestTidyServers: spaces around a URL, empty entries and repeats of the
// --server list are dropped, so that "a, b," is the two servers a and b.
func TestTidyServers(t *testing.T) {
	const a, b = "http://a:8080", "http://b:8080"
	if got := tidyServers([]string{a, " " + b, a, "", " "}); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("tidyServers = %q, want %q", got, []string{a, b})
	}
}

// TestInTheClear: sked's clients warn of the servers their token reaches by
// plain http:// across the network; loopback and https:// are not.
func TestInTheClear(t *testing.T) {
	servers := []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "https://sked.example.com",
		"http://sked.lan:8080", "http://192.0.2.1", "HTTP://[2001:db8::1]:8080"}
	want := []string{"http://sked.lan:8080", "http://192.0.2.1", "HTTP://[2001:db8::1]:8080"}
	if got := inTheClear(servers); !slices.Equal(got, want) {
		t.Errorf("inTheClear = %q, want %q", got, want)
	}
}

// TestTokenInTheClear: every client command, as sked work, warns once on
// stderr when it sends its token by plain http:// to another machine, and
// not to loopback, by https:// or without a token.
func TestTokenInTheClear(t *testing.T) {
	const warning = "warning: the token is sent in the clear (http://) across the network to http://192.0.2.1:8080"
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"ls", "--server", "http://192.0.2.1:8080", "--token", "t"}, true},
		{[]string{"apply", "-f", "-", "--server", "http://192.0.2.1:8080", "--token", "t"}, true},
		{[]string{"workers", "--server", "http://192.0.2.1:8080", "--token", "t"}, true},
		{[]string{"show", "nightly", "--server", "http://192.0.2.1:8080", "--token", "t"}, true},
		{[]string{"ls", "--server", "http://192.0.2.1:8080"}, false},
		{[]string{"ls", "--server", "https://192.0.2.1:8080", "--token", "t"}, false},
		{[]string{"ls", "--server", "http://127.0.0.1:8080", "--token", "t"}, false},
	} {
		// A request timeout of 1ns fails each request at once: the
		// warning comes before any.
		_, _, stderr := mainOf(append(tc.args, "--request-timeout", "1ns")...)
		want := 0
		if tc.warn {
			want = 1
		}
		if n := strings.Count(stderr, warning); n != want {
			t.Errorf("sked %q: the warning %d times in %q; want it %d times", tc.args, n, stderr, want)
		}
	}
}

// dnsFailsAfter passes its first ok requests on to the network, then fails
// each as a lookup that found no such host: a name that stopped resolving.
type dnsFailsAfter struct {
	ok, sent atomic.Int32
}

func (d *dnsFailsAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	if d.sent.Add(1) <= d.ok.Load() {
		return http.DefaultTransport.RoundTrip(r)
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: r.URL.Hostname(), IsNotFound: true}}
}

// TestPatientStore_HostNotFound: a claim whose server's host does not
// resolve stops sked work, saying what to check, while no server has
// answered (a mistyped --server); once one has, it is a passing fault (a
// DNS record being replaced) and is tried again, as any unreachable
// server is.
func TestPatientStore_HostNotFound(t *testing.T) {
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: sqlitetest.Open(t)}))
	t.Cleanup(srv.Close)
	for _, answered := range []int32{0, 1} {
		dns := &dnsFailsAfter{}
		dns.ok.Store(answered)
		var logs syncbuf.Buffer
		ctx, stop := context.WithCancelCause(context.Background())
		s := &patientStore{
			Client: &skedapi.Client{BaseURL: srv.URL, HTTP: &http.Client{Transport: dns}, ClaimWait: time.Millisecond},
			log:    slog.New(slog.NewTextHandler(&logs, nil)), servers: []string{srv.URL}, stop: stop,
		}
		claim := func() error {
			_, _, err := s.RunClaimWaited(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"t"}, Max: 1})
			return err
		}
		if answered == 0 {
			s.hostWait = time.Hour
			done := make(chan error, 1)
			go func() { done <- claim() }()
			waitUntil(t, "a warning that the host does not resolve", func() bool {
				return strings.Contains(logs.String(), `cannot find the host 127.0.0.1`) && strings.Contains(logs.String(), "stops_in=")
			})
			if cause := context.Cause(ctx); cause != nil {
				t.Errorf("a claim whose host does not resolve, within --server-wait, stopped the worker with %v; want it tried again", cause)
			}
			stop(nil)
			<-done
			ctx, stop = context.WithCancelCause(context.Background())
			s.stop, s.hostWait = stop, 0
			claim()
			cause := context.Cause(ctx)
			want := "cannot find the host 127.0.0.1 of " + srv.URL + ": no such host; check the host name in --server (SKED_SERVER), and this machine's DNS"
			if cause == nil || cause.Error() != want || ExitCode(cause) != ExitUnreachable || !s.unrecorded.Load() {
				t.Errorf("a claim whose host does not resolve, before any answer, stopped the worker with %v (exit %d); want %q (exit %d)",
					cause, ExitCode(cause), want, ExitUnreachable)
			}
			continue
		}
		if err := claim(); err != nil {
			t.Fatalf("first claim: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- claim() }()
		waitUntil(t, "the claim to be tried again", func() bool { return strings.Contains(logs.String(), `msg="claim failed; retrying"`) })
		stop(nil)
		<-done
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) || s.unrecorded.Load() {
			t.Errorf("a claim whose host does not resolve, after the server answered, stopped the worker with %v; want it tried again", cause)
		}
	}
}

// TestPatientStore_APIPathInServer: a worker whose --server ends with a
// path of the API (http://HOST:8080/jobs) is refused (405) and stops,
// saying to give the server's address without it, not to mend --type,
// --lease or --worker-id.
func TestPatientStore_APIPathInServer(t *testing.T) {
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: sqlitetest.Open(t)}))
	t.Cleanup(srv.Close)
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	s := &patientStore{
		Client: &skedapi.Client{BaseURL: srv.URL + "/jobs", ClaimWait: time.Millisecond},
		log:    slog.New(slog.DiscardHandler), servers: []string{srv.URL + "/jobs"}, stop: stop,
	}
	s.RunClaimWaited(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"t"}, Max: 1})
	cause := context.Cause(ctx)
	want := "--server (SKED_SERVER) ends with the API's path /jobs, which sked adds itself: give " + srv.URL
	if !errors.Is(cause, errRefused) || !strings.Contains(cause.Error(), want) || strings.Contains(cause.Error(), "--worker-id") {
		t.Errorf("a worker whose --server ends with /jobs stopped with %v; want it refused, saying %q", cause, want)
	}
}

// TestWorkFlags_WorkerIDOwn: each sked work's default --worker-id is its
// own, though two processes share the host's name and pid (containers on
// one host's network both run as pid 1): HOST/PID and a random part. With
// one id, a job a lost claim leased to either would be run by both.
func TestWorkFlags_WorkerIDOwn(t *testing.T) {
	host, _ := os.Hostname()
	e := Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard}
	first, second := workCmd(e).Flag("worker-id").DefValue, workCmd(e).Flag("worker-id").DefValue
	prefix := host + "/" + strconv.Itoa(os.Getpid()) + "-"
	if first == second || !strings.HasPrefix(first, prefix) || !strings.HasPrefix(second, prefix) {
		t.Errorf("default worker ids %q and %q; want two different ids beginning %q", first, second, prefix)
	}
}
