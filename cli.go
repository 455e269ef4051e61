package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	skedapi "github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
)

// DefaultServer is the API the client commands talk to when neither
// --server nor SKED_SERVER says otherwise: the one `sked serve` starts.
const DefaultServer = "http://127.0.0.1:8080"

// showRuns is how many runs `sked show` lists under the job.
const showRuns = 10

// clientUsage is the help of the client commands.
const clientUsage = `Client commands (each takes --server URL, default $SKED_SERVER or ` + DefaultServer + `,
--token T, default $SKED_TOKEN, and --json for machine output):
  sked add --type T [--payload JSON|@FILE] [--at RFC3339 | --in 10m | --schedule CRON [--tz ZONE]]
           [--max-attempts N] [--timeout D] [--backoff D] [--jitter D] [--key IDEMPOTENCY]
           [--overlap skip|queue_one] [--misfire run_once|skip|run_all]
           [--expect-success-within D]
  sked add --exec [flags] -- CMD ARGS…     an exec job running CMD
  sked add --url URL [flags]               an http job POSTing --payload (as its body) to URL
  sked ls [--state S] [--type T] [--limit N] [--cursor C] [--all]
  sked show ID                             the job and its last runs
  sked runs ID [--limit N] [--all]
  sked cancel ID | pause ID [--reason TEXT] [--until RFC3339] | resume ID | retry ID
  sked trigger ID | skip ID | cancel-run ID
  sked backfill ID --from RFC3339 --to RFC3339`

// usageError is a command line that cannot be run as given. sked exits 2 on
// one, 1 on any other error.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitCode is the process status for err: 2 for usage errors, 1 otherwise.
func exitCode(err error) int {
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return 2
	}
	return 1
}

// cli is one client command: its flags, the API client and where it writes.
type cli struct {
	fs     *flag.FlagSet
	api    *skedapi.Client
	json   bool
	stdout io.Writer

	reason, until, from, to string // pause and backfill flags
}

// newCLI declares the flags every client command has on a new flag set.
func newCLI(name string, getenv func(string) string, stdout, stderr io.Writer) (*cli, *string, *string) {
	c := &cli{fs: flag.NewFlagSet("sked "+name, flag.ContinueOnError), stdout: stdout}
	c.fs.SetOutput(stderr)
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nFlags of %s:\n", clientUsage, c.fs.Name())
		c.fs.PrintDefaults()
	}
	server := c.fs.String("server", cmp.Or(getenv("SKED_SERVER"), DefaultServer), "sked API URL (SKED_SERVER)")
	token := c.fs.String("token", getenv("SKED_TOKEN"), "bearer token (SKED_TOKEN)")
	c.fs.BoolVar(&c.json, "json", false, "print JSON instead of tables")
	switch name {
	case "pause":
		c.fs.StringVar(&c.reason, "reason", "", "why the job is paused, shown on it")
		c.fs.StringVar(&c.until, "until", "", "resume by itself at this RFC 3339 time")
	case "backfill":
		c.fs.StringVar(&c.from, "from", "", "first slot time of the range, RFC 3339")
		c.fs.StringVar(&c.to, "to", "", "last slot time of the range, RFC 3339")
	}
	return c, server, token
}

