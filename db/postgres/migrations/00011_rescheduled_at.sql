-- +goose Up
-- When the schedule of a recurring job changed while its firing ran: the
-- new schedule's slots count from then. NULL otherwise.
ALTER TABLE jobs ADD COLUMN rescheduled_at timestamptz;

-- +goose Down
ALTER TABLE jobs DROP COLUMN rescheduled_at;
