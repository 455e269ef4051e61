-- +goose Up
-- GET /jobs?type=, newest first: without it a page of a type of few jobs
-- read the whole table, newest first, for the few (measured over 10,000
-- jobs: ?type= of no job, 29 ms). One entry a job, written when it is
-- created and deleted with it; the claim, the finish and every other
-- update of a job write neither its type nor its id, so leave it alone.
CREATE INDEX jobs_type_id ON jobs (type, id);

-- +goose Down
DROP INDEX jobs_type_id;
