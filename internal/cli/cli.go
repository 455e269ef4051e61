// Package cli is sked's command line: `sked serve`, `sked work`, the
// client commands of the API and the operator's tools, on cobra and pflag.
// Every flag is typed, most fall back to a SKED_… environment variable, and
// a command line that cannot be run exits 2 naming what is wrong.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/buildinfo"
)

// Env is what a command line runs with: its environment and where it
// writes.
type Env struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
}

// Main runs args and returns the process's exit status (see ExitCode and
// the Exit… constants). It prints the error on stderr and, when the
// command was given --json and printed nothing, as a JSON document on
// stdout (see jsonError).
func Main(ctx context.Context, args []string, env Env) int {
	stdout := &watchedWriter{w: terminalSafe(env.Stdout)}
	env.Stdout, env.Stderr = stdout, terminalSafe(env.Stderr)
	root := newRoot(env)
	err := execute(ctx, root, args)
	if err != nil {
		printError(env.Stderr, err)
		if ue := (*usageError)(nil); errors.As(err, &ue) && ue.cmd != "" {
			fmt.Fprintf(env.Stderr, "Run '%s --help' for usage.\n", ue.cmd)
		}
		if !stdout.wrote && jsonOutput(root, args) {
			if werr := printIndented(stdout, errorDocument(err)); werr != nil {
				fmt.Fprintln(env.Stderr, "sked:", werr)
			}
		}
	}
	return ExitCode(err)
}

// watchedWriter is w, noting whether anything was written to it.
type watchedWriter struct {
	w     io.Writer
	wrote bool
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.wrote = w.wrote || len(p) > 0
	return w.w.Write(p)
}

// jsonOutput reports whether the command of args, run by root, was given
// --json (as far as its flags were read).
func jsonOutput(root *cobra.Command, args []string) bool {
	cmd, _, err := root.Find(args)
	if err != nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// printError writes err to w, each of its lines after "sked: ": the errors
// of errors.Join stand on lines of their own, each said by sked.
func printError(w io.Writer, err error) {
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintln(w, "sked:", line)
	}
}

// Run runs the command line args; Main prints what it returns.
func Run(ctx context.Context, args []string, env Env) error {
	return execute(ctx, newRoot(env), args)
}

// execute runs args with root and its commands.
func execute(ctx context.Context, root *cobra.Command, args []string) error {
	// cobra adds its completion command as it runs; add it now, so that
	// its unknown shells are refused like unknown commands.
	root.InitDefaultCompletionCmd(args...)
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown shell %q: sked completion bash, zsh, fish or powershell", args[0])
			}
			return nil
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	cmd, _, err := root.Find(args)
	if len(args) > 1 && args[0] == "help" {
		// help on a command there is not: cobra prints the root's help.
		// Its help command is added as it runs; add it now to look.
		root.InitDefaultHelpCmd()
		if c, _, ferr := root.Find(args[1:]); ferr != nil || c == root {
			return &usageError{msg: fmt.Sprintf("unknown command %q: there is no help on it", args[1]), cmd: "sked"}
		}
	}
	if err != nil {
		return &usageError{msg: err.Error(), cmd: "sked"}
	}
	root.SetArgs(normalize(cmd, args))
	root.SetContext(ctx)
	cmd, err = root.ExecuteC()
	if ue := (*usageError)(nil); errors.As(err, &ue) && ue.cmd == "" {
		ue.cmd = cmd.CommandPath()
	}
	nameSources(cmd, err)
	return err
}

// nameSources adds to each usage error in err that begins with a flag whose
// value came from its SKED_… variable where it came from: "--workers 0
// (from SKED_WORKERS): must be at least 1", for a flag not on the command
// line is otherwise hard to find.
func nameSources(cmd *cobra.Command, err error) {
	if multi, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range multi.Unwrap() {
			nameSources(cmd, e)
		}
		return
	}
	ue := (*usageError)(nil)
	if !errors.As(err, &ue) {
		return
	}
	rest, ok := strings.CutPrefix(ue.msg, "--")
	if !ok {
		return
	}
	name := rest[:strings.IndexFunc(rest+" ", func(r rune) bool { return r == ' ' || r == ':' || r == '=' })]
	f := cmd.Flags().Lookup(name)
	if !fromEnv(cmd.Flags(), name) {
		return
	}
	if i := strings.Index(ue.msg, ": "); i > 0 {
		ue.msg = ue.msg[:i] + " (from " + f.Annotations[fromEnvAnnotation][0] + ")" + ue.msg[i:]
	}
}

