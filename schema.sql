-- The SQLite schema as the migrations in db/sqlite/migrations leave it.
-- Generated: go test ./db/sqlite -run TestSchema -update

CREATE TABLE "job_events" (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
) STRICT;

CREATE TABLE "jobs" (
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
, rescheduled_at TEXT, pause_requested INTEGER NOT NULL DEFAULT 0, watch_from TEXT, lease_ms INTEGER) STRICT;

CREATE TABLE "runs" (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id           TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    slot             TEXT,
    attempt          INTEGER NOT NULL,
    generation       INTEGER NOT NULL,
    worker_id        TEXT,
    started_at       TEXT,
    finished_at      TEXT,
    outcome          TEXT NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out', 'lease_expired', 'cancelled', 'missed', 'released')),
    error            TEXT,
    reason           TEXT,
    gave_up          INTEGER NOT NULL DEFAULT 0,
    output           TEXT,
    late_outcome     TEXT,
    late_error       TEXT,
    late_finished_at TEXT,
    slot_count       INTEGER,
    last_slot        TEXT
) STRICT;

CREATE TABLE watch (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    swept_at TEXT NOT NULL
) STRICT;

CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    types         TEXT NOT NULL DEFAULT '[]',
    first_seen_at TEXT NOT NULL,
    last_seen_at  TEXT NOT NULL,
    stopped_at    TEXT
) STRICT;

CREATE INDEX job_events_job ON job_events (job_id, id);

CREATE INDEX jobs_failing ON jobs (id) WHERE failing_since IS NOT NULL;

CREATE UNIQUE INDEX jobs_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL AND state <> 'cancelled';

CREATE INDEX jobs_name ON jobs (name) WHERE name IS NOT NULL;

CREATE UNIQUE INDEX jobs_name_live ON jobs (name) WHERE name IS NOT NULL AND state <> 'cancelled';

CREATE INDEX jobs_pause_until ON jobs (pause_until) WHERE state = 'paused' AND pause_until IS NOT NULL;

CREATE INDEX jobs_quiet ON jobs (id) WHERE quiet_since IS NOT NULL;

CREATE INDEX jobs_ready ON jobs (type, next_run_at) WHERE state = 'ready';

CREATE INDEX jobs_recurring ON jobs (missed_slots) WHERE schedule IS NOT NULL;

CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';

CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE INDEX jobs_type_id ON jobs (type, id);

CREATE INDEX jobs_watched ON jobs (id) WHERE expect_success_ms > 0;

CREATE INDEX runs_job ON runs (job_id, id);

CREATE INDEX runs_live ON runs (job_id, generation) WHERE outcome = 'running';

CREATE INDEX workers_last_seen ON workers (last_seen_at);
