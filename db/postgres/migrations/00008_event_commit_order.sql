-- +goose Up
-- The events' outbox (EventsAfter) is read in the order the events'
-- transactions began, not by id: ids come from a sequence as the events
-- are inserted, and a transaction that took a lower id can commit after
-- one that took a higher id has been read, behind the reader's cursor. An
-- event's transaction id orders it among transactions, and the outbox reads
-- only events of transactions older than every one still running, which
-- can commit no more events before them.
ALTER TABLE job_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX job_events_commit_order ON job_events (xid, id);

-- +goose Down
DROP INDEX job_events_commit_order;
ALTER TABLE job_events DROP COLUMN xid;