// usageError is a command line that cannot be run as given.
type usageError struct {
	msg string
	cmd string // the command whose help to point at; "" until known
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// newRoot is the sked command and its commands.
func newRoot(env Env) *cobra.Command {
	root := bareRoot(env)
	root.AddGroup(&cobra.Group{ID: "server", Title: "Run sked:"}, &cobra.Group{ID: "client", Title: "Work with jobs (a client of the API):"},
		&cobra.Group{ID: "ops", Title: "Operate:"})
	root.SetHelpCommandGroupID("ops")
	root.SetCompletionCommandGroupID("ops")
	for _, c := range []*cobra.Command{serveCmd(env), migrateCmd(env), workCmd(env)} {
		c.GroupID = "server"
		root.AddCommand(c)
	}
	for _, c := range clientCmds(env) {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	for _, c := range root.Commands() {
		c.SuggestFor = otherCommandWords[c.Name()]
	}
	for _, c := range []*cobra.Command{versionCmd(env), backupCmd(env), healthcheckCmd(env), checkCmd(env), benchCmd(env), importCrontabCmd(env)} {
		c.GroupID = "ops"
		root.AddCommand(c)
	}
	return root
}

// otherCommandWords are words people type for sked's commands.
var otherCommandWords = map[string][]string{
	"ls": {"list"}, "add": {"create", "new", "submit"}, "show": {"get", "info", "status", "describe"},
	"runs": {"logs", "history"}, "cancel": {"rm", "delete", "remove", "kill"}, "workers": {"nodes"},
}

// bareRoot is the sked command without its commands: its help, --version,
// how flag errors are told and the SKED_… fallbacks of every command's
// flags.
func bareRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "sked",
		Short: "sked runs jobs once, on time, on some machine.",
		Long: "sked runs jobs once, on time, on some machine: one binary keeps jobs, runs and schedules in a SQLite file\n" +
			"(or PostgreSQL) and runs the HTTP API, dispatcher, workers and lease reaper in one process.\n\n" +
			"Most flags fall back to a SKED_… environment variable, named in their help.",
		Version:       buildinfo.Read().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(env.Stderr)
			cmd.Usage()
			return usagef("no command given")
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// sked ad --type x: the flags were parsed as the root's, but the
		// mistake is the command's name.
		if args := cmd.Flags().Args(); !cmd.HasParent() && len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
		return flagError(cmd, err)
	})
	// Env fallbacks are read before every command runs, so that its flags
	// hold their final values in RunE.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd, env.Getenv) }
	return root
}

func versionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, commit date and Go version (also --version)",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(env.Stdout, buildinfo.Read())
			return nil
		},
	}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: %s takes none (flag values go as --name value)", args[0], cmd.CommandPath())
	}
	return nil
}

// exactArgs wants n positional arguments, described by what.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

// envAnnotation names the SKED_… variable a flag falls back to; sepAnnotation
// how its value is split for a flag given several times ("," or " ");
// fromEnvAnnotation the variable a flag's value was read from, when it was.
const (
	envAnnotation     = "sked_env"
	sepAnnotation     = "sked_env_sep"
	fromEnvAnnotation = "sked_from_env"
)

// envName is the variable flag name falls back to: SKED_ and the name in
// upper case with underscores.
func envName(name string) string {
	return "SKED_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// withEnv makes each named flag of fs fall back to its SKED_… variable and
// says so in its help.
func withEnv(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			panic("cli: withEnv of unknown flag " + n)
		}
		_ = fs.SetAnnotation(n, envAnnotation, []string{envName(n)})
		f.Usage += " (" + envName(n) + ")"
	}
}

// fromEnv reports whether flag name's value was read from its SKED_…
// variable, not given on the command line.
func fromEnv(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && len(f.Annotations[fromEnvAnnotation]) > 0
}

// splitEnv says that the SKED_… variable of flag name, which may be given
// several times, holds several values separated by sep.
func splitEnv(fs *pflag.FlagSet, name, sep string) {
	_ = fs.SetAnnotation(name, sepAnnotation, []string{sep})
	f := fs.Lookup(name)
	what := "comma-separated"
	if sep == " " {
		what = "space-separated"
	}
	f.Usage = strings.TrimSuffix(f.Usage, ")") + ", " + what + ")"
}

