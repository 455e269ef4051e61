-- +goose Up
-- Operator controls and the dead-man's switch: a pause with a reason and an end, a manual extra run, backfill
-- jobs linked to their schedule, and when a schedule last succeeded.
ALTER TABLE jobs ADD COLUMN pause_reason TEXT;
ALTER TABLE jobs ADD COLUMN pause_until TEXT;
ALTER TABLE jobs ADD COLUMN expect_success_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN last_success_at TEXT;
ALTER TABLE jobs ADD COLUMN quiet_since TEXT;
ALTER TABLE jobs ADD COLUMN triggered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN parent_id TEXT;

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
