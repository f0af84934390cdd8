-- The slots held under each concurrency key (flow.go, internal/flow).
-- Every change to a key's parked tasks (concurrency_waiting.sql) happens
-- under its slot row's lock, so that a task is promoted whenever a slot
-- frees.

-- name: lockSlots
-- Counters are created on first use and locked in key order: the upsert
-- takes the row lock whether it inserts or updates.
INSERT INTO {{schema}}.concurrency_slots AS s (key, held)
SELECT key, 0 FROM unnest($1::text[]) AS u(key) ORDER BY key
ON CONFLICT (key) DO UPDATE SET held = s.held
RETURNING key, held;

-- name: writeSlots
UPDATE {{schema}}.concurrency_slots s SET held = u.held
FROM unnest($1::text[], $2::int[]) AS u(key, held) WHERE s.key = u.key;

-- name: dropSlots
DELETE FROM {{schema}}.concurrency_slots s
WHERE s.key = ANY ($1::text[]) AND s.held = 0
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.concurrency_waiting w WHERE w.key = s.key);
