package cli

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// serveFlags are the flags of sked serve. Most are read
// straight into cfg; finish reads the rest into it.
type serveFlags struct {
	cfg server.Config
	log logFlags
	// Read into cfg by finish.
	tokens, allowedHosts, jobDefaults string
	trustedProxies                    string
	workerTokens, readTokens          string
	defaultAttempts                   int
	defaultBackoff                    time.Duration
	retention, claimAhead             time.Duration
	notify                            []string
	testClock                         timeValue
}

func (s *serveFlags) register(fs *pflag.FlagSet) {
	c := &s.cfg
	dbFlag(fs, &c.DB, &c.DBWait)
	fs.StringVar(&c.Addr, "addr", defaultAddr, "HTTP listen address")
	fs.IntVar(&c.Workers, "workers", worker.DefaultSlots, "jobs run at once by this process, besides its notification deliveries")
	fs.IntVar(&c.NotifyWorkers, "notify-workers", server.DefaultNotifyWorkers,
		"notifications and pings delivered at once by this process, in slots of their own that jobs cannot take")
	fs.DurationVar(&c.Lease, "lease", db.DefaultLease, "lease of a claimed job, renewed while it runs")
	fs.DurationVar(&c.Grace, "grace", worker.DefaultGrace, "how long shutdown waits for running jobs")
	fs.DurationVar(&s.claimAhead, "claim-ahead", worker.DefaultClaimAhead,
		"claim jobs this long before they are due and start each when it is due, so that a spike starts on time; 0: claim only due jobs")
	fs.Int64Var(&c.MaxBodyBytes, "max-body", handlers.DefaultMaxBodyBytes, "largest request body in bytes (at least 1)")
	fs.IntVar(&c.MaxClaimWaits, "max-claim-waits", handlers.DefaultMaxClaimWaits,
		"most remote workers' claims (POST /claims) waiting for a job at once; past it a claim that finds no job is answered 503 with Retry-After (at least 1)")
	fs.BoolVar(&c.EnableExec, "enable-exec", false, "run jobs of type exec (commands on this machine)")
	fs.BoolVar(&c.AllowPrivateTargets, "allow-private-targets", false, "let http jobs call loopback, private and link-local addresses")
	fs.StringVar(&c.HTTPSecret, "http-secret", "", "sign http jobs' requests with this HMAC secret")
	fs.Var(&s.testClock, "test-clock",
		"run on a virtual clock that starts at this RFC 3339 time (or now, when given bare) and moves only by POST /test/clock; for testing schedules")
	fs.Lookup("test-clock").NoOptDefVal = "true"
	fs.StringArrayVar(&s.notify, "notify", nil, "send dead jobs, firings that gave up, quiet and recovered schedules and clock steps to a sink: webhook:URL, ntfy:URL/TOPIC, "+
		"gotify:URL?token=T, slack:WEBHOOK_URL, discord:WEBHOOK_URL, or email as smtp://USER:PASSWORD@HOST:587?to=ADDR&from=ADDR "+
		"(STARTTLS; smtps:// or port 465 for implicit TLS; percent-encode @ : / ? # in USER and PASSWORD; repeat to= for more recipients); "+
		"repeat the flag for several")
	fs.StringVar(&c.PublicURL, "public-url", "",
		"the address people open the dashboard at, e.g. https://sked.example.com; every notification links to the job's page there")
	fs.StringVar(&s.tokens, "token", "",
		"require this bearer token on every API request; several, comma-separated, are all accepted")
	fs.StringVar(&s.workerTokens, "worker-token", "",
		"also accept these tokens, comma-separated, for claiming jobs and reporting their runs only: give them to sked work's machines")
	fs.StringVar(&s.readTokens, "read-token", "",
		"also accept these tokens, comma-separated, for reading only (GET: the dashboard, the API's reads, /metrics; and sked apply --dry-run)")
	fs.BoolVar(&s.cfg.Insecure, "insecure", false, "allow listening beyond loopback without a token")
	fs.StringVar(&s.allowedHosts, "allowed-hosts", "",
		"without a token the API answers only the Host names localhost, 127.0.0.1 and [::1]; "+
			"also answer these, comma-separated, e.g. the name a reverse proxy forwards")
	fs.StringVar(&s.trustedProxies, "trusted-proxies", "",
		"addresses or CIDR ranges of the reverse proxies in front of sked, comma-separated: the limit on wrong tokens counts a request from one "+
			"under the client address its X-Forwarded-For names (by default X-Forwarded-For is never read)")
	fs.DurationVar(&s.retention, "retention", worker.DefaultRetention,
		"prune finished one-off jobs and runs of recurring jobs older than this; 0 keeps everything")
	fs.StringVar(&s.jobDefaults, "job-defaults", "",
		"attempts and backoff of jobs that do not set them, by type: TYPE=ATTEMPTS/BACKOFF, comma-separated, * for every other type "+
			"(sked's own: http=25/1m, the others 5/1s)")
	fs.IntVar(&s.defaultAttempts, "default-max-attempts", 0, fmt.Sprintf("maxAttempts (1 to %d) of jobs of every type --job-defaults does not name", db.MaxAttempts))
	fs.DurationVar(&s.defaultBackoff, "default-backoff", 0, "backoff (above zero) of jobs of every type --job-defaults does not name")
	execEnvFlag(fs, &c.ExecEnv)
	s.log.register(fs)
	withEnv(fs, "addr", "workers", "notify-workers", "lease", "grace", "claim-ahead", "max-body", "max-claim-waits", "enable-exec", "allow-private-targets",
		"http-secret", "test-clock", "notify", "public-url", "token", "worker-token", "read-token", "insecure", "allowed-hosts", "trusted-proxies", "retention", "job-defaults",
		"default-max-attempts", "default-backoff")
	splitEnv(fs, "notify", " ")
	fs.SortFlags = false
}

