package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// backup writes an online, consistent copy of the SQLite database with
// VACUUM INTO. It reads one snapshot of the file in a read transaction, so a
// running sked (WAL mode) goes on writing meanwhile. The copy is written
// beside FILE and renamed into place, so FILE is never half written.
func backup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sked backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: sked backup [--db sked.db] [--force] FILE")
		fs.PrintDefaults()
	}
	dbPath := fs.String("db", cmp.Or(getenv("SKED_DB"), "sked.db"), "SQLite database file to copy (SKED_DB)")
	force := fs.Bool("force", false, "replace FILE if it exists")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out := fs.Arg(0)
	if fs.NArg() > 1 { // flags after FILE
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q: sked backup takes one FILE", fs.Arg(0))
		}
	}
	if out == "" {
		fs.Usage()
		return errors.New("give the FILE to write the copy to")
	}
	if strings.HasPrefix(*dbPath, "postgres://") || strings.HasPrefix(*dbPath, "postgresql://") {
		return errors.New("sked backup copies a SQLite file; back up PostgreSQL with pg_dump")
	}
	if _, err := os.Stat(*dbPath); err != nil {
		return fmt.Errorf("back up %s: %w", *dbPath, err)
	}
	if _, err := os.Stat(out); err == nil && !*force {
		return fmt.Errorf("%s exists; pass --force to replace it", out)
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp-"+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	defer os.Remove(tmp)
	if err := vacuumInto(ctx, *dbPath, tmp); err != nil {
		return err
	}
	jobs, runs, err := countRows(ctx, tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("move copy into place: %w", err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("back up %s: %w", *dbPath, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes, %d jobs, %d runs (a consistent copy of %s)\n", out, st.Size(), jobs, runs, *dbPath)
	return nil
}

// openFile opens an existing SQLite file read-only. busy_timeout waits out
// a checkpoint of the running server instead of failing.
func openFile(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	d, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d.SetMaxOpenConns(1)
	return d, nil
}

// vacuumInto writes a compacted copy of the database at src to dst, which
// must not exist.
func vacuumInto(ctx context.Context, src, dst string) error {
	d, err := openFile(src)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// countRows opens the copy at path and counts its jobs and runs, which
// also proves it is a readable sked database.
func countRows(ctx context.Context, path string) (jobs, runs int64, err error) {
	d, err := openFile(path)
	if err != nil {
		return 0, 0, err
	}
	defer d.Close()
	err = d.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM runs)`).Scan(&jobs, &runs)
	if err != nil {
		return 0, 0, fmt.Errorf("read copy %s: %w", path, err)
	}
	return jobs, runs, nil
}
