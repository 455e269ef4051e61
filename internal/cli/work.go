package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// workFlags are what `sked work` runs with.
type workFlags struct {
	token, workerID string
	servers, types  []string
	concurrency     int
	lease, grace    time.Duration
	serverWait      time.Duration
	execEnv         []string
	log             logFlags
}

func workCmd(env Env) *cobra.Command {
	var f workFlags
	cmd := &cobra.Command{
		Use:   "work --server URL[,URL2…] --type T [--type T2] [flags] -- CMD ARGS…",
		Short: "A worker on any machine: claims jobs of the types from a server and runs CMD per job",
		Long: "sked work claims jobs of the given types from a sked server and runs CMD for each, with the payload on stdin\n" +
			"and SKED_* in the environment. SIGTERM stops claiming, lets running commands finish within --grace and hands\n" +
			"the rest back. Given several servers (nodes on one PostgreSQL database), it talks to one at a time and moves to\n" +
			"the next when one cannot be reached or answers 503. It retries unreachable servers with growing, jittered waits\n" +
			"(1s to 30s) and stops at once when a server refuses its token. A host of --server that does not resolve before\n" +
			"any server answered (a mistyped name, or a server not started yet) is tried for --server-wait, then it stops\n" +
			"(exit 3); once one answered, a name that does not resolve is retried as long as it lasts.",
		Example: "  sked work --server http://sked.lan:8080 --type thumbnail -- ./make-thumbnail\n" +
			"  sked work --server http://sked1.lan:8080,http://sked2.lan:8080 --type thumbnail -- ./make-thumbnail",
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 0 {
				return usagef("unexpected argument %q: the command goes after --", args[0])
			}
			if err := f.check(args); err != nil {
				return err
			}
			log, err := f.log.logger(env.Stderr)
			if err != nil {
				return err
			}
			return f.run(cmd.Context(), args, log)
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false) // the command's own flags are its own
	hostname, _ := os.Hostname()
	fs.StringSliceVar(&f.servers, "server", []string{DefaultServer}, "URL of the sked server; several nodes of one database, comma-separated or repeated, are used in turn")
	fs.StringVar(&f.token, "token", "", "bearer token for the server's API")
	fs.StringVar(&f.workerID, "worker-id", worker.ProcessID(hostname), "name of this worker in leases and runs; each process's own (two workers with one id could both run a job a lost claim leased)")
	fs.StringSliceVar(&f.types, "type", nil, "job type to claim; several comma-separated or repeated")
	fs.IntVar(&f.concurrency, "concurrency", 1, "jobs run at once")
	fs.DurationVar(&f.lease, "lease", db.DefaultLease, "lease of a claimed job, renewed every third of it")
	fs.DurationVar(&f.grace, "grace", worker.DefaultGrace, "how long SIGTERM waits for running jobs before stopping them")
	fs.DurationVar(&f.serverWait, "server-wait", defaultServerWait, "how long a --server host that does not resolve is tried before any server answered; then sked work stops (0: at once)")
	withEnv(fs, "server", "token", "worker-id", "type", "concurrency", "lease", "grace", "server-wait")
	splitEnv(fs, "type", ",")
	splitEnv(fs, "server", ",")
	execEnvFlag(fs, &f.execEnv)
	f.log.register(fs)
	fs.SortFlags = false
	return cmd
}