// splitTokens is the comma-separated tokens of list, trimmed, given by
// flag: none for an empty list. A list of blanks (" , ", a templated value
// that came out blank) is refused: taken as no token, it would turn
// authentication off.
func splitTokens(flag, list string) ([]string, error) {
	var out []string
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if list != "" && len(out) == 0 {
		return nil, usagef("--%s %q: it holds no token, only blanks and commas: give each token at least one character, or leave it unset for none",
			flag, list)
	}
	return out, nil
}

// finish checks the flags of fs and reads those that are not cfg's fields
// into it; each error names its flag.
func (s *serveFlags) finish(fs *pflag.FlagSet) error {
	c := &s.cfg
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, usagef(format, args...)) }
	if c.Workers < 1 {
		bad("--workers %d: must be at least 1", c.Workers)
	}
	if c.NotifyWorkers < 1 {
		bad("--notify-workers %d: must be at least 1", c.NotifyWorkers)
	}
	if c.Lease < wire.MinLease || c.Lease > wire.MaxLease {
		bad("--lease %s: must be from %s to %s", c.Lease, wire.MinLease, wire.MaxLease)
	}
	if c.MaxBodyBytes < 1 {
		bad("--max-body %d: must be at least 1 (bytes); the default is %d", c.MaxBodyBytes, handlers.DefaultMaxBodyBytes)
	}
	if c.MaxClaimWaits < 1 {
		bad("--max-claim-waits %d: must be at least 1 (claims); the default is %d", c.MaxClaimWaits, handlers.DefaultMaxClaimWaits)
	}
	if err := checkGrace(c.Grace); err != nil {
		errs = append(errs, err)
	}
	if err := server.CheckDB("--db", c.DB); err != nil {
		errs = append(errs, usagef("%v", err))
	}
	if !fs.Changed("claim-ahead") {
		s.claimAhead = min(s.claimAhead, worker.MaxClaimAhead(c.Lease)) // the default fits a short --lease
	}
	if s.claimAhead < 0 || s.claimAhead > worker.MaxClaimAhead(c.Lease) {
		bad("--claim-ahead %s: must be between 0 and a quarter of --lease (%s)", s.claimAhead, worker.MaxClaimAhead(c.Lease))
	}
	if s.retention < 0 {
		bad("--retention %s: give a duration such as 720h, or 0 to keep everything", s.retention)
	}
	c.Retention, c.ClaimAhead = offWhenZero(s.retention), offWhenZero(s.claimAhead)
	c.TestClock = time.Time(s.testClock.rfc3339Value)
	if !c.TestClock.IsZero() && postgres.IsURL(c.DB) {
		bad("--test-clock needs a SQLite --db: PostgreSQL keeps time with its own now(), which a test clock cannot move")
	}
	for _, err := range []error{server.CheckPublicURL("--public-url", c.PublicURL), worker.CheckExecEnv("--exec-env", c.ExecEnv)} {
		if err != nil {
			bad("%v", err)
		}
	}
	for _, v := range s.notify {
		sink, err := notify.ParseSink(v)
		if err != nil {
			bad("--notify: %v", err)
			continue
		}
		c.NotifySinks = append(c.NotifySinks, sink)
	}
	var err error
	for _, t := range []struct {
		flag, list string
		into       *[]string
	}{{"token", s.tokens, &c.Tokens}, {"worker-token", s.workerTokens, &c.WorkerTokens}, {"read-token", s.readTokens, &c.ReadTokens}} {
		if *t.into, err = splitTokens(t.flag, t.list); err != nil {
			errs = append(errs, err)
		}
	}
	if err := handlers.CheckTokens(handlers.Config{Tokens: c.Tokens, WorkerTokens: c.WorkerTokens, ReadTokens: c.ReadTokens}); err != nil {
		bad("%v", err)
	}
	if c.AllowedHosts, err = parseAllowedHosts(s.allowedHosts); err != nil {
		errs = append(errs, err)
	}
	if c.TrustedProxies, err = parseTrustedProxies(s.trustedProxies); err != nil {
		errs = append(errs, err)
	}
	// Given, the defaults for every other type must be values a job may
	// have; each bad one is refused by its own name.
	// Zero is the flags' "not given", so a zero given is refused here.
	switch {
	case !fs.Changed("default-max-attempts"):
	case s.defaultAttempts < 1:
		bad("--default-max-attempts %d: must be at least 1 (a job gets at least one attempt); leave the flag out for each type's own default", s.defaultAttempts)
	default:
		if err := server.CheckDefaults(db.Defaults{MaxAttempts: s.defaultAttempts}); err != nil {
			bad("--default-max-attempts %d: %v", s.defaultAttempts, err)
		}
	}
	switch {
	case !fs.Changed("default-backoff"):
	case s.defaultBackoff <= 0:
		bad("--default-backoff %s: must be above zero, such as 30s; leave the flag out for each type's own default", s.defaultBackoff)
	default:
		if err := server.CheckDefaults(db.Defaults{Backoff: s.defaultBackoff}); err != nil {
			bad("--default-backoff %s: %v", s.defaultBackoff, err)
		}
	}
	if c.JobDefaults, err = server.ParseJobDefaults(s.jobDefaults); err != nil {
		bad("--job-defaults: %v", err)
	} else if s.defaultAttempts != 0 || s.defaultBackoff != 0 {
		// The two flags are the defaults of every type not listed, in
		// place of a "*" entry of --job-defaults.
		c.JobDefaults[server.AnyType] = db.Defaults{MaxAttempts: s.defaultAttempts, Backoff: s.defaultBackoff}
	}
	return errors.Join(errs...)
}

