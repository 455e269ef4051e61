package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

// CheckDB refuses a database setting (named name in its errors: --db,
// Config.DB) that is, not a postgres:// URL, one that would otherwise name
// a SQLite file by mistake: a URL of another scheme (a typo of
// postgres://, another database, a sqlite:// or file: URI), a libpq
// keyword/value connection string ("host=db dbname=sked …"), a directory,
// a database in memory (":memory:"), or a path in a directory that does
// not exist; and a postgres:// URL that pgx cannot read (postgres.CheckURL).
// A URL or connection string is not echoed: it may hold a password.
func CheckDB(name, db string) error {
	if postgres.IsURL(db) {
		if err := postgres.CheckURL(db); err != nil {
			return fmt.Errorf("%s: %v; mend the URL (docs/postgresql.md says what sked reads of it)", name, err)
		}
		return nil
	}
	if lower := strings.ToLower(db); strings.HasPrefix(lower, "postgres:") || strings.HasPrefix(lower, "postgresql:") {
		return fmt.Errorf("%s begins like a PostgreSQL URL but is not one; write it as postgres://USER:PASSWORD@HOST:5432/DBNAME", name)
	}
	if strings.HasPrefix(db, ":memory:") {
		return fmt.Errorf("%s %s is a database in memory, which sked's connections would not share and which is lost when it stops; "+
			"give the path of a file, such as ./sked.db", name, db)
	}
	if scheme, _, ok := strings.Cut(db, ":"); ok && (strings.Contains(db, "://") || scheme == "file") && !strings.ContainsAny(scheme, `/\.`) {
		return fmt.Errorf("%s with a %s: URL: only postgres:// (or postgresql://) URLs name a database; anything else is the path of a SQLite file, "+
			"such as ./sked.db", name, scheme)
	}
	for f := range strings.FieldsSeq(db) {
		key, _, ok := strings.Cut(f, "=")
		if ok && (key == "host" || key == "hostaddr" || key == "dbname" || key == "user" || key == "password" || key == "port" || key == "sslmode") {
			return fmt.Errorf("%s reads as a PostgreSQL connection string of key=value pairs, which sked would take for a SQLite file name; "+
				"give a URL such as postgres://USER:PASSWORD@HOST:5432/DBNAME", name)
		}
	}
	if fi, err := os.Stat(db); err == nil && fi.IsDir() {
		return fmt.Errorf("%s %s is a directory; give the path of the database file, such as %s", name, db, filepath.Join(db, "sked.db"))
	}
	dir := filepath.Dir(db)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if strings.Contains(db, "@") { // a mistyped URL, whose password is not shown
			return fmt.Errorf("%s …%s: the directory of this path does not exist; if it is a URL, write it as "+
				"postgres://USER:PASSWORD@HOST:5432/DBNAME, else create the directory or give a path in one that does", name, db[strings.LastIndex(db, "@"):])
		}
		return fmt.Errorf("%s %s: directory %s does not exist; create it (mkdir -p %s) or give a path in one that does", name, db, dir, dir)
	}
	return nil
}

// CheckPublicURL refuses a public address of the dashboard (named name in
// its errors: --public-url, Config.PublicURL) that is not an absolute
// http(s) URL without query or fragment; empty is none.
func CheckPublicURL(name, public string) error {
	u, err := url.Parse(public)
	if public != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "") {
		return fmt.Errorf("%s %q: give the dashboard's absolute address without query or fragment, e.g. https://sked.example.com or https://example.com/sked/", name, public)
	}
	return nil
}

// checkJobDefaults refuses what CheckDefaults refuses of each type's
// defaults.
func checkJobDefaults(defaults map[string]db.Defaults) error {
	for typ, d := range defaults {
		if err := CheckDefaults(d); err != nil {
			return fmt.Errorf("Config.JobDefaults[%q] %+v: %w", typ, d, err)
		}
	}
	return nil
}

// checkConfig refuses what cfg, with its defaults filled in, cannot run
// with: the database setting CheckDB refuses, an Addr without a port, no
// worker slot or no delivery slot, a lease shorter than wire.MinLease
// (renewals could not keep it) or longer than wire.MaxLease, a
// claim-ahead past a quarter of the lease, a test clock out of range, a
// negative grace, and what CheckPublicURL, worker.CheckExecEnv and
// checkJobDefaults refuse.
func checkConfig(cfg Config) error {
	var errs []error
	for _, err := range []error{
		CheckDB("Config.DB", cfg.DB), CheckPublicURL("Config.PublicURL", cfg.PublicURL),
		worker.CheckExecEnv("Config.ExecEnv", cfg.ExecEnv), checkJobDefaults(cfg.JobDefaults),
	} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Addr != "" && cfg.Listener == nil {
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			errs = append(errs, fmt.Errorf("Config.Addr %q: give a host and a port, such as 127.0.0.1:8080 (this machine only)", cfg.Addr))
		}
	}
	if cfg.Workers < 1 {
		errs = append(errs, fmt.Errorf("Config.Workers %d: must be at least 1 (0: the default, %d)", cfg.Workers, worker.DefaultSlots))
	}
	if cfg.NotifyWorkers < 1 {
		errs = append(errs, fmt.Errorf("Config.NotifyWorkers %d: must be at least 1 (0: the default, %d)", cfg.NotifyWorkers, DefaultNotifyWorkers))
	}
	if cfg.Lease < wire.MinLease || cfg.Lease > wire.MaxLease {
		errs = append(errs, fmt.Errorf("Config.Lease %s: must be from %s to %s (0: the default, %s)", cfg.Lease, wire.MinLease, wire.MaxLease, db.DefaultLease))
	}
	if !cfg.TestClock.IsZero() {
		if err := db.CheckTime("Config.TestClock", cfg.TestClock); err != nil {
			errs = append(errs, err)
		}
	}
	if most := worker.MaxClaimAhead(cfg.Lease); cfg.ClaimAhead > most {
		errs = append(errs, fmt.Errorf("Config.ClaimAhead %s: must be at most a quarter of the lease (%s); negative: claim only due jobs (0: the default, %s)",
			cfg.ClaimAhead, most, min(worker.DefaultClaimAhead, most)))
	}
	if cfg.Grace < 0 {
		errs = append(errs, fmt.Errorf("Config.Grace %s: must be above zero, such as 1ms to stop running jobs at once (0: the default, %s)", cfg.Grace, worker.DefaultGrace))
	}
	return errors.Join(errs...)
}
