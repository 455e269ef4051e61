-- +goose Up
-- How long the claim that holds a job's lease leased it for: a heartbeat
-- that names no lease renews it by as much. NULL: claimed before this
-- column (such a heartbeat renews by the default lease).
ALTER TABLE jobs ADD COLUMN lease_ms INTEGER;

-- +goose Down
ALTER TABLE jobs DROP COLUMN lease_ms;
