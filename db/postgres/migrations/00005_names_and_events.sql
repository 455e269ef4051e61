-- +goose Up
-- The same columns, indexes and table as
-- db/sqlite/migrations/00005_names_and_events.sql: names, keys unique among
-- jobs that are not cancelled, the request that took a key, a job's
-- notification settings, a failing schedule's mark, and each job's timeline.
ALTER TABLE jobs DROP CONSTRAINT jobs_idempotency_key_key;
ALTER TABLE jobs ADD COLUMN name text;
ALTER TABLE jobs ADD COLUMN request_hash text;
ALTER TABLE jobs ADD COLUMN notify text;
ALTER TABLE jobs ADD COLUMN failing_since timestamptz;
-- A key, and a name, belong to at most one job that is not cancelled.
CREATE UNIQUE INDEX jobs_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL AND state <> 'cancelled';
CREATE UNIQUE INDEX jobs_name_live ON jobs (name) WHERE name IS NOT NULL AND state <> 'cancelled';
-- Every job of a name, cancelled ones too.
CREATE INDEX jobs_name ON jobs (name) WHERE name IS NOT NULL;

CREATE TABLE job_events (
    id     bigserial PRIMARY KEY,
    job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     timestamptz NOT NULL,
    kind   text NOT NULL,
    actor  text,
    detail json NOT NULL DEFAULT '{}'
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- +goose Down
DROP TABLE job_events;
DROP INDEX jobs_name;
DROP INDEX jobs_name_live;
DROP INDEX jobs_key;
ALTER TABLE jobs DROP COLUMN failing_since;
ALTER TABLE jobs DROP COLUMN notify;
ALTER TABLE jobs DROP COLUMN request_hash;
ALTER TABLE jobs DROP COLUMN name;
ALTER TABLE jobs ADD CONSTRAINT jobs_idempotency_key_key UNIQUE (idempotency_key);
