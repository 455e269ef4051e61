package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/clip"
	"github.com/sked-dev/sked/notify"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// DefaultServer is the API the client commands talk to when neither
// --server nor SKED_SERVER says otherwise: the one `sked serve` starts.
const DefaultServer = "http://" + defaultAddr

// defaultAddr is where sked serve listens unless told otherwise.
const defaultAddr = "127.0.0.1:8080"

// showRuns is how many runs `sked show` lists under the job, and
// showEvents how many events of its timeline.
const (
	showRuns   = 10
	showEvents = 5
)

// api is what every client command has: the server, its token, --json, and
// once connected the API client.
type api struct {
	env     Env
	server  string   // --server: one URL, or several (comma-separated) until pick chose one
	servers []string // every URL of --server, once connected
	token   string
	json    bool
	timeout time.Duration // of one request; 0: none
	c       *skedapi.Client
	sent    *sentChanges // c's transport: what its changes got to
	dash    int          // where "--" was among the arguments; -1: nowhere
}

// defaultRequestTimeout bounds one request of a client command, so that a
// server that accepts connections and never answers (stopped, hung, or not
// sked) fails a script's step instead of holding it for ever.
const defaultRequestTimeout = time.Minute

// register adds --server, --token, --request-timeout and --json to fs.
func (a *api) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.server, "server", DefaultServer, "sked API URL; several, comma-separated (the nodes of one database): the first that is ready")
	fs.StringVar(&a.token, "token", "", "bearer token")
	fs.DurationVar(&a.timeout, "request-timeout", defaultRequestTimeout, "how long one request to the server may take (0: no limit)")
	withEnv(fs, "server", "token", "request-timeout")
	fs.BoolVar(&a.json, "json", false, "print JSON instead of tables")
}

// checkServer checks one URL of --server: an http:// or https:// URL
// with a host, and without a query or fragment, after which the API's
// paths could not go (the dashboard's address in a browser ends #/jobs).
func checkServer(server string) error {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--server %q: give an http:// or https:// URL, such as %s", server, DefaultServer)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		root := *u
		root.RawQuery, root.ForceQuery, root.Fragment, root.RawFragment = "", false, "", ""
		return usagef("--server %q: give the address sked answers at, without a ?… or #… part: %s", server, root.String())
	}
	return nil
}

// connect checks --server and makes the API client, for the server pick
// chooses when --server names several. Changes are recorded
// on the jobs' timelines as made by USER@HOST (the account's name when USER
// is unset, as in containers and cron).
func (a *api) connect(ctx context.Context) error {
	servers := tidyServers(strings.Split(a.server, ","))
	if len(servers) == 0 {
		return usagef("--server is empty: give the URL of a sked server, such as %s", DefaultServer)
	}
	for _, s := range servers {
		if err := checkServer(s); err != nil {
			return err
		}
	}
	if a.timeout < 0 {
		return usagef("--request-timeout %s: give how long one request may take, such as 30s, or 0 for no limit", a.timeout)
	}
	host, _ := os.Hostname()
	actor := ""
	name := a.env.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name != "" {
		actor = name + "@" + host
	}
	a.sent = &sentChanges{next: http.DefaultTransport}
	a.c = &skedapi.Client{Token: a.token, Actor: actor, HTTP: &http.Client{Timeout: a.timeout, Transport: a.sent}}
	a.servers = servers
	a.use(servers[0])
	if len(servers) > 1 {
		a.use(pickServer(ctx, servers))
	}
	return nil
}

// readAnywhere lets the reads that follow move on to the other servers of
// --server (the nodes of one database) when the one the command talks to
// stops answering or answers 503, starting with the one after it. Only
// for requests that may be sent again anywhere: a wait's reads, not a
// change, which could be made twice.
func (a *api) readAnywhere() {
	if len(a.servers) < 2 {
		return
	}
	at := max(slices.Index(a.servers, a.server), 0)
	var others []string
	for i := 1; i < len(a.servers); i++ {
		others = append(others, strings.TrimRight(a.servers[(at+i)%len(a.servers)], "/"))
	}
	a.c.Fallbacks = others
}

// use makes server the one the command talks to.
func (a *api) use(server string) {
	a.server = server
	a.c.BaseURL = strings.TrimRight(server, "/")
}

// clientCommand is a client command whose run gets the connected API, its
// errors rewritten into what to do about them (see apiError). It warns on
// stderr, once, before it sends a token by plain http:// across the network
// (tokenInTheClear). A run that fails once the command's context has ended
// (Ctrl-C) exits ExitInterrupted, saying what its changes got to
// (sentChanges).
func clientCommand(env Env, cmd *cobra.Command, run func(ctx context.Context, a *api, args []string) error) *cobra.Command {
	a := &api{env: env}
	a.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := a.connect(cmd.Context()); err != nil {
			return err
		}
		if warning := tokenInTheClear(a.token, []string{a.server}); warning != "" {
			fmt.Fprintf(a.env.Stderr, "warning: %s\n", warning)
		}
		a.dash = cmd.ArgsLenAtDash()
		err := run(cmd.Context(), a, args)
		if err != nil && cmd.Context().Err() != nil && ExitCode(err) != ExitInterrupted {
			return withExit(ExitInterrupted, err, "%s", a.sent.interrupted(a.server))
		}
		return a.apiError(err)
	}
	return cmd
}

// jobCommand is a client command on one job, given by its id or name, with
// the names of the server's jobs as its shell completions.
func jobCommand(env Env, use, short string, run func(ctx context.Context, a *api, id string) error) *cobra.Command {
	cmd := clientCommand(env, &cobra.Command{Use: use, Short: short, Args: exactArgs(1, "one job id or name")},
		func(ctx context.Context, c *api, args []string) error { return run(ctx, c, args[0]) })
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || applyEnv(cmd, env.Getenv) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c := &api{env: env, server: cmd.Flag("server").Value.String(), token: cmd.Flag("token").Value.String()}
		if c.connect(cmd.Context()) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		jobs, _, err := namedJobs(ctx, c.c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]cobra.Completion, len(jobs))
		for i, j := range jobs {
			names[i] = cobra.CompletionWithDesc(j.Name, j.Type+" "+cmp.Or(j.Schedule, string(j.State)))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}

