package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
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
	reqs, notes, err := importCrontab(strings.NewReader(sampleCrontab), "", false)
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
	reqs, notes, err := importCrontab(strings.NewReader("17 * * * * root cd / && run-parts /etc/cron.hourly\n"), "UTC", true)
	if err != nil || len(reqs) != 1 || string(reqs[0].Payload) != `{"command":["/bin/sh","-c","cd / \u0026\u0026 run-parts /etc/cron.hourly"]}` {
		t.Fatalf("%+v, %v", reqs, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "runs as root in cron") {
		t.Errorf("notes %q; want the user named", notes)
	}
	// The same line without --system: its command would be "root …",
	// which is said.
	if _, err := user.Lookup("root"); err != nil {
		t.Skipf("no user root here: %v", err)
	}
	_, notes, err = importCrontab(strings.NewReader("17 * * * * root cd / && run-parts /etc/cron.hourly\n"), "UTC", false)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], `line 1: its command begins with "root", a user of this machine and no program`) ||
		!strings.Contains(notes[0], "give --system") {
		t.Errorf("a system crontab's line without --system: notes %q, %v; want one saying to give --system", notes, err)
	}
}
