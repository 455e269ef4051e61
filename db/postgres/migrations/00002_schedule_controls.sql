-- +goose Up
-- The same columns and indexes as db/sqlite/migrations/00002_schedule_controls.sql,
-- in PostgreSQL's types: operator controls and the dead-man's switch (a
-- pause with a reason and an end, a manual extra run, backfill jobs linked
-- to their schedule, and when a schedule last succeeded).
ALTER TABLE jobs ADD COLUMN pause_reason text;
ALTER TABLE jobs ADD COLUMN pause_until timestamptz;
ALTER TABLE jobs ADD COLUMN expect_success_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN last_success_at timestamptz;
ALTER TABLE jobs ADD COLUMN quiet_since timestamptz;
ALTER TABLE jobs ADD COLUMN triggered boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN parent_id text;

-- Paused jobs that resume by themselves, by when.
CREATE INDEX jobs_pause_until ON jobs (pause_until) WHERE state = 'paused' AND pause_until IS NOT NULL;
-- Schedules with a dead-man's switch.
CREATE INDEX jobs_watched ON jobs (id) WHERE expect_success_ms > 0;
-- Recurring jobs only, covering the missed-slot sum of the metrics.
CREATE INDEX jobs_recurring ON jobs (missed_slots) WHERE schedule IS NOT NULL;

-- +goose Down
DROP INDEX jobs_recurring;
DROP INDEX jobs_watched;
DROP INDEX jobs_pause_until;
ALTER TABLE jobs DROP COLUMN parent_id;
ALTER TABLE jobs DROP COLUMN triggered;
ALTER TABLE jobs DROP COLUMN quiet_since;
ALTER TABLE jobs DROP COLUMN last_success_at;
ALTER TABLE jobs DROP COLUMN expect_success_ms;
ALTER TABLE jobs DROP COLUMN pause_until;
ALTER TABLE jobs DROP COLUMN pause_reason;