// cliHints are how the server names a route to use instead, with the
// command that does it: stop a run; change the job that has a name.
var cliHints = []struct {
	route *regexp.Regexp
	cmd   string
}{
	{regexp.MustCompile(`POST /jobs/([^/\s]+)/cancel-run`), "`sked cancel-run $1`"},
	{regexp.MustCompile(`POST /jobs/([^/\s]+)/pause`), "`sked pause $1`"},
	{regexp.MustCompile(`PATCH /jobs/([^/\s]+) or PUT /jobs/by-name/[^/\s)]+`), "`sked edit $1`"},
	{regexp.MustCompile(`PATCH /jobs/([^/\s]+) with another name`), "`sked edit $1 --name NEW-NAME`"},
}

// hungUp reports whether err is a server closing the connection without
// an answer (net/http's own error for it on a new connection is not
// exported: it is known by its text).
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "server closed idle connection")
}

// apiRoutes are the first segments of the API's paths, which a --server
// copied from a request or the API's docs (http://HOST:8080/jobs) ends
// with.
var apiRoutes = []string{"jobs", "workers", "stats", "claims", "schedules"}

// routeInServer is the API's path that server ends with (/jobs of
// http://HOST:8080/jobs) and server without it; "" when it ends with
// none.
func routeInServer(server string) (route, root string) {
	trimmed := strings.TrimSuffix(server, "/")
	i := strings.LastIndex(trimmed, "/")
	if i < 0 || !slices.Contains(apiRoutes, trimmed[i+1:]) || strings.HasSuffix(trimmed[:i], "/") { // http://jobs: a host
		return "", ""
	}
	return trimmed[i:], trimmed[:i]
}

// hostNotFound says that the host of server (a --server URL) could not be
// looked up, as dnsErr tells, and what to check.
func hostNotFound(server string, dnsErr *net.DNSError) string {
	return fmt.Sprintf("cannot find the host %s of %s: %s; check the host name in --server (SKED_SERVER), and this machine's DNS",
		dnsErr.Name, server, dnsErr.Err)
}

// apiError rewrites errors of reaching the server into what to do about
// them; the server's own problems (with their detail) pass as they are,
// its hints put as sked commands and its Retry-After as a time. Each gets
// its exit status: ExitUnreachable for no answer (or a 5xx or 429, to try
// again), ExitRefused for a 4xx. An error rewritten already passes as it
// is.
func (a *api) apiError(err error) error {
	server := a.server
	var (
		netErr net.Error
		dnsErr *net.DNSError
		done   *exitError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &done):
		return err
	case errors.As(err, &dnsErr): // before the timeout: a DNS server that did not answer is not sked
		return withExit(ExitUnreachable, err, "%s", hostNotFound(server, dnsErr))
	case errors.As(err, &netErr) && netErr.Timeout():
		return withExit(ExitUnreachable, err, "%s did not answer in time (%v): is sked serve there, and not stopped or overloaded? "+
			"--request-timeout (SKED_REQUEST_TIMEOUT, now %s) sets how long a request may take; a change sent may have been made or not: "+
			"look (sked ls, sked show) before sending it again, or send it with --key", server, err, a.timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return withExit(ExitUnreachable, err, "cannot connect to %s: connection refused; is sked serve running at %s? start it with `sked serve` or pass --server", server, server)
	case hungUp(err):
		return withExit(ExitUnreachable, err, "%s closed the connection without an HTTP answer: is sked serve the service at %s (and not, say, PostgreSQL)? "+
			"pass --server (SKED_SERVER) for another address; if it was restarting, a change sent may have been made or not: "+
			"look (sked ls, sked show) before sending it again, or send it with --key", server, server)
	case errors.Is(err, http.ErrSchemeMismatch):
		return withExit(ExitUnreachable, err, "%s answers plain HTTP, not HTTPS: give --server (SKED_SERVER) as %s", server, "http"+strings.TrimPrefix(server, "https"))
	case errors.As(err, new(*url.Error)): // no answer for another reason: TLS
		return withExit(ExitUnreachable, err, "")
	case errors.As(err, new(*skedapi.NotSkedError)): // an answer, but not sked's
		return withExit(ExitUnreachable, err, "")
	}
	ae := (*skedapi.Error)(nil)
	if !errors.As(err, &ae) {
		return err
	}
	code := ExitRefused
	if ae.Status >= 500 || ae.Status == http.StatusTooManyRequests {
		code = ExitUnreachable
	}
	if ae.Detail == "" {
		return withExit(code, err, "")
	}
	detail := ae.Detail
	for _, h := range cliHints {
		detail = h.route.ReplaceAllString(detail, h.cmd)
	}
	if ae.RetryAfter > 0 { // the header the detail names, which a person does not see
		detail = strings.ReplaceAll(detail, "after Retry-After seconds", "after "+ae.RetryAfter.String())
	}
	if route, root := routeInServer(a.server); route != "" && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) {
		return withExit(code, err, "%s (%d %s); --server (SKED_SERVER), now %s, ends with the API's path %s, which sked adds itself: give %s",
			detail, ae.Status, http.StatusText(ae.Status), a.server, route, root)
	}
	if ae.Status == http.StatusNotFound && strings.HasPrefix(detail, "no such endpoint: ") {
		// A --server with a path of its own, or a server older than this
		// client.
		return withExit(code, err, "%s (%d %s); is --server (SKED_SERVER), now %s, the address sked answers at (sked serve's has no path), "+
			"and the server a sked as new as this one (sked version)?", detail, ae.Status, http.StatusText(ae.Status), a.server)
	}
	if ae.Status == http.StatusUnauthorized {
		return withExit(code, err, "%s (%d %s); give sked one of the server's tokens with SKED_TOKEN or --token", detail, ae.Status, http.StatusText(ae.Status))
	}
	return withExit(code, err, "%s (%d %s)", detail, ae.Status, http.StatusText(ae.Status))
}

func clientCmds(env Env) []*cobra.Command {
	return []*cobra.Command{
		addCmd(env), lsCmd(env), showCmd(env), runsCmd(env), waitCmd(env), editCmd(env), applyCmd(env), exportCmd(env),
		cancelCmd(env),
		pauseCmd(env),
		resumeCmd(env),
		actionCmd(env, "retry", "Move a dead job back to ready", "retried", "", (*skedapi.Client).JobRetry),
		triggerCmd(env),
		actionCmd(env, "skip", "Skip the next slot of a recurring job", "skipped the next slot of", "", (*skedapi.Client).JobSkip),
		actionCmd(env, "cancel-run", "Stop a job's running run (its handler's context ends; commands get SIGTERM)", "asked to stop the run of",
			"(a worker in this server's own pool stops it at once; another node's pool or sked work "+
				"at its next heartbeat, within a third of its lease: 10s by default)", (*skedapi.Client).JobCancelRun),
		backfillCmd(env), workersCmd(env),
	}
}