// check checks the flags and the command.
func (f *workFlags) check(command []string) error {
	var errs []error
	if len(f.types) == 0 {
		errs = append(errs, usagef("--type is required: the job type this worker runs"))
	}
	for _, t := range f.types {
		if server.BuiltinType(t) {
			errs = append(errs, usagef("--type %s: sked serve runs %s jobs itself, and no worker may claim them; "+
				"give your jobs a type of their own, such as --type thumbnail", t, t))
		}
	}
	if len(command) == 0 || command[0] == "" {
		errs = append(errs, usagef("no command: give it after --, e.g. sked work --type thumbnail -- ./make-thumbnail"))
	} else if _, err := exec.LookPath(command[0]); err != nil {
		// Every job it claimed would fail at once, without retry.
		errs = append(errs, usagef("command %q cannot be run (%v): give the path of an executable, or a program in PATH", command[0], err))
	}
	f.servers = tidyServers(f.servers)
	if len(f.servers) == 0 {
		errs = append(errs, usagef("--server is empty: give the URL of a sked server, such as %s", DefaultServer))
	}
	for _, s := range f.servers {
		if err := checkServer(s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := worker.CheckExecEnv("--exec-env", f.execEnv); err != nil {
		errs = append(errs, usagef("%v", err))
	}
	if f.concurrency < 1 {
		errs = append(errs, usagef("--concurrency %d: must be at least 1", f.concurrency))
	}
	if f.lease < wire.MinLease || f.lease > wire.MaxLease {
		errs = append(errs, usagef("--lease %s: must be from %s to %s", f.lease, wire.MinLease, wire.MaxLease))
	}
	if err := checkGrace(f.grace); err != nil {
		errs = append(errs, err)
	}
	if f.serverWait < 0 {
		errs = append(errs, usagef("--server-wait %s: must not be negative; give how long to try a host that does not resolve, "+
			"such as 1m, or 0 to stop at once", f.serverWait))
	}
	return errors.Join(errs...)
}

// inTheClear are those of servers (URLs) that are reached by plain http://
// on another machine than this one.
func inTheClear(servers []string) []string {
	var out []string
	for _, s := range servers {
		if u, err := url.Parse(s); err == nil && u.Scheme == "http" && !server.LoopbackHost(u.Hostname()) {
			out = append(out, s)
		}
	}
	return out
}

// tokenInTheClear is the warning of a client of servers (URLs) that sends
// token by plain http:// across the network to any of them (inTheClear),
// naming those; "" when there is no token or no such server. sked work
// logs it at start; the other client commands print it on stderr.
func tokenInTheClear(token string, servers []string) string {
	clear := inTheClear(servers)
	if strings.TrimSpace(token) == "" || len(clear) == 0 {
		return ""
	}
	return fmt.Sprintf("the token is sent in the clear (http://) across the network to %s, where any machine on the way can read it: "+
		"give the https:// address of a TLS proxy in front of sked serve", strings.Join(clear, ", "))
}

// tidyServers is the --server list without spaces around a URL, empty
// entries ("a,") or repeats, in order.
func tidyServers(servers []string) []string {
	var out []string
	for _, s := range servers {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// run runs a remote worker until ctx is done: a worker.Pool over the
// server's worker protocol whose handler runs command per job, as the exec
// kind does. On ctx's end it stops claiming, lets running commands finish
// within the grace period, stops the rest (SIGTERM) and hands their jobs
// back. It ends with an error when the server refuses the token.
func (f *workFlags) run(ctx context.Context, command []string, log *slog.Logger) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	c := &skedapi.Client{BaseURL: f.servers[0], Fallbacks: f.servers[1:], Token: f.token, Logger: log}
	store := &patientStore{Client: c, log: log, servers: f.servers, hostWait: f.serverWait, stop: stop}
	cmd := worker.ExecPayload{Command: command}
	execCfg := worker.ExecConfig{Env: f.execEnv}
	run := func(ctx context.Context, job *worker.Job) error { return worker.RunCommand(ctx, job, cmd, execCfg) }
	handlers := make(map[string]worker.HandlerFunc, len(f.types))
	for _, t := range f.types {
		handlers[t] = run
	}
	pool := worker.NewPool(worker.PoolConfig{
		Store: store, Handlers: handlers, WorkerID: f.workerID, Slots: f.concurrency,
		Lease: f.lease, Grace: f.grace, NextDueFunc: c.NextDue, Logger: log,
		// The server's claims take due jobs only, and this machine's clock
		// may not agree with the server's: a claimed job starts at once.
		ClaimAhead: -1,
	})
	log.Info("sked working", "server", strings.Join(f.servers, ","), "types", strings.Join(pool.Types(), ","),
		"concurrency", f.concurrency, "worker_id", f.workerID, "version", buildinfo.Read().Version)
	if warning := tokenInTheClear(f.token, f.servers); warning != "" {
		log.Warn(warning)
	}
	err := pool.Run(ctx)
	log.Info("stopped")
	if cause := context.Cause(ctx); errors.Is(cause, errRefused) || errors.Is(cause, errNoHost) {
		return cause
	}
	return err
}

// errRefused is the cause sked work stops with when the server refuses its
// token, its Host or its claims as such; errNoHost when the host of a
// --server does not resolve before any server answered.
var (
	errRefused = errors.New("the server refused this worker")
	errNoHost  = errors.New("the server's host does not resolve")
)

// refusedForGood reports whether a claim answered status would be refused
// the same way however often it were sent: a 4xx says the request itself
// is wrong (a type that is no job type, a lease out of bounds, a bad
// token), except a timeout (408) and too many requests (429).
func refusedForGood(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// defaultServerWait is --server-wait: long enough for a server started
// with its workers (containers of one compose file) to get its name.
const defaultServerWait = time.Minute

// Waits between failed claims: growing from claimRetryMin, doubled per
// failure, to claimRetryMax, with jitter.
const (
	claimRetryMin = time.Second
	claimRetryMax = 30 * time.Second
)

// patientStore is the API client of sked work as the pool's store. A claim
// that fails is tried again after a wait, longer the more claims failed in a
// row and no shorter than the server's Retry-After, with jitter so that the
// workers of a restarted server do not all come back at once; a claim the
// server refuses (401, 403) stops the worker, as does a host of servers
// that does not resolve for hostWait before any server answered (a
// mistyped --server): once one answered, that is a passing fault of the
// network, tried again.
type patientStore struct {
	*skedapi.Client
	log     *slog.Logger
	servers []string // the --server URLs
	// hostWait is how long a host that does not resolve is tried before
	// any server answered (--server-wait).
	hostWait time.Duration
	stop     context.CancelCauseFunc // stops the worker, with its cause
	// answered is set once a server answered a claim.
	answered atomic.Bool
	// unrecorded is set when the worker stops without having been
	// recorded (refused, or no server found): it does not say it stopped.
	unrecorded atomic.Bool
}

// WorkerStopped tells the server this worker stopped, unless it was never
// recorded.
func (s *patientStore) WorkerStopped(ctx context.Context, id string) error {
	if s.unrecorded.Load() {
		return nil
	}
	return s.Client.WorkerStopped(ctx, id)
}

// RunClaimWaited claims, trying again after failures (see patientStore)
// until a claim succeeds or ctx ends. The time spent on failed claims
// counts as waited: the leases of the claims began no sooner.
func (s *patientStore) RunClaimWaited(ctx context.Context, p db.RunClaimParams) ([]db.Claim, time.Duration, error) {
	start := time.Now()
	for failures := 0; ; {
		sent := time.Now()
		claims, waited, err := s.Client.RunClaimWaited(ctx, p)
		if err == nil || errors.As(err, new(*skedapi.Error)) {
			s.answered.Store(true)
		}
		if err == nil {
			if failures > 0 {
				s.log.Info("claims work again", "failures", failures)
			}
			return claims, sent.Sub(start) + waited, nil
		}
		if ctx.Err() != nil {
			return nil, 0, err
		}
		if ae := (*skedapi.Error)(nil); errors.As(err, &ae) && refusedForGood(ae.Status) {
			fix := "mend the flags the answer names (--type, --lease, --worker-id)"
			route, root := routeInServer(s.Server())
			switch {
			case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
				fix = "check --token (SKED_TOKEN) and --server; a worker token from the server's --worker-token goes in this machine's SKED_TOKEN"
			case route != "" && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed):
				fix = fmt.Sprintf("--server (SKED_SERVER) ends with the API's path %s, which sked adds itself: give %s", route, root)
			}
			s.unrecorded.Store(true)
			s.stop(fmt.Errorf("%w: %s answered %w; %s", errRefused, s.Server(), ae, fix))
			return nil, 0, err
		}
		if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) && dnsErr.IsNotFound && !s.answered.Load() {
			notFound := hostNotFound(serverOf(s.servers, dnsErr.Name), dnsErr)
			if left := s.hostWait - time.Since(start); left > 0 {
				s.log.Warn(notFound, "stops_in", left.Round(time.Second))
			} else {
				s.unrecorded.Store(true)
				s.stop(withExit(ExitUnreachable, fmt.Errorf("%w: %w", errNoHost, err), "%s", notFound))
				return nil, 0, err
			}
		}
		failures++
		var after time.Duration
		if ae := (*skedapi.Error)(nil); errors.As(err, &ae) {
			after = ae.RetryAfter
		}
		wait := retryWait(failures, after, rand.Float64)
		s.log.Warn("claim failed; retrying", "err", err, "failures", failures, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, 0, err
		}
	}
}

// serverOf is the one of servers (URLs) whose host is host, or all of them
// when none is.
func serverOf(servers []string, host string) string {
	for _, s := range servers {
		if u, err := url.Parse(s); err == nil && u.Hostname() == host {
			return s
		}
	}
	return strings.Join(servers, ",")
}

// retryWait is the wait after the n-th failure in a row. A server that
// said when to come back (after, its Retry-After: 5 s while its database
// is out of reach) is heeded, as the client heeds it (it holds the next
// claim back until then): after plus a random quarter of it, so that the
// workers it refused together do not come back together; the worker's own
// backoff, a guess for when the server said nothing, would keep it away
// long after the server is back. Else it is
// claimRetryMin doubled per failure up to claimRetryMax, of which a random
// half (rnd returns [0,1)) is taken off.
func retryWait(n int, after time.Duration, rnd func() float64) time.Duration {
	if after > 0 {
		return after + time.Duration(rnd()*float64(after/4))
	}
	d := claimRetryMax
	if n < 16 {
		d = min(claimRetryMin<<(n-1), claimRetryMax)
	}
	return d/2 + time.Duration(rnd()*float64(d/2))
}
