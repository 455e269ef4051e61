-- +goose Up
-- The same columns as db/sqlite/migrations/00004_missed_spans.sql: a missed
-- run may stand for a span of slots.
ALTER TABLE runs ADD COLUMN slot_count bigint;
ALTER TABLE runs ADD COLUMN last_slot timestamptz;

-- +goose Down
ALTER TABLE runs DROP COLUMN last_slot;
ALTER TABLE runs DROP COLUMN slot_count;