// The help of the flags of a job's definition, which sked add and sked
// edit share.
const (
	helpPayload     = "payload JSON, or @FILE to read it from a file"
	helpSchedule    = "cron expression, e.g. '30 2 * * 1-5' or '@every 90s'"
	helpTZ          = "IANA time zone of the schedule"
	helpMaxAttempts = "attempts before a one-off job goes dead, or a schedule's firing gives up"
	helpTimeout     = "limit of one attempt"
	helpBackoff     = "first retry delay, doubled per attempt, each drawn from its upper half"
	helpJitter      = "delay the run (a schedule: every slot) by a fixed offset inside this window"
	helpOverlap     = "skip or queue_one"
	helpMisfire     = "run_once, skip or run_all"
	helpExpect      = "mark the job quiet when no run succeeded for this long"
)

// addFlags are the flags of sked add.
type addFlags struct {
	req                  skedapi.JobCreateRequest
	payload, schedule    string
	at                   rfc3339Value
	exec                 bool
	wait                 waitFlags
	env                  []string
	dir                  string
	url                  string
	in, timeout, backoff time.Duration
	jitter, expect       time.Duration
}

func addCmd(env Env) *cobra.Command {
	var f addFlags
	cmd := clientCommand(env, &cobra.Command{
		Use:   "add --type T [flags] | sked add --exec [flags] -- CMD ARGS… | sked add --url URL [flags]",
		Short: "Create a job: one-off (now, --at, --in) or recurring (--schedule)",
		Example: "  sked add --exec --name nightly-backup --schedule '30 2 * * *' --tz Europe/Berlin -- sh -c 'restic backup /srv'\n" +
			"  sked add --url https://example.com/hook --payload '{\"hello\":\"world\"}' --in 10m",
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			// Zero is the flags' "not given" (the server's default), so a
			// zero given on purpose would silently become the default.
			for _, fl := range []struct {
				name string
				zero bool
			}{{"max-attempts", f.req.MaxAttempts == 0}, {"timeout", f.timeout == 0}, {"backoff", f.backoff == 0}} {
				if fl.zero && cmd.Flags().Changed(fl.name) {
					return usagef("--%s %s: give a value above zero, or leave it out for the server's default", fl.name, cmd.Flags().Lookup(fl.name).Value)
				}
			}
			// An empty name or key (a script's unset variable) would
			// silently make a job without one: a second run a second job.
			for _, fl := range []struct{ name, value string }{{"name", f.req.Name}, {"key", f.req.IdempotencyKey}} {
				if cmd.Flags().Changed(fl.name) && fl.value == "" {
					return usagef("--%s is empty: give one, or leave --%s out", fl.name, fl.name)
				}
			}
			if f.schedule == "" && fromEnv(cmd.Flags(), "tz") {
				f.req.Timezone = "" // SKED_TZ is the zone of schedules; a one-off job has none
			}
			return nil
		},
	}, func(ctx context.Context, a *api, args []string) error { return f.run(ctx, a, args) })
	fs := cmd.Flags()
	fs.StringVar(&f.req.Name, "name", "", "name of the job, unique among jobs not cancelled, accepted wherever its id is")
	fs.StringVar(&f.req.Type, "type", "", "job type: http, exec or a handler's name")
	fs.StringVar(&f.payload, "payload", "", helpPayload)
	fs.Var(&f.at, "at", "one-off: run at this RFC 3339 time")
	fs.DurationVar(&f.in, "in", 0, "one-off: run after this duration, e.g. 10m")
	fs.StringVar(&f.schedule, "schedule", "", "recurring: "+helpSchedule)
	fs.StringVar(&f.req.Timezone, "tz", "", "recurring: "+helpTZ+" (default UTC)")
	fs.IntVar(&f.req.MaxAttempts, "max-attempts", 0, helpMaxAttempts+" (server default by type)")
	fs.DurationVar(&f.timeout, "timeout", 0, helpTimeout+" (server default 1h)")
	fs.DurationVar(&f.backoff, "backoff", 0, helpBackoff+" (server default by type)")
	fs.DurationVar(&f.jitter, "jitter", 0, helpJitter)
	fs.DurationVar(&f.expect, "expect-success-within", 0, "recurring: "+helpExpect)
	fs.StringVar(&f.req.IdempotencyKey, "key", "", "idempotency key: a second add with it returns the first job")
	fs.StringVar(&f.req.Overlap, "overlap", "", "recurring: "+helpOverlap)
	fs.StringVar(&f.req.Misfire, "misfire", "", "recurring: "+helpMisfire)
	fs.BoolVar(&f.exec, "exec", false, "an exec job running the command after --")
	fs.StringArrayVar(&f.env, "env", nil, "with --exec: NAME=value added to the command's environment (repeatable)")
	fs.StringVar(&f.dir, "dir", "", "with --exec: absolute working directory of the command")
	fs.StringVar(&f.url, "url", "", "an http job POSTing to this URL (--payload is the body)")
	f.wait.register(fs, "one-off: wait until the job ends")
	fs.Lookup("wait-timeout").Usage += "; --timeout is the job's"
	withEnv(fs, "tz")
	fs.SortFlags = false
	return cmd
}

// shellVar is a word that sets a variable the shell's way, NAME=value.
var shellVar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// checkExecCommand refuses an exec job's command that only a shell would
// read as meant, since an exec job runs no shell: a shell line given as
// one argument, a variable set before the program, a redirection or pipe
// given as an argument. Each would fail at its first run, hours later.
func checkExecCommand(command []string) error {
	line := strings.Join(command, " ")
	viaShell := fmt.Sprintf("run it through a shell (-- sh -c %q)", line)
	switch {
	case len(command) == 1 && strings.ContainsAny(command[0], " \t") && !strings.Contains(command[0], "/"):
		// No program on the PATH has such a name.
		return usagef("the command after -- is one argument, %q, which would run a program of that whole name: "+
			"give its words as separate arguments (-- %s), or %s", command[0], command[0], viaShell)
	case shellVar.MatchString(command[0]):
		return usagef("the command after -- begins with %q, which sets a variable in a shell, but an exec job runs no shell: "+
			"set it with --env %s, or %s", command[0], command[0], viaShell)
	}
	for i, arg := range command {
		if arg == "-c" && i > 0 && strings.HasSuffix(filepath.Base(command[i-1]), "sh") {
			return nil // the rest is a shell's (sh -c, bash -c)
		}
		if shellSyntax(arg) {
			return usagef("the command after -- has %q in it, which a shell would read as a redirection, pipe or list, but an exec job runs no shell "+
				"and would pass it to the program as it is: %s", arg, viaShell)
		}
	}
	return nil
}