// parse reads args, flags and positional arguments in any order, and
// returns the positional ones; everything after "--" is returned as tail.
func (c *cli) parse(args []string, server, token *string) (pos, tail []string, err error) {
	if i := indexOf(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, &usageError{err.Error()}
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	u, err := url.Parse(*server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, usagef("--server %q is not an http:// or https:// URL", *server)
	}
	c.api = &skedapi.Client{BaseURL: strings.TrimRight(*server, "/"), Token: *token}
	return pos, tail, nil
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

// runClient runs the client command cmd with args.
func runClient(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, server, token := newCLI(cmd, getenv, stdout, stderr)
	var err error
	switch cmd {
	case "add":
		err = c.add(ctx, args, server, token)
	case "ls":
		err = c.ls(ctx, args, server, token)
	case "runs":
		err = c.runs(ctx, args, server, token)
	default: // show, cancel, pause, resume, retry: one job id
		err = c.oneJob(ctx, cmd, args, server, token)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return apiError(err, *server)
}

// apiError rewrites errors of reaching the server into what to do about
// them; the server's own problems (with their detail) pass as they are.
func apiError(err error, server string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot connect to %s: connection refused; is sked serve running at %s? start it with `sked serve` or pass --server", server, server)
	}
	if ae := (*skedapi.Error)(nil); errors.As(err, &ae) && ae.Detail != "" {
		return fmt.Errorf("%s (%d %s)", ae.Detail, ae.Status, http.StatusText(ae.Status))
	}
	return err
}

// add creates a job.
func (c *cli) add(ctx context.Context, args []string, server, token *string) error {
	var (
		req                   skedapi.JobCreateRequest
		payload, at, schedule string
		execJob               bool
		target, tz            string
		in, timeout           time.Duration
		backoff, jitter       time.Duration
		expect                time.Duration
	)
	c.fs.StringVar(&req.Type, "type", "", "job type: http, exec or a handler's name")
	c.fs.StringVar(&payload, "payload", "", "payload JSON, or @FILE to read it from a file")
	c.fs.StringVar(&at, "at", "", "one-off: run at this RFC 3339 time")
	c.fs.DurationVar(&in, "in", 0, "one-off: run after this duration, e.g. 10m")
	c.fs.StringVar(&schedule, "schedule", "", "recurring: cron expression, e.g. '30 2 * * 1-5' or '@every 90s'")
	c.fs.StringVar(&tz, "tz", "", "recurring: IANA time zone of the schedule (default UTC)")
	c.fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts before the job goes dead (server default 5)")
	c.fs.DurationVar(&timeout, "timeout", 0, "limit of one attempt (server default 1h)")
	c.fs.DurationVar(&backoff, "backoff", 0, "first retry delay, doubled per attempt (server default 1s)")
	c.fs.DurationVar(&jitter, "jitter", 0, "recurring: spread the slots by a fixed offset inside this window")
	c.fs.DurationVar(&expect, "expect-success-within", 0, "recurring: mark the job quiet when no run succeeded for this long")
	c.fs.StringVar(&req.IdempotencyKey, "key", "", "idempotency key: a second add with it returns the first job")
	c.fs.StringVar(&req.Overlap, "overlap", "", "recurring: skip or queue_one")
	c.fs.StringVar(&req.Misfire, "misfire", "", "recurring: run_once, skip or run_all")
	c.fs.BoolVar(&execJob, "exec", false, "an exec job running the command after --")
	c.fs.StringVar(&target, "url", "", "an http job POSTing to this URL (--payload is the body)")
	pos, command, err := c.parse(args, server, token)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q; a command for --exec goes after --", pos[0])
	}
	req.Timeout, req.Backoff, req.Jitter = db.Duration(timeout), db.Duration(backoff), db.Duration(jitter)
	req.ExpectSuccessWithin = db.Duration(expect)

	var body json.RawMessage
	if payload != "" {
		if body, err = readPayload(payload); err != nil {
			return err
		}
	}
	switch {
	case execJob && target != "":
		return usagef("--exec and --url cannot be used together")
	case execJob:
		if len(command) == 0 {
			return usagef("--exec needs a command after --, e.g. sked add --exec -- sh -c 'date'")
		}
		if payload != "" {
			return usagef("--exec builds the payload from the command; leave out --payload")
		}
		body, _ = json.Marshal(map[string][]string{"command": command})
		req.Type, err = impliedType(req.Type, "exec", "--exec")
	case target != "":
		p := map[string]any{"url": target}
		if body != nil {
			p["body"] = body
		}
		body, _ = json.Marshal(p)
		req.Type, err = impliedType(req.Type, "http", "--url")
	case req.Type == "":
		return usagef("--type is required (or --exec -- CMD, or --url URL)")
	}
	if err != nil {
		return err
	}
	if len(command) > 0 && !execJob {
		return usagef("arguments after -- are a command for --exec; add --exec")
	}
	req.Payload = body

	given := 0
	for _, s := range []bool{at != "", in != 0, schedule != ""} {
		if s {
			given++
		}
	}
	if given > 1 {
		return usagef("give one of --at, --in and --schedule")
	}
	switch {
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return usagef("--at %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z", at)
		}
		req.RunAt = &t
	case in < 0:
		return usagef("--in %s must not be negative", in)
	case in > 0:
		t := time.Now().Add(in).UTC().Truncate(time.Millisecond)
		req.RunAt = &t
	}
	if tz != "" && schedule == "" {
		return usagef("--tz is the time zone of a --schedule; add --schedule")
	}
	req.Schedule, req.Timezone = schedule, tz

	job, created, err := c.api.JobCreate(ctx, req)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(job)
	}
	if !created {
		fmt.Fprintf(c.stdout, "job %s already exists for key %q (%s); nothing created\n", job.ID, job.IdempotencyKey, job.State)
		return nil
	}
	fmt.Fprintf(c.stdout, "created job %s (%s, %s, next run %s)\n", job.ID, job.Type, job.State, timeText(job.NextRunAt))
	return nil
}

