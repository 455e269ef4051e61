package checker

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/sked-dev/sked/db/sqlite" // registers the "sqlite" driver too
)

// Client log operations.
const (
	OpEnqueue        = "enqueue"         // a create answered 201 or 200
	OpEnqueueUnacked = "enqueue_unacked" // a create sent, no answer received
	OpCancel         = "cancel"          // a DELETE answered Status
)

// ClientRecord is one line of the test client's log.
type ClientRecord struct {
	Op             string `json:"op"`
	JobID          string `json:"jobId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Type           string `json:"type,omitempty"`
	Recurring      bool   `json:"recurring,omitempty"`
	Status         int    `json:"status,omitempty"` // of a cancel: 204 or 409
}

// ExecRecord is one line of the no-op jobs' log: the start or the end (or
// both) of the execution of JobID under lease Generation, or a mark that it
// was still running, in Unix nanoseconds.
type ExecRecord struct {
	JobID      string `json:"jobId"`
	Generation int64  `json:"generation"`
	Start      int64  `json:"start,omitempty"`
	Mark       int64  `json:"mark,omitempty"`
	End        int64  `json:"end,omitempty"`
}

// serverRecord is the part of a sked serve JSON log line the checker reads.
type serverRecord struct {
	Msg        string `json:"msg"`
	JobID      string `json:"job_id"`
	Generation int64  `json:"generation"`
	Outcome    string `json:"outcome"`
}

// Server log messages of the worker pool (worker/pool.go).
const (
	msgFinished = "run finished"
	msgRefused  = "run outcome refused: lease no longer held"
)

// line is one parsed log line and where it came from.
type line[T any] struct {
	at  string // file:line: text, for evidence
	rec T
}

// execution is the merged start and end of one (job, generation).
type execution struct {
	jobID      string
	generation int64
	start, end int64 // Unix ns; end 0 when the process died
	last       int64 // the latest of its lines: when it was last seen running
	evidence   []string
}

type jobRow struct {
	id, typ, schedule, timezone, state, idemKey string
	leaseGeneration, missedSlots                int64
	jitter                                      time.Duration
	slot, leaseUntil                            *time.Time
	created, updated                            *time.Time // NOT NULL in the schema
}

type runRow struct {
	id, generation         int64
	jobID, outcome, reason string
	slot, started, fini    *time.Time
	gaveUp                 bool
	// slotCount and lastSlot: a missed row standing for slotCount slots
	// from slot to lastSlot (0 and nil: one slot).
	slotCount int64
	lastSlot  *time.Time
}

func (r runRow) String() string {
	s := fmt.Sprintf("db runs id=%d job=%s generation=%d slot=%s started_at=%s finished_at=%s outcome=%s reason=%q gave_up=%t",
		r.id, r.jobID, r.generation, fmtT(r.slot), fmtT(r.started), fmtT(r.fini), r.outcome, r.reason, r.gaveUp)
	if r.slotCount > 0 {
		s += fmt.Sprintf(" slot_count=%d last_slot=%s", r.slotCount, fmtT(r.lastSlot))
	}
	return s
}

func (j *jobRow) String() string {
	return fmt.Sprintf("db jobs id=%s type=%s schedule=%q state=%s slot=%s lease_generation=%d lease_until=%s missed_slots=%d created_at=%s updated_at=%s",
		j.id, j.typ, j.schedule, j.state, fmtT(j.slot), j.leaseGeneration, fmtT(j.leaseUntil), j.missedSlots, fmtT(j.created), fmtT(j.updated))
}

func fmtT(t *time.Time) string {
	if t == nil {
		return "NULL"
	}
	return t.UTC().Format(dbTime)
}

// dbTime is how sked's SQLite store writes times (db/sqlite timeFormat).
const dbTime = "2006-01-02T15:04:05.000Z"

// evidence is everything Check reads, parsed.
type evidence struct {
	in        Input
	client    []line[ClientRecord]
	execs     []*execution // ordered by job, then start
	dupExecs  []Violation  // generations started twice, found while merging
	server    []line[serverRecord]
	jobs      map[string]*jobRow
	runs      map[string][]runRow // by job; ordered by generation, then id
	integrity []string            // integrity_check and foreign_key_check answers other than ok
	end       time.Time           // when the run ended: Input.End or the latest time in the evidence
}

func load(ctx context.Context, in Input) (*evidence, error) {
	e := &evidence{in: in}
	var err error
	if e.client, err = readLog[ClientRecord](in.ClientLog, true); err != nil {
		return nil, err
	}
	execs, err := readLog[ExecRecord](in.JobsLog, true)
	if err != nil {
		return nil, err
	}
	e.execs, e.dupExecs = mergeExecs(execs)
	server, err := readLog[serverRecord](in.ServerLog, false)
	if err != nil {
		return nil, err
	}
	for _, l := range server {
		if l.rec.JobID != "" && (l.rec.Msg == msgFinished || l.rec.Msg == msgRefused) {
			e.server = append(e.server, l)
		}
	}
	if err := e.loadDB(ctx); err != nil {
		return nil, err
	}
	e.end = in.End
	if e.end.IsZero() {
		e.end = e.latest()
	}
	return e, nil
}

// latest is the latest time the evidence records: a job created or
// changed, a run started or finished, an execution started or ended. The
// database keeps no clock of its own, so this is when the run is known to
// have lasted until; Input.End says it when nothing was written at the end.
func (e *evidence) latest() time.Time {
	var t time.Time
	later := func(c *time.Time) {
		if c != nil && c.After(t) {
			t = *c
		}
	}
	for _, j := range e.jobs {
		later(j.created)
		later(j.updated)
	}
	for _, runs := range e.runs {
		for _, r := range runs {
			later(r.started)
			later(r.fini)
		}
	}
	for _, x := range e.execs {
		c := time.Unix(0, max(x.start, x.end)).UTC()
		later(&c)
	}
	return t
}

// readLog parses a JSON-lines file; "" reads nothing. A last line cut short
// is ignored; other malformed lines are an error when strict, skipped
// otherwise (a server log holds other messages too).
func readLog[T any](path string, strict bool) ([]line[T], error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read evidence: %w", err)
	}
	base := filepath.Base(path)
	var out []line[T]
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var rec T
		if err := json.Unmarshal(text, &rec); err != nil {
			last := !bytes.HasSuffix(data, []byte("\n")) && bytes.HasSuffix(bytes.TrimSpace(data), text)
			if !strict || last {
				continue
			}
			return nil, fmt.Errorf("read evidence %s:%d: %w", path, n, err)
		}
		out = append(out, line[T]{at: fmt.Sprintf("%s:%d: %s", base, n, text), rec: rec})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read evidence %s: %w", path, err)
	}
	return out, nil
}

// mergeExecs joins the start and end lines of each (job, generation). A
// second start of one generation is a violation: one claim, one execution.
func mergeExecs(lines []line[ExecRecord]) ([]*execution, []Violation) {
	type key struct {
		job string
		gen int64
	}
	byKey := map[key]*execution{}
	var dups []Violation
	for _, l := range lines {
		k := key{l.rec.JobID, l.rec.Generation}
		x := byKey[k]
		if x == nil {
			x = &execution{jobID: k.job, generation: k.gen}
			byKey[k] = x
		}
		if l.rec.Start != 0 {
			if x.start != 0 {
				dups = append(dups, Violation{Rule: RuleGeneration, JobID: k.job,
					Detail:   fmt.Sprintf("generation %d started twice: one claim ran two executions", k.gen),
					Evidence: append(slices.Clone(x.evidence), l.at)})
			}
			x.start = l.rec.Start
		}
		if l.rec.End != 0 {
			x.end = l.rec.End
		}
		x.last = max(x.last, l.rec.Start, l.rec.Mark, l.rec.End)
		if l.rec.Mark == 0 || len(x.evidence) < 2 {
			x.evidence = append(x.evidence, l.at)
		} else {
			x.evidence[len(x.evidence)-1] = l.at // the last mark is the one that counts
		}
	}
	out := make([]*execution, 0, len(byKey))
	for _, x := range byKey {
		if x.start != 0 {
			out = append(out, x)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].jobID != out[b].jobID {
			return out[a].jobID < out[b].jobID
		}
		return out[a].start < out[b].start
	})
	return out, dups
}

// loadDB opens the database read-only, runs the integrity checks and reads
// every job and run.
func (e *evidence) loadDB(ctx context.Context) error {
	if e.in.DB == "" {
		return fmt.Errorf("read database: no file given")
	}
	if _, err := os.Stat(e.in.DB); err != nil {
		return fmt.Errorf("read database: %w", err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	conn, err := sql.Open("sqlite", sqlite.FileURI(e.in.DB, q))
	if err != nil {
		return fmt.Errorf("open database %s: %w", e.in.DB, err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	for _, pragma := range []string{"PRAGMA integrity_check", "PRAGMA foreign_key_check"} {
		answers, err := queryStrings(ctx, conn, pragma)
		if err != nil {
			return err
		}
		for _, a := range answers {
			if a != "ok" {
				e.integrity = append(e.integrity, pragma+": "+a)
			}
		}
	}
	if e.jobs, err = readJobs(ctx, conn); err != nil {
		return err
	}
	e.runs, err = readRuns(ctx, conn)
	return err
}

// queryStrings returns each row of q's answer, its columns joined.
func queryStrings(ctx context.Context, conn *sql.DB, q string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", q, err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("run %s: %w", q, err)
		}
		s := fmt.Sprint(vals[0])
		for _, v := range vals[1:] {
			s += fmt.Sprintf(" %v", v)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run %s: %w", q, err)
	}
	return out, nil
}

func readJobs(ctx context.Context, conn *sql.DB) (map[string]*jobRow, error) {
	rows, err := conn.QueryContext(ctx, `SELECT id, type, coalesce(schedule, ''), timezone, state,
		coalesce(idempotency_key, ''), lease_generation, missed_slots, jitter_ms, slot, lease_until,
		created_at, updated_at FROM jobs`)
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	defer rows.Close()
	jobs := map[string]*jobRow{}
	for rows.Next() {
		var (
			j                             = &jobRow{}
			jitterMS                      int64
			slot, until, created, updated sql.NullString
		)
		if err := rows.Scan(&j.id, &j.typ, &j.schedule, &j.timezone, &j.state, &j.idemKey,
			&j.leaseGeneration, &j.missedSlots, &jitterMS, &slot, &until, &created, &updated); err != nil {
			return nil, fmt.Errorf("read jobs: %w", err)
		}
		j.jitter = time.Duration(jitterMS) * time.Millisecond
		if err := parseDBTimes(map[**time.Time]sql.NullString{&j.slot: slot, &j.leaseUntil: until,
			&j.created: created, &j.updated: updated}); err != nil {
			return nil, err
		}
		jobs[j.id] = j
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	return jobs, nil
}

func readRuns(ctx context.Context, conn *sql.DB) (map[string][]runRow, error) {
	rows, err := conn.QueryContext(ctx, `SELECT id, job_id, generation, outcome, coalesce(reason, ''), gave_up,
		slot, started_at, finished_at, coalesce(slot_count, 0), last_slot FROM runs ORDER BY job_id, generation, id`)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	defer rows.Close()
	runs := map[string][]runRow{}
	for rows.Next() {
		var (
			r                       runRow
			gaveUp                  int
			slot, started, finished sql.NullString
			lastSlot                sql.NullString
		)
		if err := rows.Scan(&r.id, &r.jobID, &r.generation, &r.outcome, &r.reason, &gaveUp, &slot, &started, &finished,
			&r.slotCount, &lastSlot); err != nil {
			return nil, fmt.Errorf("read runs: %w", err)
		}
		r.gaveUp = gaveUp != 0
		if err := parseDBTimes(map[**time.Time]sql.NullString{&r.slot: slot, &r.started: started, &r.fini: finished, &r.lastSlot: lastSlot}); err != nil {
			return nil, err
		}
		runs[r.jobID] = append(runs[r.jobID], r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// parseDBTimes parses each stored time into its destination (nil for NULL).
func parseDBTimes(dsts map[**time.Time]sql.NullString) error {
	for dst, src := range dsts {
		t, err := parseDBTime(src)
		if err != nil {
			return err
		}
		*dst = t
	}
	return nil
}

func parseDBTime(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := time.Parse(dbTime, s.String)
	if err != nil {
		return nil, fmt.Errorf("parse stored time %q: %w", s.String, err)
	}
	return &t, nil
}
