package cli

import (
	"bufio"
	"cmp"
	"encoding/json"
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
		tz     string
		system bool
	)
	cmd := &cobra.Command{
		Use:   "import-crontab [FILE]",
		Short: "Write a crontab's lines as a file sked apply takes (YAML), to review and apply",
		Long: "sked import-crontab reads a crontab (FILE, or standard input; crontab -l's output) and writes its lines as the\n" +
			"YAML list of exec jobs sked apply reads: each line's command runs through the crontab's SHELL (sh) with -c, as\n" +
			"cron runs it, on the same schedule, with the crontab's variables (PATH, say) in its environment and its\n" +
			"CRON_TZ or TZ (or --tz) as the zone; each job is named after its command. It writes nothing to a server: read the\n" +
			"file, then sked apply -f it. What does not carry over (@reboot, MAILTO, a % in a command, a line that is not a\n" +
			"schedule) is said on standard error, by line.",
		Example: "  crontab -l | sked import-crontab --tz Europe/Berlin > schedules.yaml\n  sked apply -f schedules.yaml --dry-run",
		Args:    maxArgs(1, "at most one FILE (or none: standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, name := io.Reader(os.Stdin), "standard input"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("read the crontab: %w", err)
				}
				defer f.Close()
				in, name = f, args[0]
			}
			reqs, notes, err := importCrontab(in, tz, system)
			if err != nil {
				return fmt.Errorf("read the crontab %s: %w", name, err)
			}
			for _, n := range notes {
				fmt.Fprintf(env.Stderr, "%s: %s\n", name, n)
			}
			if len(reqs) == 0 {
				return fmt.Errorf("the crontab %s holds no line sked can run", name)
			}
			return writeYAML(env.Stdout, reqs)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&tz, "tz", "", "IANA time zone of the schedules, until a CRON_TZ line says another (default UTC)")
	fs.BoolVar(&system, "system", false, "the crontab is a system one (/etc/crontab, /etc/cron.d/*): a user field before each command")
	withEnv(fs, "tz")
	return cmd
}

// crontabVar is a crontab line that sets a variable: NAME=value, with
// spaces around = and quotes around the value allowed.
var crontabVar = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$`)

// importCrontab reads a crontab and returns its schedule lines as exec
// jobs, and notes on what did not carry over, each naming its line. tz is
// the zone until a CRON_TZ (or TZ) line names another; system says that a
// user field comes before each command (it is dropped: sked runs commands
// as its own user).
func importCrontab(r io.Reader, tz string, system bool) ([]wire.JobCreateRequest, []string, error) {
	var (
		reqs  []wire.JobCreateRequest
		notes []string
		env   = map[string]string{}
		shell = "/bin/sh"
		names = map[string]int{}
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
			user, command, _ := strings.Cut(rest, " ")
			note("runs as %s in cron; sked runs it as the user sked runs as", user)
			rest = strings.TrimSpace(command)
		} else if first, _, _ := strings.Cut(rest, " "); isUserNotProgram(first) {
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
		reqs = append(reqs, wire.JobCreateRequest{Name: cronJobName(rest, names), Type: "exec", Schedule: spec, Timezone: tz, Payload: b})
	}
	return reqs, notes, sc.Err()
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

// cronJobName names the job of command after its program ("backup" for
// "/usr/local/bin/backup.sh --full", "report" for "DIR=/b report.py"), with -2, -3… for a name taken
// already (counted in taken), or "cron" when the program's name is no
// job name.
func cronJobName(command string, taken map[string]int) string {
	words := strings.Fields(command)
	for len(words) > 1 && shellVar.MatchString(words[0]) {
		words = words[1:] // NAME=value before the program
	}
	prog := filepath.Base(words[0])
	base := strings.ToLower(strings.TrimSuffix(prog, filepath.Ext(prog)))
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, base)
	if base == "" || db.CheckName(base) != nil {
		base = "cron"
	}
	taken[base]++
	if n := taken[base]; n > 1 {
		return base + "-" + strconv.Itoa(n)
	}
	return base
}

// unquote strips one pair of matching quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
