-- +goose Up
-- The workers seen claiming: one row per worker id (a process), written
-- by a claim at most every 15 seconds, forgotten a week after its last.
-- types are the types it claims; {} is any type.
-- stopped_at is when it said it shut down; a claim clears it.
CREATE TABLE workers (
    id            text PRIMARY KEY,
    types         text[] NOT NULL DEFAULT '{}',
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    stopped_at    timestamptz
);
CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- +goose Down
DROP TABLE workers;
