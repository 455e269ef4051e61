-- +goose Up
-- The schedules in trouble, for the stats (sked_schedules_failing,
-- sked_schedules_quiet) and GET /jobs?health=, newest first: the stats
-- read every recurring job's row to count the few failing or quiet ones.
-- A job has an entry only while it is failing or quiet: the claim and
-- the finish of any other job write nothing here, and of such a job one
-- entry each.
CREATE INDEX jobs_failing ON jobs (id) WHERE failing_since IS NOT NULL;
CREATE INDEX jobs_quiet ON jobs (id) WHERE quiet_since IS NOT NULL;

-- +goose Down
DROP INDEX jobs_quiet;
DROP INDEX jobs_failing;
