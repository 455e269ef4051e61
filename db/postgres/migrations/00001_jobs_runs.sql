-- +goose Up
-- The same tables and columns as db/sqlite/migrations/00001_jobs_runs.sql,
-- in PostgreSQL's types. payload is json, not jsonb: json keeps the
-- document exactly as the client sent it (key order, spacing), which is what
-- a handler is given back.
CREATE TABLE jobs (
    id               text PRIMARY KEY,
    type             text NOT NULL,
    payload          json NOT NULL DEFAULT '{}',
    schedule         text,
    timezone         text NOT NULL DEFAULT 'UTC',
    state            text NOT NULL CHECK (state IN ('ready', 'running', 'done', 'dead', 'cancelled', 'paused')),
    next_run_at      timestamptz,
    slot             timestamptz,
    attempt          integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL CHECK (max_attempts >= 1),
    lease_owner      text,
    lease_until      timestamptz,
    lease_generation bigint NOT NULL DEFAULT 0,
    idempotency_key  text UNIQUE,
    overlap          text NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'queue_one')),
    misfire          text NOT NULL DEFAULT 'run_once' CHECK (misfire IN ('run_once', 'skip', 'run_all')),
    timeout_ms       bigint NOT NULL,
    backoff_ms       bigint NOT NULL,
    jitter_ms        bigint NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    missed_slots     bigint NOT NULL DEFAULT 0,
    last_error       text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

-- The due path: only waiting jobs, in due order. It stays small however much
-- history the table holds.
CREATE INDEX jobs_ready ON jobs (next_run_at) WHERE state = 'ready';
-- The reaper's path: only leased jobs, by lease expiry.
CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';
-- Listing by state, newest first.
CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE TABLE runs (
    id          bigserial PRIMARY KEY,
    job_id      text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    slot        timestamptz,
    attempt     integer NOT NULL,
    generation  bigint NOT NULL,
    worker_id   text,
    started_at  timestamptz,
    finished_at timestamptz,
    outcome     text NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out', 'lease_expired', 'cancelled', 'missed', 'released')),
    error       text,
    reason      text,
    gave_up     boolean NOT NULL DEFAULT false,
    output      text
);

CREATE INDEX runs_job ON runs (job_id, id);

-- +goose Down
DROP TABLE runs;
DROP TABLE jobs;