// impliedType is the type --exec or --url imply, refusing a --type that
// says otherwise.
func impliedType(given, implied, flagName string) (string, error) {
	if given != "" && given != implied {
		return "", usagef("%s makes a %s job; --type %s contradicts it", flagName, implied, given)
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
		return nil, usagef("--payload is not valid JSON: %.80s", strings.TrimSpace(string(b)))
	}
	return b, nil
}

// ls lists jobs.
func (c *cli) ls(ctx context.Context, args []string, server, token *string) error {
	var (
		p   db.JobListParams
		all bool
	)
	c.fs.Func("state", "only jobs in this state: ready, running, done, dead, cancelled, paused", func(s string) error {
		p.State = db.JobState(s)
		return nil
	})
	c.fs.StringVar(&p.Type, "type", "", "only jobs of this type")
	c.fs.IntVar(&p.Limit, "limit", 0, "jobs per page (server default 50, at most 500)")
	c.fs.StringVar(&p.Cursor, "cursor", "", "start at this page (the nextCursor of the previous one)")
	c.fs.BoolVar(&all, "all", false, "follow the cursors to the last page")
	if err := c.noArgs(args, server, token); err != nil {
		return err
	}
	jobs, next, err := pages(p.Cursor, all, func(cursor string) ([]db.Job, string, error) {
		p.Cursor = cursor
		return c.api.JobList(ctx, p)
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			Jobs       []db.Job `json:"jobs"`
			NextCursor string   `json:"nextCursor,omitempty"`
		}{append([]db.Job{}, jobs...), next})
	}
	tw := table(c.stdout, "ID", "TYPE", "STATE", "SCHEDULE", "NEXT RUN", "ATTEMPT", "LAST ERROR")
	for _, j := range jobs {
		row(tw, j.ID, j.Type, string(j.State), cmp.Or(j.Schedule, "-"), timeText(j.NextRunAt),
			fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), oneLine(j.LastError, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "more: sked ls --cursor %s (or --all)\n", next)
	}
	return nil
}

// noArgs parses flags and refuses positional arguments.
func (c *cli) noArgs(args []string, server, token *string) error {
	pos, tail, err := c.parse(args, server, token)
	if err == nil && len(pos)+len(tail) > 0 {
		err = usagef("unexpected argument %q", append(pos, tail...)[0])
	}
	return err
}

// jobID parses flags and returns the one job id among args.
func (c *cli) jobID(args []string, server, token *string) (string, error) {
	pos, tail, err := c.parse(args, server, token)
	switch {
	case err != nil:
		return "", err
	case len(pos) != 1 || len(tail) > 0:
		return "", usagef("%s takes one job id", c.fs.Name())
	}
	return pos[0], nil
}

// runs lists a job's runs.
func (c *cli) runs(ctx context.Context, args []string, server, token *string) error {
	var all bool
	p := db.RunListParams{}
	c.fs.IntVar(&p.Limit, "limit", 0, "runs per page (server default 50, at most 500)")
	c.fs.BoolVar(&all, "all", false, "every run, not only the newest page")
	id, err := c.jobID(args, server, token)
	if err != nil {
		return err
	}
	p.JobID = id
	runs, _, err := pages(0, all, func(cursor int64) ([]db.Run, int64, error) {
		p.Cursor = cursor
		return c.api.RunList(ctx, p)
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(append([]db.Run{}, runs...))
	}
	return c.runTable(runs)
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

// runTable prints runs, newest first, as a table.
func (c *cli) runTable(runs []db.Run) error {
	tw := table(c.stdout, "RUN", "ATTEMPT", "SLOT", "WORKER", "STARTED", "DURATION", "OUTCOME", "ERROR")
	for _, r := range runs {
		outcome := string(r.Outcome)
		if r.Reason != "" {
			outcome += " (" + r.Reason + ")"
		}
		if r.GaveUp {
			outcome += ", gave up"
		}
		dur := "-"
		if r.StartedAt != nil && r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(*r.StartedAt).Round(time.Millisecond).String()
		}
		row(tw, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.Attempt), timeText(r.Slot), cmp.Or(r.WorkerID, "-"),
			timeText(r.StartedAt), dur, outcome, oneLine(r.Error, 60))
	}
	return tw.Flush()
}