// shellSyntax reports whether a word of arg begins as what a shell reads
// as a redirection, a pipe or a list does (">>", "2>&1", "<in", "|", "&&",
// ";").
func shellSyntax(arg string) bool {
	return slices.ContainsFunc(strings.Fields(arg), shellOperator.MatchString)
}

// shellOperator matches a word that begins as a shell's redirection, pipe or
// list operator.
var shellOperator = regexp.MustCompile(`^(?:[0-9]*>|&>|<|\||&|;)`)

// run creates the job.
func (f *addFlags) run(ctx context.Context, a *api, args []string) error {
	pos, command := splitDash(a, args)
	if len(pos) > 0 {
		return usagef("unexpected argument %q; a command for --exec goes after --", pos[0])
	}
	req := f.req
	req.Timeout, req.Backoff, req.Jitter = db.Duration(f.timeout), db.Duration(f.backoff), db.Duration(f.jitter)
	req.ExpectSuccessWithin = db.Duration(f.expect)
	var (
		body json.RawMessage
		err  error
	)
	if f.payload != "" {
		if body, err = readPayload(f.payload); err != nil {
			return err
		}
	}
	switch {
	case f.exec && f.url != "":
		return usagef("--exec and --url cannot be used together")
	case f.exec:
		if len(command) == 0 {
			return usagef("--exec needs a command after --, e.g. sked add --exec -- sh -c 'date'")
		}
		if f.payload != "" {
			return usagef("--exec builds the payload from the command; leave out --payload")
		}
		if err := checkExecCommand(command); err != nil {
			return err
		}
		p, perr := execPayload(command, f.env, f.dir)
		if perr != nil {
			return perr
		}
		body, _ = wire.Marshal(p)
		req.Type, err = impliedType(req.Type, "exec", "--exec")
	case f.url != "":
		p := map[string]any{"url": f.url}
		if body != nil {
			p["body"] = body
		}
		body, _ = wire.Marshal(p)
		req.Type, err = impliedType(req.Type, "http", "--url")
	case req.Type == "":
		return usagef("--type is required (or --exec -- CMD, or --url URL)")
	}
	if err != nil {
		return err
	}
	if len(command) > 0 && !f.exec {
		return usagef("arguments after -- are a command for --exec; add --exec")
	}
	if (len(f.env) > 0 || f.dir != "") && !f.exec {
		return usagef("--env and --dir are an exec job's; add --exec")
	}
	req.Payload = body

	given := 0
	at := time.Time(f.at)
	for _, s := range []bool{!at.IsZero(), f.in != 0, f.schedule != ""} {
		if s {
			given++
		}
	}
	if given > 1 {
		return usagef("give only one of --at (one run at that time), --in (one run after that long) and --schedule (recurring runs); none: one run now")
	}
	switch {
	case !at.IsZero():
		req.RunAt = &at
	case f.in < 0:
		return usagef("--in %s: must not be negative; give how long from now, such as 10m", f.in)
	case f.in > 0:
		req.RunIn = db.Duration(f.in)
	}
	if req.Timezone != "" && f.schedule == "" {
		return usagef("--tz is the time zone of a --schedule; add --schedule")
	}
	if f.wait.on && f.schedule != "" {
		return usagef("--wait waits for a one-off job to end; a --schedule job ends only when cancelled (sked trigger NAME --wait runs it once and waits for that run)")
	}
	if err := f.wait.check(); err != nil {
		return err
	}
	req.Schedule = f.schedule

	job, created, err := a.c.JobCreate(ctx, req)
	if err != nil {
		return err
	}
	if job.State == db.StateReady || job.State == db.StatePaused {
		warnUnserved(ctx, a, job)
	}
	if created {
		warnPassed(a.env.Stderr, "--at", req.RunAt, job, "sked cancel "+cmp.Or(job.Name, job.ID))
	}
	switch {
	case f.wait.on && a.json: // one JSON document: the job as it ended
	case a.json:
		return a.printJSON(job)
	case !created:
		fmt.Fprintf(a.env.Stdout, "job %s already exists for key %q (%s, next run %s); nothing created, and its time is kept\n",
			jobLabel(job), job.IdempotencyKey, job.State, zonedText(job.NextRunAt, job.Timezone))
	default:
		label, id := job.ID, "" // a named job's id inside the parentheses, not in a pair of its own
		if job.Name != "" {
			label, id = job.Name, job.ID+", "
		}
		fmt.Fprintf(a.env.Stdout, "created job %s (%s%s, %s, next run %s)\n", label, id, job.Type, job.State, zonedText(job.NextRunAt, job.Timezone))
	}
	if !f.wait.on {
		return nil
	}
	return a.wait(ctx, job.ID, f.wait.limit)
}

// execPayload is the payload of an exec job running command with the
// variables env (each NAME=value) in dir. The server validates the rest.
func execPayload(command, env []string, dir string) (worker.ExecPayload, error) {
	p := worker.ExecPayload{Command: command, Dir: dir}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return p, usagef("--env %q: give NAME=value, such as --env LANG=C.UTF-8", kv)
		}
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		p.Env[name] = value
	}
	return p, nil
}

// splitDash splits a command's arguments at "--": before it the positional
// ones, after it a command.
func splitDash(a *api, args []string) (pos, tail []string) {
	if a.dash < 0 {
		return args, nil
	}
	return args[:a.dash], args[a.dash:]
}

// impliedType is the type --exec or --url imply, refusing a --type that
// says otherwise.
func impliedType(given, implied, flagName string) (string, error) {
	if given != "" && given != implied {
		return "", usagef("%s makes an %s job; --type %s contradicts it", flagName, implied, given) // http, exec
	}
	return implied, nil
}

