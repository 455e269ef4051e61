-- +goose Up
-- Ready jobs are indexed by type, then due time, so that a claim or a
-- next-due lookup for some types reads only their jobs: with the index by
-- due time alone, a worker of a rare type walked past every due job of a
-- busy one (250,000 of them: 0.27 s per claim). Reads of every type step
-- from one type to the next through the index.
-- The new index is built before the old one is dropped: the build holds
-- writes to jobs, not reads, while DROP INDEX takes the table's exclusive
-- lock, held until the migration commits; taken last, it is held only for
-- the rename.
CREATE INDEX jobs_ready_by_type ON jobs (type, next_run_at) WHERE state = 'ready';
DROP INDEX jobs_ready;
ALTER INDEX jobs_ready_by_type RENAME TO jobs_ready;

-- +goose Down
CREATE INDEX jobs_ready_by_time ON jobs (next_run_at) WHERE state = 'ready';
DROP INDEX jobs_ready;
ALTER INDEX jobs_ready_by_time RENAME TO jobs_ready;