// oneJob runs a command on one job id: show, cancel, pause, resume, retry,
// trigger, skip, cancel-run, backfill.
func (c *cli) oneJob(ctx context.Context, cmd string, args []string, server, token *string) error {
	id, err := c.jobID(args, server, token)
	if err != nil {
		return err
	}
	var (
		job  db.Job
		verb string
	)
	switch cmd {
	case "show":
		return c.show(ctx, id)
	case "cancel":
		if err := c.api.JobCancel(ctx, id); err != nil {
			return err
		}
		job, verb = db.Job{ID: id, State: db.StateCancelled}, "cancelled"
	case "pause":
		var until time.Time
		if c.until != "" {
			if until, err = time.Parse(time.RFC3339, c.until); err != nil {
				return usagef("--until %q is not an RFC 3339 time such as 2026-12-01T06:00:00Z", c.until)
			}
		}
		if c.reason != "" || !until.IsZero() {
			job, err = c.api.JobPauseUntil(ctx, id, c.reason, until)
		} else {
			job, err = c.api.JobPause(ctx, id)
		}
		verb = "paused"
	case "trigger":
		job, err = c.api.JobTrigger(ctx, id)
		verb = "triggered"
	case "skip":
		job, err = c.api.JobSkip(ctx, id)
		verb = "skipped the next slot of"
	case "cancel-run":
		job, err = c.api.JobCancelRun(ctx, id)
		verb = "asked the run to stop of"
	case "backfill":
		return c.backfill(ctx, id)
	case "resume":
		job, err = c.api.JobResume(ctx, id)
		verb = "resumed"
	case "retry":
		job, err = c.api.JobRetry(ctx, id)
		verb = "retried"
	default:
		panic("sked: oneJob called with " + cmd)
	}
	switch {
	case err != nil:
		return err
	case c.json && cmd == "cancel":
		return c.printJSON(map[string]string{"jobId": id, "state": string(db.StateCancelled)})
	case c.json:
		return c.printJSON(job)
	}
	fmt.Fprintf(c.stdout, "%s job %s (now %s", verb, id, job.State)
	if job.NextRunAt != nil {
		fmt.Fprintf(c.stdout, ", next run %s", timeText(job.NextRunAt))
	}
	fmt.Fprintln(c.stdout, ")")
	return nil
}

// backfill runs each past slot of a schedule in --from..--to once.
func (c *cli) backfill(ctx context.Context, id string) error {
	var from, to time.Time
	for _, f := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", c.from, &from}, {"to", c.to, &to}} {
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			return usagef("--%s %q: give an RFC 3339 time such as 2026-12-01T06:00:00Z", f.name, f.v)
		}
		*f.dst = t
	}
	b, err := c.api.JobBackfill(ctx, id, from, to)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(b)
	}
	fmt.Fprintf(c.stdout, "backfill of %s: %d slots, %d jobs created, %d in all\n", id, b.Slots, b.Created, len(b.JobIDs))
	for _, jid := range b.JobIDs {
		fmt.Fprintln(c.stdout, jid)
	}
	return nil
}

// show prints a job and its newest runs.
func (c *cli) show(ctx context.Context, id string) error {
	job, err := c.api.JobGet(ctx, id)
	if err != nil {
		return err
	}
	runs, _, err := c.api.RunList(ctx, db.RunListParams{JobID: id, Limit: showRuns})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			Job  db.Job   `json:"job"`
			Runs []db.Run `json:"runs"`
		}{job, append([]db.Run{}, runs...)})
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, value)
		}
	}
	field("ID", job.ID)
	field("Type", job.Type)
	field("State", string(job.State))
	if job.Recurring() {
		field("Schedule", job.Schedule+" ("+cmp.Or(job.Timezone, "UTC")+")")
		field("Overlap", job.Overlap)
		field("Misfire", job.Misfire)
		field("Missed slots", strconv.FormatInt(job.MissedSlots, 10))
	}
	field("Next run", optTime(job.NextRunAt))
	field("Attempt", fmt.Sprintf("%d of %d", job.Attempt, job.MaxAttempts))
	field("Timeout", time.Duration(job.Timeout).String())
	field("Backoff", time.Duration(job.Backoff).String())
	if job.LeaseOwner != "" {
		field("Held by", fmt.Sprintf("%s until %s (generation %d)", job.LeaseOwner, timeText(job.LeaseUntil), job.LeaseGeneration))
	}
	field("Idempotency key", job.IdempotencyKey)
	field("Payload", string(job.Payload))
	field("Last error", job.LastError)
	field("Created", job.CreatedAt.Format(time.RFC3339))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	if len(runs) == 0 {
		fmt.Fprintln(c.stdout, "no runs yet")
		return nil
	}
	fmt.Fprintf(c.stdout, "Last runs (newest first; all of them: sked runs %s --all):\n", job.ID)
	return c.runTable(runs)
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
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

// timeText is t in RFC 3339 UTC, or "-" when absent.
func timeText(t *time.Time) string {
	return cmp.Or(optTime(t), "-")
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
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return cmp.Or(s, "-")
}