// readPayload reads --payload: JSON, or @FILE for a file holding JSON.
func readPayload(v string) (json.RawMessage, error) {
	b := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, usagef("--payload: %v", err)
		}
	}
	if !json.Valid(b) {
		if name, ok := strings.CutPrefix(v, "@"); ok {
			return nil, usagef("--payload %s: %s holds no valid JSON (%v)", v, name, json.Unmarshal(b, new(any)))
		}
		return nil, usagef("--payload %.80q: give valid JSON, or @FILE for a file that holds it", strings.TrimSpace(string(b)))
	}
	return b, nil
}

// stateText is j's state, with what a schedule's state does not tell: that
// its last firing gave up ("ready, failing") or it went quiet.
func stateText(j db.Job) string {
	s := string(j.State)
	if j.FailingSince != nil {
		s += ", failing"
	}
	if j.QuietSince != nil {
		s += ", quiet"
	}
	return s
}

func lsCmd(env Env) *cobra.Command {
	var (
		p     db.JobListParams
		state string
		all   bool
	)
	cmd := clientCommand(env, &cobra.Command{
		Use:   "ls",
		Short: "List jobs, newest first",
		Args:  noArgs,
	}, func(ctx context.Context, a *api, _ []string) error {
		if state == db.HealthFailing || state == db.HealthQuiet {
			return usagef("--state %s: %s is not a job state (such a schedule is ready, or running); list them with --health %s", state, state, state)
		}
		p.State = db.JobState(state)
		jobs, next, err := pages(p.Cursor, all, func(cursor string) ([]db.Job, string, error) {
			p.Cursor = cursor
			return a.c.JobList(ctx, p)
		})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(struct {
				Jobs       []db.Job `json:"jobs"`
				NextCursor string   `json:"nextCursor,omitempty"`
			}{append([]db.Job{}, jobs...), next})
		}
		if len(jobs) == 0 && next == "" {
			// An empty table reads as a listing that failed.
			if p.State != "" || p.Type != "" || p.Name != "" || p.Health != "" || p.Cursor != "" {
				fmt.Fprintln(a.env.Stdout, "no jobs match: sked ls without --state, --type, --name, --health and --cursor lists every job")
			} else {
				fmt.Fprintln(a.env.Stdout, "no jobs yet: sked add creates one (sked add --help)")
			}
			return nil
		}
		tw := table(a.env.Stdout, "NAME", "ID", "TYPE", "STATE", "SCHEDULE", "NEXT RUN", "ATTEMPT", "LAST ERROR")
		for _, j := range jobs {
			row(tw, listName(j), j.ID, j.Type, stateText(j), cmp.Or(j.Schedule, "-"), timeText(nextRun(j)),
				fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), oneLine(j.LastError, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if next != "" {
			fmt.Fprintf(a.env.Stdout, "more: sked ls --cursor %s (or --all)\n", next)
		}
		return nil
	})
	fs := cmd.Flags()
	fs.StringVar(&state, "state", "", "only jobs in this state: ready, running, done, dead, cancelled, paused")
	fs.StringVar(&p.Type, "type", "", "only jobs of this type")
	fs.StringVar(&p.Name, "name", "", "only the job of this name")
	fs.StringVar(&p.Health, "health", "", "only the schedules in trouble: failing (the last firing gave up) or quiet (no success within --expect-success-within)")
	fs.IntVar(&p.Limit, "limit", 0, "jobs per page (server default 50, at most 500)")
	fs.StringVar(&p.Cursor, "cursor", "", "start at this page (the nextCursor of the previous one)")
	fs.BoolVar(&all, "all", false, "follow the cursors to the last page")
	cmd.PreRunE = checkLimit(&p.Limit)
	return cmd
}

// checkLimit refuses a --limit given below 1: zero is the flag's "not
// given" (the server's default), which it would silently become.
func checkLimit(limit *int) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if *limit < 1 && cmd.Flags().Changed("limit") {
			return usagef("--limit %d: give a number from 1 to 500, or leave it out for the server's default (50)", *limit)
		}
		return nil
	}
}

func runsCmd(env Env) *cobra.Command {
	var (
		p      db.RunListParams
		all    bool
		output bool
	)
	cmd := jobCommand(env, "runs ID|NAME", "List a job's runs, newest first", func(ctx context.Context, a *api, id string) error {
		p.JobID = id
		runs, _, err := pages(0, all, func(cursor int64) ([]db.Run, int64, error) {
			p.Cursor = cursor
			return a.c.RunList(ctx, p)
		})
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(append([]db.Run{}, runs...))
		}
		if len(runs) == 0 {
			fmt.Fprintf(a.env.Stdout, "no runs recorded (none yet, or all older than the server's --retention; sked show %s says the job's state)\n", id)
			return nil
		}
		if err := a.runTable(runs); err != nil || !output {
			return err
		}
		for _, r := range runs {
			fmt.Fprintf(a.env.Stdout, "\n── run %d, attempt %d, %s ──\n", r.ID, r.Attempt, r.Outcome)
			if r.Error != "" { // the table cuts it short
				fmt.Fprintf(a.env.Stdout, "error: %s\n", r.Error)
			}
			if r.LateOutcome != "" { // what the execution said once its lease was taken back
				fmt.Fprintf(a.env.Stdout, "reported late, at %s: %s", timeText(r.LateFinishedAt), r.LateOutcome)
				if r.LateError != "" {
					fmt.Fprintf(a.env.Stdout, ": %s", r.LateError)
				}
				fmt.Fprintln(a.env.Stdout)
			}
			fmt.Fprintf(a.env.Stdout, "%s\n", cmp.Or(strings.TrimRight(r.Output, "\n"), "(no output)"))
		}
		return nil
	})
	cmd.Flags().IntVar(&p.Limit, "limit", 0, "runs per page (server default 50, at most 500)")
	cmd.PreRunE = checkLimit(&p.Limit)
	cmd.Flags().BoolVar(&all, "all", false, "every run, not only the newest page")
	cmd.Flags().BoolVar(&output, "output", false, "after the table, each run's whole error and its output (the last 4 KiB it wrote)")
	return cmd
}

