-- +goose Up
-- The dead-man's switch's window starts again, other than at a success,
-- at a resume, a change of the schedule or the switch, and sked's return
-- from downtime: watch_from is when it last did. NULL: never did.
ALTER TABLE jobs ADD COLUMN watch_from timestamptz;
-- When a quiet sweep last watched the switches (one row, id 1): a sweeper
-- that starts long after it finds sked was down.
CREATE TABLE watch (
    id       int PRIMARY KEY CHECK (id = 1),
    swept_at timestamptz NOT NULL
);
-- A schedule paused, cancelled, or whose switch was turned off, is quiet
-- no more: only a watched schedule is.
UPDATE jobs SET quiet_since = NULL WHERE quiet_since IS NOT NULL AND (state IN ('cancelled', 'paused') OR expect_success_ms = 0);

-- +goose Down
DROP TABLE watch;
ALTER TABLE jobs DROP COLUMN watch_from;
