-- +goose Up
-- Times are TEXT in one fixed-width UTC format (see timeFormat in
-- sqlite.go) so that they sort as strings and read well in the sqlite3 shell.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    type             TEXT NOT NULL,
    payload          TEXT NOT NULL DEFAULT '{}',
    schedule         TEXT,
    timezone         TEXT NOT NULL DEFAULT 'UTC',
    state            TEXT NOT NULL CHECK (state IN ('ready', 'running', 'done', 'dead', 'cancelled', 'paused')),
    next_run_at      TEXT,
    slot             TEXT,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    lease_owner      TEXT,
    lease_until      TEXT,
    lease_generation INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT UNIQUE,
    overlap          TEXT NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'queue_one')),
    misfire          TEXT NOT NULL DEFAULT 'run_once' CHECK (misfire IN ('run_once', 'skip', 'run_all')),
    timeout_ms       INTEGER NOT NULL,
    backoff_ms       INTEGER NOT NULL,
    jitter_ms        INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    missed_slots     INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
) STRICT;

-- The due path: only waiting jobs, in due order. It stays small however much
-- history the table holds.
CREATE INDEX jobs_ready ON jobs (next_run_at) WHERE state = 'ready';
-- The reaper's path: only leased jobs, by lease expiry.
CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';
-- Listing by state, newest first.
CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    slot        TEXT,
    attempt     INTEGER NOT NULL,
    generation  INTEGER NOT NULL,
    worker_id   TEXT,
    started_at  TEXT,
    finished_at TEXT,
    outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out', 'lease_expired', 'cancelled', 'missed', 'released')),
    error       TEXT,
    reason      TEXT,
    gave_up     INTEGER NOT NULL DEFAULT 0,
    output      TEXT
) STRICT;

CREATE INDEX runs_job ON runs (job_id, id);

-- +goose Down
DROP TABLE runs;
DROP TABLE jobs;
