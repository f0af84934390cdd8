DELETE FROM {{schema}}.events WHERE type = 'LOST';
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED', 'WAITING', 'UPGRADED'));
ALTER TABLE {{schema}}.tasks DROP COLUMN lost;
