package cli

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
	"github.com/sked-dev/sked/wire"
)

func importCrontabCmd(env Env) *cobra.Command {
	var (
		tz, prefix string
		system     bool
	)
	cmd := &cobra.Command{
		Use:   "import-crontab [FILE…]",
		Short: "Write a crontab's lines as a file sked apply takes (YAML), to review and apply",
		Long: "sked import-crontab reads crontabs (each FILE, or standard input: crontab -l's output) and writes their lines as\n" +
			"the YAML list of exec jobs sked apply reads: each line's command runs through its crontab's SHELL (sh) with -c, as\n" +
			"cron runs it, on the same schedule, with the crontab's variables (PATH, say) in its environment and its\n" +
			"CRON_TZ or TZ (or --tz) as the zone; each job is named after its command, uniquely across the files. Each FILE\n" +
			"is a crontab of its own, as cron reads them (/etc/cron.d/*). It writes nothing to a server: read the file, then\n" +
			"sked apply -f it. What does not carry over (@reboot, MAILTO, a % in a command, a line that is not a schedule)\n" +
			"is said on standard error, by file and line.\n\n" +
			"sked apply gives each name its definition: the same crontab imported and applied again changes nothing and\n" +
			"makes no second job. A name the server has already is that job, changed to the line's (or refused, for a job\n" +
			"of another type, with nothing written): --name-prefix keeps the jobs of crontabs imported apart (two users'\n" +
			"backup) and those made by hand apart; see the plan with sked apply --dry-run first.",
		Example: "  crontab -l | sked import-crontab --tz Europe/Berlin > schedules.yaml\n" +
			"  crontab -l -u alice | sked import-crontab --name-prefix alice- > alice.yaml\n" +
			"  sked import-crontab --system /etc/crontab /etc/cron.d/* > system.yaml\n" +
			"  sked apply -f schedules.yaml --dry-run",
		RunE: func(cmd *cobra.Command, files []string) error {
			if len(files) == 0 {
				files = []string{"-"}
			}
			stdin := 0
			for _, f := range files {
				if f == "-" {
					stdin++
				}
			}
			if stdin > 1 {
				return usagef("- (standard input) is given %d times: it can be read once", stdin)
			}
			if prefix != "" {
				// The shortest name it may begin: the rules of names say
				// what is wrong with the prefix, before any job is named.
				if err := db.CheckName(prefix + "cron"); err != nil {
					return usagef("--name-prefix %q cannot begin a job's name (give one such as alice-): %v", prefix, err)
				}
			}
			var (
				reqs  []wire.JobCreateRequest
				names = &cronNames{prefix: prefix} // unique across the files
			)
			for _, file := range files {
				r, err := importCrontabFile(env, file, tz, system, names)
				if err != nil {
					return err
				}
				reqs = append(reqs, r...)
			}
			if len(reqs) == 0 {
				for i, f := range files {
					files[i] = crontabName(f)
				}
				return fmt.Errorf("no line sked can run in %s", strings.Join(files, ", "))
			}
			return writeYAML(env.Stdout, reqs)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tz, "tz", "", "IANA time zone of the schedules, until a CRON_TZ line says another (default UTC)")
	fs.StringVar(&prefix, "name-prefix", "", "put this before each job's name (such as alice-), apart from the server's other jobs")
	fs.BoolVar(&system, "system", false, "the crontabs are system ones (/etc/crontab, /etc/cron.d/*): a user field before each command")
	withEnv(fs, "tz")
	return cmd
}

// importCrontabFile reads the crontab file ("-": standard input) with
// importCrontab, its jobs named by names, and says its
// notes on stderr, each after the file's name.
func importCrontabFile(env Env, file, tz string, system bool, names *cronNames) ([]wire.JobCreateRequest, error) {
	in, name := io.Reader(os.Stdin), crontabName(file)
	switch {
	case file == "-" && isTerminal(os.Stdin):
		return nil, usagef("no crontab given, and standard input is a terminal: give its FILE, or pipe it in: crontab -l | sked import-crontab")
	case file != "-":
		f, err := os.Open(file)
		if err != nil {
			return nil, openCrontabError(file, err)
		}
		defer f.Close()
		in = f
	}
	reqs, notes, err := importCrontab(in, tz, system, names)
	if err != nil {
		return nil, fmt.Errorf("read the crontab %s: %w", name, err)
	}
	for _, n := range notes {
		fmt.Fprintf(env.Stderr, "%s: %s\n", name, n)
	}
	return reqs, nil
}

// crontabName is how messages name the crontab file: "-" is standard
// input.
func crontabName(file string) string {
	if file == "-" {
		return "standard input"
	}
	return file
}

// openCrontabError is the error of opening the crontab file: one that
// does not exist is a usage error saying how to give a crontab, naming
// the crontab -u to pipe when file is a user's name (as crontab -u takes
// one), not a file.
func openCrontabError(file string, err error) error {
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the crontab: %w", err)
	}
	if _, uerr := user.Lookup(file); uerr == nil && !strings.Contains(file, "/") {
		return usagef("%q is a user of this machine and no file here: sked import-crontab reads a crontab's text; "+
			"pipe that user's in: crontab -l -u %s | sked import-crontab", file, file)
	}
	return usagef("%s: no such file: give a crontab's FILE, or pipe one in: crontab -l | sked import-crontab", file)
}

