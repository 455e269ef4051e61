-- +goose NO TRANSACTION
-- +goose Up
-- Names, changes and what a schedule tells people: a job may have a name,
-- unique among jobs that are not cancelled; an idempotency key is unique
-- among those jobs too, so that a cancelled job's key can be used again,
-- and the request that took it is kept (request_hash) so that the same key
-- with a different request is refused; notify holds a job's notification
-- settings; failing_since marks a schedule whose last firing gave up.
-- job_events is each job's timeline: changes, give-ups, recoveries.
--
-- A UNIQUE column constraint cannot be dropped in SQLite, so jobs is
-- rebuilt (https://sqlite.org/lang_altertable.html#otheralter), with
-- foreign keys off: dropping the old table must not cascade to runs.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE jobs_new (
    id                TEXT PRIMARY KEY,
    type              TEXT NOT NULL,
    payload           TEXT NOT NULL DEFAULT '{}',
    schedule          TEXT,
    timezone          TEXT NOT NULL DEFAULT 'UTC',
    state             TEXT NOT NULL CHECK (state IN ('ready', 'running', 'done', 'dead', 'cancelled', 'paused')),
    next_run_at       TEXT,
    slot              TEXT,
    attempt           INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL CHECK (max_attempts >= 1),
    lease_owner       TEXT,
    lease_until       TEXT,
    lease_generation  INTEGER NOT NULL DEFAULT 0,
    idempotency_key   TEXT,
    overlap           TEXT NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'queue_one')),
    misfire           TEXT NOT NULL DEFAULT 'run_once' CHECK (misfire IN ('run_once', 'skip', 'run_all')),
    timeout_ms        INTEGER NOT NULL,
    backoff_ms        INTEGER NOT NULL,
    jitter_ms         INTEGER NOT NULL DEFAULT 0,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    missed_slots      INTEGER NOT NULL DEFAULT 0,
    last_error        TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    pause_reason      TEXT,
    pause_until       TEXT,
    expect_success_ms INTEGER NOT NULL DEFAULT 0,
    last_success_at   TEXT,
    quiet_since       TEXT,
    triggered         INTEGER NOT NULL DEFAULT 0,
    parent_id         TEXT,
    name              TEXT,
    request_hash      TEXT,
    notify            TEXT,
    failing_since     TEXT
) STRICT;
INSERT INTO jobs_new (id, type, payload, schedule, timezone, state, next_run_at, slot, attempt, max_attempts,
        lease_owner, lease_until, lease_generation, idempotency_key, overlap, misfire, timeout_ms, backoff_ms,
        jitter_ms, cancel_requested, missed_slots, last_error, created_at, updated_at, pause_reason, pause_until,
        expect_success_ms, last_success_at, quiet_since, triggered, parent_id)
    SELECT id, type, payload, schedule, timezone, state, next_run_at, slot, attempt, max_attempts,
        lease_owner, lease_until, lease_generation, idempotency_key, overlap, misfire, timeout_ms, backoff_ms,
        jitter_ms, cancel_requested, missed_slots, last_error, created_at, updated_at, pause_reason, pause_until,
        expect_success_ms, last_success_at, quiet_since, triggered, parent_id
    FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_ready ON jobs (next_run_at) WHERE state = 'ready';
CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_state_id ON jobs (state, id);
CREATE INDEX jobs_pause_until ON jobs (pause_until) WHERE state = 'paused' AND pause_until IS NOT NULL;
CREATE INDEX jobs_watched ON jobs (id) WHERE expect_success_ms > 0;
CREATE INDEX jobs_recurring ON jobs (missed_slots) WHERE schedule IS NOT NULL;
-- A key, and a name, belong to at most one job that is not cancelled.
CREATE UNIQUE INDEX jobs_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL AND state <> 'cancelled';
CREATE UNIQUE INDEX jobs_name_live ON jobs (name) WHERE name IS NOT NULL AND state <> 'cancelled';
-- Every job of a name, cancelled ones too.
CREATE INDEX jobs_name ON jobs (name) WHERE name IS NOT NULL;

CREATE TABLE job_events (
    id     INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX job_events_job ON job_events (job_id, id);
COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
-- The names, keys and events are dropped with their columns; the key's
-- uniqueness is not restored as a column constraint.
DROP TABLE job_events;
DROP INDEX jobs_name;
DROP INDEX jobs_name_live;
DROP INDEX jobs_key;
ALTER TABLE jobs DROP COLUMN failing_since;
ALTER TABLE jobs DROP COLUMN notify;
ALTER TABLE jobs DROP COLUMN request_hash;
ALTER TABLE jobs DROP COLUMN name;
