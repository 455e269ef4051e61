-- +goose Up
-- The jobs that deliver notifications and pings (sked's own, their keys
-- beginning notify: or ping:) get types of their own, notify.http and
-- notify.email, which sked serve runs in slots apart from user jobs; those
-- made before, also those still waiting, are given them here.
UPDATE jobs SET type = 'notify.' || type
WHERE type IN ('http', 'email')
    AND (substr(idempotency_key, 1, 7) = 'notify:' OR substr(idempotency_key, 1, 5) = 'ping:');

-- +goose Down
UPDATE jobs SET type = substr(type, 8) WHERE type IN ('notify.http', 'notify.email');
