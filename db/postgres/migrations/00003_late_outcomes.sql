-- +goose Up
-- The same columns and index as db/sqlite/migrations/00003_late_outcomes.sql:
-- a completion its worker sent after its lease had moved on is refused, but
-- the execution happened and is recorded on its own run.
ALTER TABLE runs ADD COLUMN late_outcome text;
ALTER TABLE runs ADD COLUMN late_error text;
ALTER TABLE runs ADD COLUMN late_finished_at timestamptz;

-- The running run of a lease, found without reading the job's history.
CREATE INDEX runs_live ON runs (job_id, generation) WHERE outcome = 'running';

-- +goose Down
DROP INDEX runs_live;
ALTER TABLE runs DROP COLUMN late_finished_at;
ALTER TABLE runs DROP COLUMN late_error;
ALTER TABLE runs DROP COLUMN late_outcome;