// applyEnv sets each flag of cmd that the command line left out from its
// SKED_… variable, when that is set. A bad value is a usage error naming
// the variable.
func applyEnv(cmd *cobra.Command, getenv func(string) string) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		names := f.Annotations[envAnnotation]
		if f.Changed || len(names) == 0 {
			return
		}
		v := getenv(names[0])
		if v == "" {
			return
		}
		var err error
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			var parts []string
			if sep := f.Annotations[sepAnnotation]; len(sep) > 0 && sep[0] == " " {
				parts = strings.Fields(v)
			} else {
				parts = strings.Split(v, ",")
			}
			err = sv.Replace(parts)
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			errs = append(errs, usagef("%s=%q (for --%s): %s", names[0], v, f.Name, valueHint(f, v, err)))
			return
		}
		f.Changed = true // given, if not on the command line
		_ = cmd.Flags().SetAnnotation(f.Name, fromEnvAnnotation, names[:1])
	})
	return errors.Join(errs...)
}

// flagError rewrites pflag's errors into usage errors that name the flag
// and say what to give.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return usagef("--%s %q: %s", iv.GetFlag().Name, iv.GetValue(), valueHint(iv.GetFlag(), iv.GetValue(), iv.Unwrap()))
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if why := editCannot[ne.GetSpecifiedName()]; cmd.Name() == "edit" && why != "" {
			return usagef("%s: %s; cancel the job and add it again (sked cancel ID|NAME, then sked add)", err, why)
		}
		if near := nearFlag(cmd, ne.GetSpecifiedName()); len(ne.GetSpecifiedName()) > 1 && near != "" {
			return usagef("%s; did you mean --%s?", err, near)
		}
		if eg := commandAfterDash(cmd); eg != "" {
			return usagef("%s; a command and its own flags go after --, as in %s", err, eg)
		}
	}
	return &usageError{msg: err.Error()}
}

// commandAfterDash is an example of cmd given a command after --, when cmd
// takes one (sked add --exec, sked work): an unknown flag is then most
// likely the command's own, given without the --; "" otherwise.
func commandAfterDash(cmd *cobra.Command) string {
	switch {
	case cmd.Name() == "add" && cmd.Flags().Changed("exec"):
		return "sked add --exec -- sh -c 'date'"
	case cmd.Name() == "work":
		return "sked work --type thumbnail -- ./thumb.sh --fast"
	}
	return ""
}

// unknownCommand refuses name, not a command of root, naming the nearest
// commands when there are some.
func unknownCommand(root *cobra.Command, name string) error {
	if near := nearCommands(root, name); len(near) > 0 {
		return usagef("unknown command %q; did you mean %s?", name, strings.Join(near, " or "))
	}
	return usagef("unknown command %q", name)
}

// nearCommands are the commands of root nearest to name: those it begins
// or that name as another word for them (SuggestFor, such as list for ls),
// else those within two edits of it, the nearest only.
func nearCommands(root *cobra.Command, name string) []string {
	name = strings.ToLower(name)
	var near []string
	best := 3
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		d := levenshtein.ComputeDistance(name, c.Name())
		if strings.HasPrefix(c.Name(), name) || slices.Contains(c.SuggestFor, name) {
			d = 0
		}
		switch {
		case d < best:
			near, best = []string{c.Name()}, d
		case d == best:
			near = append(near, c.Name())
		}
	}
	return near
}

// editCannot are flags of sked add that sked edit lacks, for what a job
// cannot change (the API refuses it), and why.
var editCannot = map[string]string{
	"at":   "a one-off job's due time cannot change",
	"in":   "a one-off job's due time cannot change",
	"type": "a job's type cannot change",
	"exec": "a job's type cannot change",
	"url":  "a job's type cannot change (an http job's URL is in its --payload)",
}

// otherFlagWords are names people give for flags of sked's commands.
var otherFlagWords = map[string]string{
	"cron": "schedule", "every": "schedule", "retries": "max-attempts", "attempts": "max-attempts",
	"timezone": "tz", "zone": "tz", "delay": "in", "after": "in", "command": "exec", "cmd": "exec",
	"port": "addr", "listen": "addr", "bind": "addr", "database": "db", "concurrency": "workers", "workers": "concurrency",
	"http": "url", "webhook": "url", "server": "addr",
}

