package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
)

// sampleCrontab is a homelab crontab, with what cron allows and sked does
// not take as it is.
const sampleCrontab = `# m h dom mon dow command
SHELL=/bin/bash
PATH=/usr/local/bin:/usr/bin:/bin
MAILTO=me@example.com
CRON_TZ=Europe/Berlin

30 2 * * *   /usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1
0 3 * * 7    /usr/local/bin/backup.sh --prune
*/5 * * * *  curl -fsS -m 10 https://hc-ping.com/abc > /dev/null
@monthly     BACKUP_DIR=/mnt/b /usr/local/bin/report.py
@reboot      /usr/local/bin/mount-disks
0 8 * * *    date +\%F > /tmp/today
0 9 * * *    mail -s hi me%body
not a line at all
0 25 * * *   /bin/true
0 4 * * *    batch < /etc/jobs
0 5 * * *    /usr/bin/.. x
`

// TestImportCrontab: each schedule line becomes an exec job that runs the
// line through the crontab's shell, on the same schedule, in the zone of
// CRON_TZ, with the crontab's variables; what does not carry over is said
// by line; and the file applies to a server as written.
func TestImportCrontab(t *testing.T) {
	reqs, notes, err := importCrontab(strings.NewReader(sampleCrontab), "", false, &cronNames{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, schedule, command string }{
		{"backup", "30 2 * * *", "/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1"},
		{"backup-2", "0 3 * * 7", "/usr/local/bin/backup.sh --prune"},
		{"curl", "*/5 * * * *", "curl -fsS -m 10 https://hc-ping.com/abc > /dev/null"},
		{"report", "@monthly", "BACKUP_DIR=/mnt/b /usr/local/bin/report.py"},
		{"date", "0 8 * * *", "date +%F > /tmp/today"},
		{"mail", "0 9 * * *", "mail -s hi me%body"},
		{"cron", "0 4 * * *", "batch < /etc/jobs"}, // batch is a word of the API's paths
		{"cron-2", "0 5 * * *", "/usr/bin/.. x"},   // .. is a directory in a URL
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d jobs, want %d: %+v\nnotes: %q", len(reqs), len(want), reqs, notes)
	}
	for i, w := range want {
		r := reqs[i]
		command, _ := json.Marshal(w.command)
		wantPayload := `{"command":["/bin/bash","-c",` + string(command) + `],"env":{"PATH":"/usr/local/bin:/usr/bin:/bin"}}`
		if r.Name != w.name || r.Type != "exec" || r.Schedule != w.schedule || r.Timezone != "Europe/Berlin" || string(r.Payload) != wantPayload {
			t.Errorf("job %d: %s %s %s %q %s; want %s exec %s Europe/Berlin %s", i, r.Name, r.Type, r.Schedule, r.Timezone, r.Payload, w.name, w.schedule, wantPayload)
		}
	}
	for _, n := range []string{"line 4: MAILTO is not carried over", "line 11: @reboot is left out", "line 13: its command holds a %",
		`line 14: "not a line at all" is not a cron expression`, `line 15: "0 25 * * *" is not a cron expression`} {
		if !strings.Contains(strings.Join(notes, "\n"), n) {
			t.Errorf("notes %q; want %q among them", notes, n)
		}
	}

	// The file applies as written.
	path := filepath.Join(t.TempDir(), "crontab")
	if err := os.WriteFile(path, []byte(sampleCrontab), 0o644); err != nil {
		t.Fatal(err)
	}
	code, yaml, stderr := mainOf("import-crontab", path)
	if code != 0 || !strings.Contains(stderr, path+": line 11: @reboot") {
		t.Fatalf("sked import-crontab: exit %d\n%s", code, stderr)
	}
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := mainOf("apply", "-f", file, "--server", srv.URL); code != 0 {
		t.Fatalf("sked apply of the imported file: exit %d\n%s%s\n%s", code, out, stderr, yaml)
	}
	jobs, _, err := s.JobList(context.Background(), db.JobListParams{})
	if err != nil || len(jobs) != len(want) {
		t.Fatalf("after apply: %d jobs, %v; want %d", len(jobs), err, len(want))
	}
}

// TestImportCrontab_System: a system crontab's user field is dropped, and
// said so.
func TestImportCrontab_System(t *testing.T) {
	reqs, notes, err := importCrontab(strings.NewReader("17 * * * * root cd / && run-parts /etc/cron.hourly\n"), "UTC", true, &cronNames{})
	if err != nil || len(reqs) != 1 || string(reqs[0].Payload) != `{"command":["/bin/sh","-c","cd / \u0026\u0026 run-parts /etc/cron.hourly"]}` {
		t.Fatalf("%+v, %v", reqs, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "runs as root in cron") {
		t.Errorf("notes %q; want the user named", notes)
	}
	// A user's crontab read with --system: a program where the user
	// should be is said, and its line left out rather than run as "--full".
	reqs, notes, err = importCrontab(strings.NewReader("0 3 * * * /usr/local/bin/backup.sh --full\n"), "UTC", true, &cronNames{})
	if err != nil || len(reqs) != 0 || len(notes) != 1 || !strings.Contains(notes[0], `line 1: "/usr/local/bin/backup.sh", where a system crontab's line names its user, is a path and no user`) ||
		!strings.Contains(notes[0], "leave out --system; left out") {
		t.Errorf("a user's crontab with --system: %+v, notes %q, %v; want the line left out, saying to leave out --system", reqs, notes, err)
	}
	// The same line without --system: its command would be "root …",
	// which is said.
	if _, err := user.Lookup("root"); err != nil {
		t.Skipf("no user root here: %v", err)
	}
	_, notes, err = importCrontab(strings.NewReader("17 * * * * root cd / && run-parts /etc/cron.hourly\n"), "UTC", false, &cronNames{})
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], `line 1: its command begins with "root", a user of this machine and no program`) ||
		!strings.Contains(notes[0], "give --system") {
		t.Errorf("a system crontab's line without --system: notes %q, %v; want one saying to give --system", notes, err)
	}
}