// pages reads the page at cursor with list and, when all is set, every
// page after it, and returns what they held and the cursor of the page after
// the last one read (the zero value at the end).
func pages[T any, C comparable](cursor C, all bool, list func(C) ([]T, C, error)) ([]T, C, error) {
	var items []T
	for {
		page, next, err := list(cursor)
		if err != nil {
			return nil, next, err
		}
		items, cursor = append(items, page...), next
		var end C
		if !all || next == end {
			return items, next, nil
		}
	}
}

// listName is what the NAME column shows of j: its name, "(notification)"
// or "(ping)" for a job that delivers one, else "-".
func listName(j db.Job) string {
	if kind := notify.DeliveryKind(j.IdempotencyKey); j.Name == "" && kind != "" {
		return "(" + kind + ")"
	}
	return cmp.Or(j.Name, "-")
}

// runTable prints runs, newest first, as a table.
func (a *api) runTable(runs []db.Run) error {
	tw := table(a.env.Stdout, "RUN", "ATTEMPT", "SLOT", "WORKER", "STARTED", "DURATION", "OUTCOME", "ERROR", "OUTPUT (LAST LINE)")
	for _, r := range runs {
		outcome := string(r.Outcome)
		if r.Reason != "" {
			outcome += " (" + r.Reason + ")"
		}
		if r.GaveUp {
			outcome += ", gave up"
		}
		if r.LateOutcome != "" {
			outcome += ", reported " + string(r.LateOutcome) + " late"
		}
		dur := "-"
		if r.StartedAt != nil && r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(*r.StartedAt).Round(time.Millisecond).String()
		}
		row(tw, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.Attempt), timeText(r.Slot), cmp.Or(r.WorkerID, "-"),
			timeText(r.StartedAt), dur, outcome, oneLine(r.Error, 60), oneLine(lastLine(r.Output), 40))
	}
	return tw.Flush()
}

// lastLine is the last line of s that is not blank.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// actionCmd is a command that changes one job's state with do (a client
// method: resume, retry, trigger, skip, cancel-run) and prints the job
// after it, and then note, when there is one, unless the output is JSON.
func actionCmd(env Env, name, short, verb, note string, do func(*skedapi.Client, context.Context, string) (db.Job, error)) *cobra.Command {
	return jobCommand(env, name+" ID|NAME", short, func(ctx context.Context, a *api, id string) error {
		job, err := do(a.c, ctx, id)
		if err != nil {
			return err
		}
		if err := a.printAction(verb, id, job); err != nil || a.json || note == "" {
			return err
		}
		_, err = fmt.Fprintln(a.env.Stdout, note)
		return err
	})
}

// triggerCmd runs a job once now and, with --wait, waits until that run
// has ended.
func triggerCmd(env Env) *cobra.Command {
	var w waitFlags
	cmd := jobCommand(env, "trigger ID|NAME [--wait [--wait-timeout DURATION]]", "Run a job once now (a schedule keeps its pending slot)",
		func(ctx context.Context, a *api, id string) error {
			if err := w.check(); err != nil {
				return err
			}
			job, err := a.c.JobTrigger(ctx, id)
			if err != nil {
				return err
			}
			switch {
			case w.on && a.json: // with --wait --json, one document: what ended
			case job.Recurring() && !a.json && job.Slot != nil:
				// Its nextRunAt is the extra run's, now: "next run" would
				// read as if the schedule had moved.
				fmt.Fprintf(a.env.Stdout, "triggered job %s (an extra run now; the schedule's next slot stays %s)\n", id, inZone(job.Slot, job.Timezone))
			default:
				if err := a.printAction("triggered", id, job); err != nil {
					return err
				}
			}
			switch {
			case !w.on:
				return nil
			case job.Recurring():
				return a.waitTriggered(ctx, id, job, w.limit)
			}
			return a.wait(ctx, job.ID, w.limit)
		})
	w.register(cmd.Flags(), "wait until this run ends (a one-off job: until the job ends)")
	timeoutAlias(cmd.Flags())
	cmd.Long = "sked trigger runs a ready job once now. A recurring job gets an extra run, marked manual, and keeps its pending\n" +
		"slot. With --wait it waits until that run ends, for CI: exit 0 when it succeeded, 1 when it failed, timed out or\n" +
		"was cancelled (or a pause dropped it before it started), 124 when --wait-timeout (--timeout is another name for\n" +
		"it) runs out first, 3 when the server stops answering meanwhile (as sked wait says); --json then prints the run\n" +
		"as it ended. A one-off job is waited for as sked wait does."
	return cmd
}

// cancelCmd cancels a job no worker holds; the server answers with no job.
func cancelCmd(env Env) *cobra.Command {
	return jobCommand(env, "cancel ID|NAME", "Cancel a job no worker holds", func(ctx context.Context, a *api, id string) error {
		if err := a.c.JobCancel(ctx, id); err != nil {
			return err
		}
		if a.json {
			return a.printJSON(map[string]string{"jobId": id, "state": string(db.StateCancelled)})
		}
		return a.printAction("cancelled", id, db.Job{ID: id, State: db.StateCancelled})
	})
}

// printAction says what a state change did to the job given as id. A
// running job's next run is the slot it is running, already past: it is
// left out.
func (a *api) printAction(verb, id string, job db.Job) error {
	if a.json {
		return a.printJSON(job)
	}
	fmt.Fprintf(a.env.Stdout, "%s job %s (now %s", verb, id, job.State)
	switch {
	case job.State == db.StatePaused: // it runs at none of its times
		fmt.Fprintf(a.env.Stdout, " %s", pausedUntil(job))
		if job.PauseReason != "" {
			fmt.Fprintf(a.env.Stdout, ": %s", job.PauseReason)
		}
	case nextRun(job) != nil:
		fmt.Fprintf(a.env.Stdout, ", next run %s", zonedText(nextRun(job), job.Timezone))
	}
	fmt.Fprintln(a.env.Stdout, ")")
	return nil
}

// pausedUntil says until when a paused job stays paused: "until resumed",
// or "until" the time it resumes by itself.
func pausedUntil(job db.Job) string {
	if job.PauseUntil != nil {
		return "until " + optTime(job.PauseUntil)
	}
	return "until resumed"
}

// resolve is the time t names: a duration added to the server's now (its
// test clock, when it runs on one; see client.Client.Now), to the second.
func (t *laterValue) resolve(ctx context.Context, c *skedapi.Client) (time.Time, error) {
	if t.in == 0 {
		return time.Time(t.rfc3339Value), nil
	}
	now, err := c.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(t.in).UTC().Truncate(time.Second), nil
}

