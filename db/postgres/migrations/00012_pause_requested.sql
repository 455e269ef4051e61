-- +goose Up
-- A running recurring job that is to pause when its run ends (a pause
-- asked for during the run); pause_reason and pause_until are that pause's.
ALTER TABLE jobs ADD COLUMN pause_requested boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE jobs DROP COLUMN pause_requested;
