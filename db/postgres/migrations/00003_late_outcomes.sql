-- +goose Up
-- The same columns as db/sqlite/migrations/00003_late_outcomes.sql: a
-- completion its worker sent after its lease had moved on is refused, but
-- the execution happened and is recorded on its own run.
ALTER TABLE runs ADD COLUMN late_outcome text;
ALTER TABLE runs ADD COLUMN late_error text;
ALTER TABLE runs ADD COLUMN late_finished_at timestamptz;

-- The run of a lease, found without reading the job's history. Unlike
-- SQLite's runs_live it holds every run, not only running ones: an index
-- whose predicate names outcome would make every finish of a run a
-- non-HOT update (new entries in every index of runs), where this one
-- leaves the indexed columns alone and, with the room fillfactor keeps on
-- each page, the finish is written beside the row it replaces.
CREATE INDEX runs_lease ON runs (job_id, generation);
ALTER TABLE runs SET (fillfactor = 70);

-- +goose Down
ALTER TABLE runs RESET (fillfactor);
DROP INDEX runs_lease;
ALTER TABLE runs DROP COLUMN late_finished_at;
ALTER TABLE runs DROP COLUMN late_error;
ALTER TABLE runs DROP COLUMN late_outcome;
