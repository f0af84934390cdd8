DELETE FROM {{schema}}.events WHERE type = 'UPGRADED';
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED', 'WAITING'));
ALTER TABLE {{schema}}.workers DROP COLUMN accepts;
DROP INDEX {{schema}}.incoming_run_idx;
DROP INDEX {{schema}}.shapes_workflow_idx;
ALTER TABLE {{schema}}.shapes DROP COLUMN version;
ALTER TABLE {{schema}}.concurrency_waiting DROP COLUMN version;
ALTER TABLE {{schema}}.incoming DROP COLUMN version;
ALTER TABLE {{schema}}.ready DROP COLUMN version;
ALTER TABLE {{schema}}.runs DROP COLUMN version;
