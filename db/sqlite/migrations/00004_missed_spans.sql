-- +goose Up
-- A missed run may stand for a span of slots: those of one event past the
-- first 10,000, which get a row each.
ALTER TABLE runs ADD COLUMN slot_count INTEGER;
ALTER TABLE runs ADD COLUMN last_slot TEXT;

-- +goose Down
ALTER TABLE runs DROP COLUMN last_slot;
ALTER TABLE runs DROP COLUMN slot_count;