// TestImportCrontab_SystemTabs: Debian's /etc/crontab separates the user
// field from the command by a tab; the user is dropped whole and the
// command kept whole, and the same for a user's crontab whose command
// begins after a tab with a user's name.
func TestImportCrontab_SystemTabs(t *testing.T) {
	in := "25 6\t* * *\troot\ttest -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )\n"
	reqs, notes, err := importCrontab(strings.NewReader(in), "UTC", true, &cronNames{})
	if err != nil || len(reqs) != 1 {
		t.Fatalf("%+v, %v", reqs, err)
	}
	var p struct{ Command []string }
	if err := json.Unmarshal(reqs[0].Payload, &p); err != nil || len(p.Command) != 3 ||
		p.Command[2] != "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )" {
		t.Errorf("command %q (%v); want the whole command after the user field, test -x too", p.Command, err)
	}
	if reqs[0].Name != "test" {
		t.Errorf("name %q; want test, after the command's program", reqs[0].Name)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "runs as root in cron;") {
		t.Errorf("notes %q; want the user, root, named", notes)
	}
}

// TestImportCrontab_Files: sked import-crontab takes several FILEs (as
// /etc/cron.d/* gives them), each a crontab of its own, with job names
// unique across them; a FILE that does not exist is a usage error saying
// how to give a crontab, and a user's name says to pipe crontab -u's.
func TestImportCrontab_Files(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "backup"), filepath.Join(dir, "reports")
	os.WriteFile(first, []byte("SHELL=/bin/bash\nPATH=/opt/bin\n0 2 * * * backup.sh --full\n"), 0o644)
	os.WriteFile(second, []byte("0 3 * * * backup.sh --reports\n@reboot mount-disks\n"), 0o644)
	code, out, stderr := mainOf("import-crontab", first, second)
	if code != 0 {
		t.Fatalf("sked import-crontab with two files: exit %d\n%s", code, stderr)
	}
	jobs, err := parseJobs([]byte(out))
	if err != nil || len(jobs) != 2 {
		t.Fatalf("sked import-crontab with two files wrote %d jobs (%v):\n%s", len(jobs), err, out)
	}
	// The second file's line runs through sh, without the first's PATH.
	if jobs[0].Name != "backup" || string(jobs[0].Payload) != `{"command":["/bin/bash","-c","backup.sh --full"],"env":{"PATH":"/opt/bin"}}` ||
		jobs[1].Name != "backup-2" || string(jobs[1].Payload) != `{"command":["/bin/sh","-c","backup.sh --reports"]}` {
		t.Errorf("jobs of two files: %s %s, %s %s; want backup and backup-2, each with its own file's shell and variables",
			jobs[0].Name, jobs[0].Payload, jobs[1].Name, jobs[1].Payload)
	}
	if !strings.Contains(stderr, second+": line 2: @reboot") {
		t.Errorf("notes %q; want the second file's note named by it", stderr)
	}

	missing := filepath.Join(dir, "nope")
	if code, _, stderr := mainOf("import-crontab", missing); code != ExitUsage || !strings.Contains(stderr, missing+": no such file: give a crontab's FILE, or pipe one in: crontab -l | sked import-crontab") {
		t.Errorf("sked import-crontab of a missing file: exit %d, %q", code, stderr)
	}
	if code, _, stderr := mainOf("import-crontab", "-", "-"); code != ExitUsage || !strings.Contains(stderr, "standard input") {
		t.Errorf("sked import-crontab - -: exit %d, %q", code, stderr)
	}
	// A crontab of comments alone is named as given; standard input so,
	// not "-".
	comments := filepath.Join(dir, "comments")
	os.WriteFile(comments, []byte("# m h dom mon dow command\n"), 0o644)
	if code, _, stderr := mainOf("import-crontab", comments); code != ExitFailed || !strings.Contains(stderr, "no line sked can run in "+comments) {
		t.Errorf("sked import-crontab of comments: exit %d, %q", code, stderr)
	}
	empty, err := os.Open(comments)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	stdin := os.Stdin
	os.Stdin = empty
	code, _, stderr = mainOf("import-crontab")
	os.Stdin = stdin
	if code != ExitFailed || !strings.Contains(stderr, "no line sked can run in standard input") {
		t.Errorf("sked import-crontab < comments: exit %d, %q; want it to name standard input", code, stderr)
	}
	if _, err := user.Lookup("root"); err != nil {
		t.Skipf("no user root here: %v", err)
	}
	if _, err := os.Stat("root"); err == nil {
		t.Skip("a file named root is here")
	}
	if code, _, stderr := mainOf("import-crontab", "root"); code != ExitUsage || !strings.Contains(stderr, `"root" is a user of this machine and no file here`) ||
		!strings.Contains(stderr, "crontab -l -u root | sked import-crontab") {
		t.Errorf("sked import-crontab root: exit %d, %q; want it to say to pipe crontab -l -u root", code, stderr)
	}
}

