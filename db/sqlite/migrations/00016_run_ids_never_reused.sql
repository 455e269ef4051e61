-- +goose Up
-- A run's id is never given again, even once the runs above it were
-- pruned or deleted (AUTOINCREMENT): a run's link, an event's runId and a
-- page's cursor would otherwise name a later run. A column cannot become
-- AUTOINCREMENT in place, so the table is rebuilt, with its ids; the next
-- id is above both the highest run left and the highest run an event
-- still names (ids pruned before this migration and named nowhere cannot
-- be known).
CREATE TABLE runs_new (
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
INSERT INTO runs_new (id, job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, error,
        reason, gave_up, output, late_outcome, late_error, late_finished_at, slot_count, last_slot)
    SELECT id, job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, error,
        reason, gave_up, output, late_outcome, late_error, late_finished_at, slot_count, last_slot
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_job ON runs (job_id, id);
CREATE INDEX runs_live ON runs (job_id, generation) WHERE outcome = 'running';
DELETE FROM sqlite_sequence WHERE name = 'runs';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs', max(
        (SELECT coalesce(max(id), 0) FROM runs),
        (SELECT coalesce(max(json_extract(detail, '$.runId')), 0) FROM job_events
            WHERE json_valid(detail) AND json_type(detail, '$.runId') = 'integer'));

-- +goose Down
CREATE TABLE runs_old (
    id               INTEGER PRIMARY KEY,
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
INSERT INTO runs_old (id, job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, error,
        reason, gave_up, output, late_outcome, late_error, late_finished_at, slot_count, last_slot)
    SELECT id, job_id, slot, attempt, generation, worker_id, started_at, finished_at, outcome, error,
        reason, gave_up, output, late_outcome, late_error, late_finished_at, slot_count, last_slot
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_old RENAME TO runs;
CREATE INDEX runs_job ON runs (job_id, id);
CREATE INDEX runs_live ON runs (job_id, generation) WHERE outcome = 'running';