// crontabVar is a crontab line that sets a variable: NAME=value, with
// spaces around = and quotes around the value allowed.
var crontabVar = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$`)

// importCrontab reads a crontab and returns its schedule lines as exec
// jobs, and notes on what did not carry over, each naming its line. tz is
// the zone until a CRON_TZ (or TZ) line names another; system says that a
// user field comes before each command (it is dropped: sked runs commands
// as its own user). The jobs are named by names, unique among all it
// named.
func importCrontab(r io.Reader, tz string, system bool, names *cronNames) ([]wire.JobCreateRequest, []string, error) {
	var (
		reqs  []wire.JobCreateRequest
		notes []string
		env   = map[string]string{}
		shell = "/bin/sh"
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		note := func(format string, args ...any) {
			notes = append(notes, fmt.Sprintf("line %d: ", n)+fmt.Sprintf(format, args...))
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := crontabVar.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "@") {
			name, value := m[1], unquote(strings.TrimSpace(m[2]))
			switch name {
			case "CRON_TZ", "TZ":
				if _, err := schedule.LoadLocation(value); err != nil {
					note("%s=%s: %v; the zone stays %s", name, value, err, cmp.Or(tz, "UTC"))
					continue
				}
				tz = value
			case "SHELL":
				shell = value
			case "MAILTO", "MAILFROM":
				note("%s is not carried over: sked tells of failures through its notification sinks (sked serve --notify)", name)
			default:
				env[name] = value
			}
			continue
		}
		spec, rest, ok := splitCronLine(line)
		if !ok {
			note("not a schedule, a variable or a comment; left out: %s", line)
			continue
		}
		if system {
			user, command := cutField(rest)
			if strings.Contains(user, "/") { // no user name holds one: a user's crontab
				note("%q, where a system crontab's line names its user, is a path and no user: if this is a user's crontab "+
					"(crontab -l), whose lines name none, leave out --system; left out", user)
				continue
			}
			note("runs as %s in cron; sked runs it as the user sked runs as", user)
			rest = strings.TrimSpace(command)
		} else if first, _ := cutField(rest); isUserNotProgram(first) {
			note("its command begins with %q, a user of this machine and no program: if this is a system crontab "+
				"(/etc/crontab, /etc/cron.d/*), whose lines name a user before the command, give --system", first)
		}
		if strings.EqualFold(spec, "@reboot") {
			note("@reboot is left out: sked keeps no run at a machine's start; start it from the machine's boot: %s", rest)
			continue
		}
		if _, err := schedule.Parse(spec, tz); err != nil {
			note("%v; left out", err)
			continue
		}
		if rest == "" {
			note("a schedule without a command; left out")
			continue
		}
		if unescapedPercent(rest) {
			note("its command holds a %%, which cron turns into a new line (what follows is its input) and sked does not: check the command")
		}
		payload := map[string]any{"command": []string{shell, "-c", strings.ReplaceAll(rest, `\%`, "%")}}
		if len(env) > 0 {
			payload["env"] = env
		}
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, nil, err
		}
		reqs = append(reqs, wire.JobCreateRequest{Name: names.name(rest), Type: "exec", Schedule: spec, Timezone: tz, Payload: b})
	}
	return reqs, notes, sc.Err()
}

// cutField cuts s at its first space or tab (cron's separators, which
// /etc/crontab mixes): the first field, and the rest.
func cutField(s string) (field, rest string) {
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// isUserNotProgram reports whether word names a user of this machine and
// no program on the PATH: the user field of a system crontab's line.
func isUserNotProgram(word string) bool {
	if _, err := user.Lookup(word); err != nil {
		return false
	}
	_, err := exec.LookPath(word)
	return err != nil
}

// cronLine is a crontab line of five schedule fields and a command.
var cronLine = regexp.MustCompile(`^(\S+\s+\S+\s+\S+\s+\S+\s+\S+)\s*(.*)$`)

// splitCronLine splits a crontab line into its schedule (five fields or a
// descriptor) and the rest.
func splitCronLine(line string) (spec, rest string, ok bool) {
	if strings.HasPrefix(line, "@") {
		spec = strings.Fields(line)[0]
		return spec, strings.TrimSpace(strings.TrimPrefix(line, spec)), true
	}
	m := cronLine.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return strings.Join(strings.Fields(m[1]), " "), m[2], true
}

// unescapedPercent reports whether command holds a % without a \ before it.
func unescapedPercent(command string) bool {
	for i := range len(command) {
		if command[i] == '%' && (i == 0 || command[i-1] != '\\') {
			return true
		}
	}
	return false
}

// cronNames names the jobs of crontabs imported: prefix (--name-prefix),
// then the program, unique among the names it gave.
type cronNames struct {
	prefix string
	taken  map[string]int // how many jobs each program named
}

// name names the job of command after its program ("backup" for
// "/usr/local/bin/backup.sh --full", "report" for "DIR=/b report.py",
// "sync" for "cd /srv && ./sync.sh"),
// after the prefix, with -2, -3… for a program named already, or "cron"
// when the program's name is no job name. The program's name is cut short
// where the whole would be longer than a job's name may be
// (db.MaxNameLen).
func (c *cronNames) name(command string) string {
	words := strings.Fields(command)
	for len(words) > 1 && shellVar.MatchString(words[0]) {
		words = words[1:] // NAME=value before the program
	}
	// "cd DIR && PROGRAM", "cd DIR; PROGRAM": the program, not cd, names it.
	switch {
	case len(words) > 3 && words[0] == "cd" && (words[2] == "&&" || words[2] == ";"):
		words = words[3:]
	case len(words) > 2 && words[0] == "cd" && strings.HasSuffix(words[1], ";"):
		words = words[2:]
	}
	prog := filepath.Base(words[0])
	base := strings.ToLower(strings.TrimSuffix(prog, filepath.Ext(prog)))
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, base)
	// Judged with its prefix: "batch" is a word of the API's paths, and
	// "alice-batch" a name. A program of dots alone names nothing.
	if strings.Trim(base, ".") == "" || db.CheckName(c.prefix+base[:min(len(base), max(db.MaxNameLen-len(c.prefix), 1))]) != nil {
		base = "cron"
	}
	if c.taken == nil {
		c.taken = map[string]int{}
	}
	c.taken[base]++
	suffix := ""
	if n := c.taken[base]; n > 1 {
		suffix = "-" + strconv.Itoa(n)
	}
	room := max(db.MaxNameLen-len(c.prefix)-len(suffix), 1) // the prefix leaves room for "cron" (see importCrontabCmd)
	return c.prefix + base[:min(len(base), room)] + suffix
}

// unquote strips one pair of matching quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
