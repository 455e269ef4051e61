-- +goose Up
-- Runs and events no longer reference jobs through foreign keys. A claim
-- writes one run row per claimed job, and checking each against jobs took
-- a row lock on the job the same statement had just leased: measured, 43 µs
-- a run and over half of a claim's time. The engine writes a run or an
-- event only for a job it holds locked in the same transaction, so the
-- check found nothing to refuse. What the keys' ON DELETE CASCADE did, a
-- trigger does: deleting jobs, by Prune, by a node of an older version that
-- counted on the cascade, or by hand, deletes their runs and events in the
-- same statement. SQLite keeps its keys: there the check is a lookup that
-- costs nothing measurable.
ALTER TABLE runs DROP CONSTRAINT runs_job_id_fkey;
ALTER TABLE job_events DROP CONSTRAINT job_events_job_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION jobs_delete_history() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM runs WHERE job_id IN (SELECT id FROM gone);
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER jobs_delete_history AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jobs_delete_history();

-- +goose Down
DROP TRIGGER jobs_delete_history ON jobs;
DROP FUNCTION jobs_delete_history();
ALTER TABLE job_events ADD CONSTRAINT job_events_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
ALTER TABLE runs ADD CONSTRAINT runs_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
