-- +goose Up
-- An event's id is never given again, even once the events above it were
-- pruned (AUTOINCREMENT): the notifier reads the timeline after the last
-- id it read, and would pass over new events given old ids. A column
-- cannot become AUTOINCREMENT in place, so the table is rebuilt.
CREATE TABLE job_events_new (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
) STRICT;
INSERT INTO job_events_new (id, job_id, at, kind, actor, detail)
    SELECT id, job_id, at, kind, actor, detail FROM job_events;
DROP TABLE job_events;
ALTER TABLE job_events_new RENAME TO job_events;
CREATE INDEX job_events_job ON job_events (job_id, id);

-- +goose Down
CREATE TABLE job_events_old (
    id     INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    actor  TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
) STRICT;
INSERT INTO job_events_old (id, job_id, at, kind, actor, detail)
    SELECT id, job_id, at, kind, actor, detail FROM job_events;
DROP TABLE job_events;
ALTER TABLE job_events_old RENAME TO job_events;
CREATE INDEX job_events_job ON job_events (job_id, id);
