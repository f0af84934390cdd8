DROP TABLE {{schema}}.inbox;
DROP TABLE {{schema}}.messages;
DROP INDEX {{schema}}.runs_parent_idx;
ALTER TABLE {{schema}}.runs DROP COLUMN parent_id, DROP COLUMN parent_step, DROP COLUMN parent_result;
DROP INDEX {{schema}}.tasks_waiting_idx;
DELETE FROM {{schema}}.tasks WHERE kind = 'item';
ALTER TABLE {{schema}}.tasks DROP COLUMN wait_key, DROP COLUMN child_id, DROP COLUMN items, DROP COLUMN items_left,
    DROP COLUMN item, DROP COLUMN item_input;
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
DELETE FROM {{schema}}.events WHERE type = 'WAITING';
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED'));
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_state_check;
UPDATE {{schema}}.tasks SET state = 'CANCELLED' WHERE state = 'WAITING';
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('PENDING', 'QUEUED', 'RUNNING', 'SLEEPING', 'COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED'));
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_kind_check;
UPDATE {{schema}}.tasks SET kind = 'step' WHERE kind IN ('event', 'child', 'map');
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_kind_check CHECK (kind IN ('step', 'sleep', 'on_failure'));