// checkGrace refuses a --grace that is not above zero: 0, which the pool
// would otherwise take for its default, or a negative one. To stop running
// jobs at once, give the shortest wait.
func checkGrace(grace time.Duration) error {
	if grace <= 0 {
		return usagef("--grace %s: must be above zero, such as 1ms to stop running jobs at once; the default is %s",
			grace, worker.DefaultGrace)
	}
	return nil
}

// parseAllowedHosts splits the value of --allowed-hosts: host names or IP
// addresses, comma-separated, each without scheme, port or wildcard.
func parseAllowedHosts(v string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(v, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err == nil || strings.ContainsAny(h, "/@*? ") {
			return nil, usagef("--allowed-hosts %q: give host names such as sked.example.com, comma-separated, "+
				"without scheme, port or wildcard (every port is served)", h)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// parseTrustedProxies splits the value of --trusted-proxies: IP addresses
// or CIDR ranges, comma-separated.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, usagef("--trusted-proxies %q: give IP addresses or CIDR ranges of the proxies, comma-separated, "+
					"such as 127.0.0.1,10.0.0.0/8 (no host names, no ports)", p)
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, handlers.ProxyPrefix(prefix))
	}
	return out, nil
}

// offWhenZero maps a duration flag whose 0 turns its feature off
// (--retention, --claim-ahead) to its server.Config field, where zero means
// the default and negative off.
func offWhenZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// execEnvFlag registers --exec-env on fs, read into names: the flag,
// repeated, or else SKED_EXEC_ENV, comma-separated.
func execEnvFlag(fs *pflag.FlagSet, names *[]string) {
	fs.StringArrayVar(names, "exec-env", nil, "pass this variable of sked's own environment on to commands, which get only PATH, HOME, LANG, TZ, "+
		"their SKED_* and their payload's env otherwise; repeat for several")
	withEnv(fs, "exec-env")
	splitEnv(fs, "exec-env", ",")
}