func pauseCmd(env Env) *cobra.Command {
	var (
		reason string
		until  laterValue
	)
	cmd := jobCommand(env, "pause ID|NAME [--reason TEXT] [--until RFC3339|DURATION]", "Pause a ready job or a schedule, with a reason and an end", func(ctx context.Context, a *api, id string) error {
		t, err := until.resolve(ctx, a.c)
		if err != nil {
			return err
		}
		return a.changePause(ctx, id, "paused", func() (db.Job, error) {
			if reason != "" || !t.IsZero() {
				return a.c.JobPauseUntil(ctx, id, reason, t)
			}
			return a.c.JobPause(ctx, id)
		})
	})
	cmd.Flags().StringVar(&reason, "reason", "", "why the job is paused, shown on it")
	cmd.Flags().Var(&until, "until", "resume by itself at this RFC 3339 time, or after this duration, e.g. 2h")
	cmd.Long = "Pause a ready job, with a reason and an end. A schedule whose run is in flight pauses when that run\n" +
		"ends (sked resume before then takes it back); the run finishes as it began (sked cancel-run stops it).\n" +
		"A one-off job a worker holds cannot be paused (409)."
	return cmd
}

func resumeCmd(env Env) *cobra.Command {
	return jobCommand(env, "resume ID|NAME", "Resume a paused job", func(ctx context.Context, a *api, id string) error {
		return a.changePause(ctx, id, "resumed", func() (db.Job, error) { return a.c.JobResume(ctx, id) })
	})
}

// changePause runs change, a pause or a resume of the job id, and says
// what it did (verb). The server answers a pause of a paused job, or a
// resume of a ready one, as it answers a change, so the job is read
// first: one that ends as it was is told as nothing to do.
func (a *api) changePause(ctx context.Context, id, verb string, change func() (db.Job, error)) error {
	var before db.Job
	if !a.json {
		var err error
		if before, err = a.c.JobGet(ctx, id); err != nil {
			return err
		}
	}
	job, err := change()
	switch {
	case err != nil:
		return err
	case a.json:
		return a.printJSON(job)
	case samePause(before, job):
		_, err = fmt.Fprintf(a.env.Stdout, "job %s %s: nothing to do\n", jobLabel(job), pauseState(job))
		return err
	case job.PauseRequested:
		_, err = fmt.Fprintf(a.env.Stdout, "job %s is running: it pauses when this run ends (sked resume %s takes that back)\n", jobLabel(job), id)
		return err
	}
	return a.printAction(verb, id, job)
}

// samePause says whether a and b are in the same state as far as a pause
// goes.
func samePause(a, b db.Job) bool {
	return a.State == b.State && a.PauseRequested == b.PauseRequested && a.PauseReason == b.PauseReason &&
		(a.PauseUntil == nil) == (b.PauseUntil == nil) && (a.PauseUntil == nil || a.PauseUntil.Equal(*b.PauseUntil))
}

// pauseState says how job stands as to pausing, after its name.
func pauseState(job db.Job) string {
	switch {
	case job.State == db.StatePaused:
		return "is already paused " + pausedUntil(job)
	case job.PauseRequested:
		return "already pauses when its run ends"
	}
	return "is not paused (it is " + string(job.State) + ")"
}

func backfillCmd(env Env) *cobra.Command {
	var from, to rfc3339Value
	cmd := jobCommand(env, "backfill ID|NAME --from RFC3339 --to RFC3339", "Run each past slot of a schedule in --from..--to once", func(ctx context.Context, a *api, id string) error {
		if time.Time(from).IsZero() || time.Time(to).IsZero() {
			return usagef("--from and --to are required: the first and the last slot time of the range, such as --from 2026-11-26T00:00:00Z --to 2026-11-26T23:59:59Z")
		}
		b, err := a.c.JobBackfill(ctx, id, time.Time(from), time.Time(to))
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(b)
		}
		fmt.Fprintf(a.env.Stdout, "backfill of %s: %s, %s created, %d in all", id, plural(b.Slots, "slot"), plural(b.Created, "job"), len(b.JobIDs))
		if b.LeftToSchedule > 0 {
			fmt.Fprintf(a.env.Stdout, "; %d left to the schedule, which runs them itself (backfill them once it has moved past them)", b.LeftToSchedule)
		}
		fmt.Fprintln(a.env.Stdout)
		for _, jid := range b.JobIDs {
			fmt.Fprintln(a.env.Stdout, jid)
		}
		return nil
	})
	cmd.Flags().Var(&from, "from", "first slot time of the range, RFC 3339")
	cmd.Flags().Var(&to, "to", "last slot time of the range, RFC 3339")
	return cmd
}

func showCmd(env Env) *cobra.Command {
	return jobCommand(env, "show ID|NAME", "Show a job, its last runs and the latest changes of its timeline",
		func(ctx context.Context, a *api, id string) error { return a.show(ctx, id) })
}

