-- +goose Up
-- Ready jobs are indexed by type, then due time, so that a claim or a
-- next-due lookup for some types reads only their jobs: with the index by
-- due time alone, a worker of a rare type walked past every due job of a
-- busy one (250,000 of them: 0.27 s per claim). Reads of every type step
-- from one type to the next through the index.
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (type, next_run_at) WHERE state = 'ready';

-- +goose Down
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (next_run_at) WHERE state = 'ready';