// nearFlag is the flag of cmd whose name is nearest to name, a flag it
// does not have, within two edits, or that name is another word for; ""
// when none is.
func nearFlag(cmd *cobra.Command, name string) string {
	if f := otherFlagWords[name]; f != "" && cmd.Flags().Lookup(f) != nil {
		return f
	}
	best, bestDist := "", 3
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if d := levenshtein.ComputeDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// valueHint says what a flag of f's type takes, after err from setting it
// to value. A value of the type that the flag refuses for a reason of its
// own (a duration that must not be negative) is told that reason.
func valueHint(f *pflag.Flag, value string, err error) string {
	switch f.Value.Type() {
	case "int", "int64":
		return "give a whole number, such as 4"
	case "duration":
		if _, parseErr := time.ParseDuration(value); parseErr == nil {
			return err.Error()
		}
		return "give a duration such as 30s, 1m30s or 2h" + db.DaysHint(value)
	case "bool":
		return "give true or false"
	}
	return err.Error()
}

// rfc3339Value is the value of a flag that takes a time, such as --at and
// --until: RFC 3339, the zero time until given.
type rfc3339Value time.Time

func (t *rfc3339Value) Set(v string) error {
	for _, layout := range timeLayouts {
		// RFC 3339 lets the T and Z be lower case, and the T a space.
		if tt, err := time.Parse(layout, strings.ToUpper(v)); err == nil {
			*t = rfc3339Value(tt)
			return nil
		}
	}
	return errors.New("give an RFC 3339 time such as 2026-12-01T06:00:00Z" + offsetHint(v))
}

// timeLayouts are the forms of a time flag's value: RFC 3339 (a space for
// the T, as date --rfc-3339 writes it), and its offset without the colon,
// as date +%z writes it.
var timeLayouts = []string{time.RFC3339, "2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z0700", "2006-01-02 15:04:05Z0700"}

// offsetHint is, for a date and time written without a zone offset, or
// a date alone, what to add to it; "" for anything else.
func offsetHint(v string) string {
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		at := d.Format("2006-01-02T15:04:05")
		return fmt.Sprintf(" (%q is a date alone: add the time of day and its zone offset, such as %sZ for midnight UTC)", v, at)
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if tt, err := time.Parse(layout, v); err == nil {
			at := tt.Format("2006-01-02T15:04:05")
			return fmt.Sprintf(" (%q has no zone offset: write %sZ for UTC, or with your offset, such as %s+01:00)", v, at, at)
		}
	}
	return ""
}

// laterValue is the value of a flag that takes a time to come, such as
// --until: an RFC 3339 time, or a duration from the server's now ("2h";
// see resolve).
type laterValue struct {
	rfc3339Value
	in time.Duration // given as a duration
}

func (t *laterValue) Set(v string) error {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		t.in = d
		return nil
	}
	t.in = 0
	if t.rfc3339Value.Set(v) != nil {
		return errors.New("give an RFC 3339 time such as 2026-12-01T06:00:00Z, or a duration from now such as 2h" + offsetHint(v) + db.DaysHint(v))
	}
	return nil
}

func (t *rfc3339Value) String() string {
	if time.Time(*t).IsZero() {
		return ""
	}
	return time.Time(*t).Format(time.RFC3339)
}

func (t *rfc3339Value) Type() string { return "time" }

// normalize rewrites args for cmd's flags, before pflag reads them:
// "-name" becomes "--name" for a long flag (as Go's flag package read them),
// and a flag whose value is optional ("--enable-exec", "--test-clock") takes
// its value from the next argument when that is one it accepts
// ("--enable-exec false") or, for a time, any that is not a flag
// ("--test-clock 2026-03-08T06:00:00Z").
func normalize(cmd *cobra.Command, args []string) []string {
	fs := cmd.Flags()
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && fs.Lookup(strings.SplitN(a[1:], "=", 2)[0]) != nil {
			a = "-" + a
		}
		if name, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(name, "=") && i+1 < len(args) {
			if f := fs.Lookup(name); f != nil && f.NoOptDefVal != "" && optionalValue(f, args[i+1]) {
				a, i = a+"="+args[i+1], i+1
			}
		}
		out = append(out, a)
	}
	return out
}

// optionalValue reports whether v, after a flag f whose value may be left
// out, is its value rather than the next argument.
func optionalValue(f *pflag.Flag, v string) bool {
	if v == "true" || v == "false" {
		return true
	}
	// A time flag's next argument is its value unless it is a flag: a
	// mistyped time is then refused as the flag's, not as an argument the
	// command does not take.
	return f.Value.Type() == "time" && !strings.HasPrefix(v, "-")
}