// timeValue is the value of --test-clock: an RFC 3339 time, "true" for
// now, "false" or "" for none.
type timeValue struct{ rfc3339Value }

func (t *timeValue) Set(v string) error {
	switch v {
	case "", "false":
		t.rfc3339Value = rfc3339Value{}
	case "true":
		t.rfc3339Value = rfc3339Value(time.Now())
	default:
		if err := t.rfc3339Value.Set(v); err != nil {
			return fmt.Errorf("%w, or no value to start now", err)
		}
	}
	return nil
}

// serveCommand is sked serve: its flags, checked, and the logger they ask
// for, given to run.
func serveCommand(env Env, run func(cmd *cobra.Command, s *serveFlags) error) *cobra.Command {
	s := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the scheduler: API, dashboard, dispatcher, workers, reaper",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.finish(cmd.Flags()); err != nil {
				return err
			}
			log, err := s.log.logger(env.Stderr)
			if err != nil {
				return err
			}
			s.cfg.Logger = log
			return run(cmd, s)
		},
	}
	s.register(cmd.Flags())
	return cmd
}

func serveCmd(env Env) *cobra.Command {
	cmd := serveCommand(env, func(cmd *cobra.Command, s *serveFlags) error {
		// Listen before the store is opened, so that a start that cannot
		// listen leaves no database file behind.
		if s.cfg.Addr != "" {
			ln, err := listen(s.cfg.Addr)
			if err != nil {
				return err
			}
			defer ln.Close()
			s.cfg.Listener = ln
		}
		err := server.New(s.cfg).Run(cmd.Context())
		if xe := (*server.ExposedError)(nil); errors.As(err, &xe) {
			return fmt.Errorf("--addr %s reaches beyond loopback, where anyone who can reach it could run jobs, and no token is set: "+
				"set one with --token or SKED_TOKEN (clients send it as Authorization: Bearer …), listen on loopback "+
				"(such as --addr %s), or pass --insecure to serve without authentication", s.cfg.Addr, defaultAddr)
		}
		return err
	})
	cmd.Example = "  sked serve --db /var/lib/sked/sked.db --enable-exec\n  SKED_TOKEN=s3cret sked serve --addr 0.0.0.0:8080"
	return cmd
}

// listen opens sked serve's listener on addr (--addr). A port in use or
// not this process's to take is said with the fix.
func listen(addr string) (net.Listener, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		return nil, usagef("--addr %s: give a host and a port, such as 127.0.0.1:%s (this machine only) or 0.0.0.0:%s (every interface; needs a token)", addr, addr, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	_, port, _ := net.SplitHostPort(addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("cannot listen on %s: port %s is in use (by another sked serve or another program): "+
			"stop that, or give sked serve another address with --addr (SKED_ADDR)", addr, port)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("cannot listen on %s: port %s needs privileges this process lacks: "+
			"give a port above 1023 with --addr (SKED_ADDR), or run sked serve with the privilege to bind it", addr, port)
	}
	if oe := (*net.OpError)(nil); errors.As(err, &oe) {
		err = oe.Err // not "listen tcp ADDR:" again
	}
	return nil, fmt.Errorf("cannot listen on %s: %w; give an address of this machine with --addr (SKED_ADDR), such as %s", addr, err, defaultAddr)
}

// dbFlag registers on fs --db, the database of sked serve and sked migrate,
// read into dsn, and --db-wait, read into wait (0: -1, none; see
// server.Config.DBWait).
func dbFlag(fs *pflag.FlagSet, dsn *string, wait *time.Duration) {
	fs.StringVar(dsn, "db", "sked.db", "SQLite database file, or a postgres:// URL shared by many nodes")
	*wait = server.DefaultDBWait
	fs.Var((*dbWait)(wait), "db-wait", "how long to wait at start for a PostgreSQL server that cannot be reached yet, such as one still starting; 0: do not wait")
	withEnv(fs, "db", "db-wait")
}

// dbWait is --db-wait: a duration, of which 0 is stored as -1 (no wait;
// server.Config's 0 is the default).
type dbWait time.Duration

func (w *dbWait) Set(v string) error {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return errors.New("not a duration, such as 1m or 30s")
	case d < 0:
		return errors.New("must not be negative (0: do not wait)")
	case d == 0:
		d = -1
	}
	*w = dbWait(d)
	return nil
}

func (w *dbWait) String() string { return time.Duration(max(*w, 0)).String() }
func (*dbWait) Type() string     { return "duration" }