// TestImportCrontab_Again: a crontab imported and applied again changes
// nothing and makes no second job of any line: apply gives each name its
// definition. A name the server has for a job of another type is refused
// with nothing written; --name-prefix keeps the crontab's jobs apart.
func TestImportCrontab_Again(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "noop", Name: "date", Schedule: "@hourly"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	crontab, file := filepath.Join(dir, "crontab"), filepath.Join(dir, "schedules.yaml")
	if err := os.WriteFile(crontab, []byte(sampleCrontab), 0o644); err != nil {
		t.Fatal(err)
	}
	importAndApply := func(flags ...string) (int, string, string) {
		t.Helper()
		code, yaml, stderr := mainOf(append([]string{"import-crontab", crontab}, flags...)...)
		if code != 0 {
			t.Fatalf("sked import-crontab %q: exit %d\n%s", flags, code, stderr)
		}
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return mainOf("apply", "-f", file, "--server", srv.URL)
	}
	names := func() []string {
		t.Helper()
		jobs, _, err := s.JobList(ctx, db.JobListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			out = append(out, j.Name)
		}
		slices.Sort(out)
		return out
	}
	code, out, stderr := importAndApply()
	if got := names(); code != ExitRefused || !strings.Contains(out, "nothing was changed") || !strings.Contains(stderr, "job date: ") || len(got) != 1 {
		t.Errorf("a name the server has for a noop job: exit %d, %s%s, jobs %q; want it refused and nothing written", code, out, stderr, got)
	}
	want := []string{"date", "me-backup", "me-backup-2", "me-batch", "me-cron", "me-curl", "me-date", "me-mail", "me-report"}
	for i, wantOut := range []string{"8 created", "nothing to change"} {
		code, out, stderr := importAndApply("--name-prefix", "me-")
		if got := names(); code != 0 || !strings.Contains(out, wantOut) || !slices.Equal(got, want) {
			t.Errorf("import %d with --name-prefix: exit %d, %s%s, jobs %q; want %q and jobs %q", i+1, code, out, stderr, got, wantOut, want)
		}
	}
	for prefix, why := range map[string]string{
		"a b": "may hold only ASCII letters, digits, '-', '_' and '.'",
		"-x":  "names may not begin with '-'",
	} {
		code, out, stderr := mainOf("import-crontab", crontab, "--name-prefix", prefix)
		if code != ExitUsage || out != "" || strings.Count(stderr, "--name-prefix") != 1 ||
			!strings.Contains(stderr, fmt.Sprintf("--name-prefix %q", prefix)) || !strings.Contains(stderr, why) {
			t.Errorf("--name-prefix %q, which no name begins with: exit %d, %s%s; want a usage error once, naming it and saying %q", prefix, code, out, stderr, why)
		}
	}
}