// show prints a job, its newest runs and events.
func (a *api) show(ctx context.Context, id string) error {
	job, serverNow, err := a.c.JobGetDated(ctx, id)
	if err != nil {
		return err
	}
	runs, _, err := a.c.RunList(ctx, db.RunListParams{JobID: job.ID, Limit: showRuns})
	if err != nil {
		return err
	}
	events, _, err := a.c.EventList(ctx, db.EventListParams{JobID: job.ID, Limit: showEvents})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			Job    db.Job     `json:"job"`
			Runs   []db.Run   `json:"runs"`
			Events []db.Event `json:"events"`
		}{job, append([]db.Run{}, runs...), append([]db.Event{}, events...)})
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, value)
		}
	}
	field("Name", job.Name)
	field("ID", job.ID)
	field("Type", job.Type)
	field("State", string(job.State))
	if job.State == db.StatePaused {
		field("Paused", cmp.Or(job.PauseReason, "no reason given")+", "+pausedUntil(job))
	}
	if job.PauseRequested {
		field("Pauses", "when this run ends: "+cmp.Or(job.PauseReason, "no reason given")+", "+pausedUntil(job))
	}
	if job.Recurring() {
		field("Schedule", job.Schedule+" ("+cmp.Or(job.Timezone, "UTC")+")")
		field("Overlap", job.Overlap)
		field("Misfire", job.Misfire)
		field("Missed slots", strconv.FormatInt(job.MissedSlots, 10))
		if job.ExpectSuccessWithin > 0 {
			field("Expect success within", time.Duration(job.ExpectSuccessWithin).String())
			switch {
			case job.State == db.StatePaused:
				field("Window", "none while paused: a whole window starts at its resume")
			case job.WatchFrom != nil && job.QuietSince == nil:
				quietAt := job.WatchFrom.Add(time.Duration(job.ExpectSuccessWithin))
				field("Window", "from "+optTime(job.WatchFrom)+": quiet unless a run succeeds by "+optTime(&quietAt))
			}
		}
		field("Last success", optTime(job.LastSuccessAt))
		field("Failing since", optTime(job.FailingSince))
		field("Quiet since", optTime(job.QuietSince))
	}
	if job.Jitter > 0 {
		field("Jitter", time.Duration(job.Jitter).String())
	}
	if job.RescheduledAt != nil {
		field("Rescheduled", "during this run, at "+optTime(job.RescheduledAt)+": the next slot counts from then")
	}
	field("Next run", inZone(nextRun(job), job.Timezone))
	if serverNow.IsZero() { // an answer without a Date: this machine's clock is all there is
		serverNow = time.Now()
	}
	waiting := overdue(job, serverNow)
	if next := nextRun(job); waiting == "" && next != nil && !next.After(serverNow) {
		waiting = unserved(ctx, a, job)
	}
	field("Waiting", waiting)
	field("Attempt", fmt.Sprintf("%d of %d", job.Attempt, job.MaxAttempts))
	field("Timeout", time.Duration(job.Timeout).String())
	field("Backoff", time.Duration(job.Backoff).String())
	if job.LeaseOwner != "" {
		field("Held by", fmt.Sprintf("%s until %s (generation %d)", job.LeaseOwner, timeText(job.LeaseUntil), job.LeaseGeneration))
	}
	field("Idempotency key", job.IdempotencyKey)
	field("Payload", rawText(job.Payload))
	field("Last error", job.LastError)
	field("Created", job.CreatedAt.Format(time.RFC3339))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(events) > 0 {
		fmt.Fprintf(a.env.Stdout, "\nTimeline (newest first):\n")
		tw := table(a.env.Stdout, "AT", "EVENT", "BY", "DETAIL")
		for _, e := range events {
			row(tw, e.At.UTC().Format(time.RFC3339), e.Kind, cmp.Or(e.Actor, "-"), oneLine(rawText(e.Detail), 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.env.Stdout)
	if len(runs) == 0 {
		fmt.Fprintln(a.env.Stdout, "no runs yet")
		return nil
	}
	fmt.Fprintf(a.env.Stdout, "Last runs (newest first; all of them: sked runs %s --all):\n", job.ID)
	return a.runTable(runs)
}

// printJSON writes v to stdout as printIndented does.
func (a *api) printJSON(v any) error {
	return printIndented(a.env.Stdout, v)
}

// jobLabel names a job for people: its name and id, or its id.
func jobLabel(j db.Job) string {
	if j.Name != "" {
		return j.Name + " (" + j.ID + ")"
	}
	return j.ID
}

// table starts a tabwriter table with its header row.
func table(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row(tw, header...)
	return tw
}

func row(tw *tabwriter.Writer, cells ...string) {
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// nextRun is when job runs next, as far as its row says: only a ready
// job's due time. A running job's is the slot it is running, already past,
// and a paused job's is none until it is resumed.
func nextRun(job db.Job) *time.Time {
	if job.State != db.StateReady {
		return nil
	}
	return job.NextRunAt
}

// overdue says why a ready job due over a minute before now, the server's
// time, has not started, or "": no worker serves its type, or none is free.
func overdue(job db.Job, now time.Time) string {
	next := nextRun(job)
	if next == nil || now.Sub(*next) < time.Minute {
		return ""
	}
	return fmt.Sprintf("due %s ago and not started: no worker serving type %q has claimed it (is one running? sked workers lists them; sked serve runs "+
		"its built-in types; sked work --type %s serves others), or all of them are busy",
		now.Sub(*next).Truncate(time.Second), job.Type, job.Type)
}

// timeText is t in RFC 3339 UTC, or "-" when absent.
func timeText(t *time.Time) string {
	return cmp.Or(optTime(t), "-")
}

// zonedText is t as timeText writes it, with the time a clock in zone
// reads (inZone): what a job's schedule says.
func zonedText(t *time.Time, zone string) string {
	return cmp.Or(inZone(t, zone), "-")
}

// inZone is t as optTime writes it and, for a zone other than UTC, also
// as a clock there reads it: "2026-12-02T02:30:00Z (03:30 in Europe/Berlin)".
func inZone(t *time.Time, zone string) string {
	s := optTime(t)
	if t == nil || zone == "" || zone == "UTC" {
		return s
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return s
	}
	local := t.In(loc)
	layout := "15:04"
	if local.Second() != 0 {
		layout = "15:04:05"
	}
	if y, m, d := local.Date(); y != t.UTC().Year() || m != t.UTC().Month() || d != t.UTC().Day() {
		layout = "Mon 2 Jan " + layout
	}
	return fmt.Sprintf("%s (%s in %s)", s, local.Format(layout), zone)
}

// warnPassed warns on w when runAt, the due time given as what, had passed
// by the server's clock when job was created (or a dry run would create
// it): a year or a day mistyped makes a job due at once, not when meant.
// undo is what to do if that is not what was meant.
func warnPassed(w io.Writer, what string, runAt *time.Time, job db.Job, undo string) {
	if runAt == nil || !runAt.Before(job.CreatedAt) {
		return
	}
	fmt.Fprintf(w, "warning: %s %s has passed (the server's time is %s): the job is due at once; %s if that is not what you meant\n",
		what, optTime(runAt), optTime(&job.CreatedAt), undo)
}

// optTime is t in RFC 3339 UTC, or "" when absent.
func optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine makes s fit a table cell: its first line, at most n runes.
func oneLine(s string, n int) string {
	s, _, more := strings.Cut(strings.TrimSpace(s), "\n")
	if more {
		s += "…"
	}
	return cmp.Or(clip.Runes(s, n), "-")
}

// rawText is the JSON text raw as people read it: compact, with &, < and >
// as they are; "" for none, and raw itself when it is not JSON.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	b, err := wire.Marshal(raw)
	if err != nil {
		return string(raw)
	}
	return string(b)
}