// TestImportCrontab_LongNames: a program's name that fills a job's name
// is cut short so that the prefix and the -2 of its second line fit, and
// the crontab applies; the names stay apart.
func TestImportCrontab_LongNames(t *testing.T) {
	s := sqlitetest.Open(t)
	srv := httptest.NewServer(handlers.New(handlers.Config{Store: s}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	crontab, file := filepath.Join(dir, "crontab"), filepath.Join(dir, "schedules.yaml")
	long := "/opt/" + strings.Repeat("x", db.MaxNameLen) + ".sh"
	if err := os.WriteFile(crontab, []byte("0 1 * * * "+long+" a\n0 2 * * * "+long+" b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, yaml, stderr := mainOf("import-crontab", crontab, "--name-prefix", "team-alpha-")
	if code != 0 {
		t.Fatalf("sked import-crontab: exit %d\n%s", code, stderr)
	}
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := mainOf("apply", "-f", file, "--server", srv.URL); code != 0 || !strings.Contains(out, "2 created") {
		t.Fatalf("sked apply of the import: exit %d, %s%s; want 2 created", code, out, stderr)
	}
	jobs, _, err := s.JobList(context.Background(), db.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if len(j.Name) > db.MaxNameLen || !strings.HasPrefix(j.Name, "team-alpha-xxx") {
			t.Errorf("job name %q (%d characters); want team-alpha-xxx… within %d", j.Name, len(j.Name), db.MaxNameLen)
		}
	}
}

// TestImportCrontab_PrefixedNames: a program named like a word of the
// API's paths ("batch") is no job name alone, but is one after a prefix:
// it keeps its name there, and is "cron" without one. A program of dots
// is "cron" either way.
func TestImportCrontab_PrefixedNames(t *testing.T) {
	const crontab = "0 1 * * * /usr/bin/batch\n0 2 * * * ./. x\n"
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"cron", "cron-2"}},
		{"alice-", []string{"alice-batch", "alice-cron"}},
	} {
		reqs, _, err := importCrontab(strings.NewReader(crontab), "UTC", false, &cronNames{prefix: tc.prefix})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range reqs {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("prefix %q: names %q; want %q", tc.prefix, got, tc.want)
		}
	}
}

// TestImportCrontab_CdNames: a line that changes directory first, as
// crontabs often do, is named after the program it then runs, not "cd".
func TestImportCrontab_CdNames(t *testing.T) {
	reqs, notes, err := importCrontab(strings.NewReader("0 6 * * * cd /srv/app && ./sync.sh --all\n0 7 * * * cd /srv/app; make reports\n"+
		"0 8 * * * cd /srv/app ; make\n0 9 * * * cd\n"), "", false, &cronNames{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range reqs {
		names = append(names, r.Name)
	}
	if want := []string{"sync", "make", "make-2", "cd"}; !slices.Equal(names, want) {
		t.Errorf("names %q; want %q (notes %q)", names, want, notes)
	}
}
