-- Lost attempts (docs/semantics.md, "Retries"): an attempt whose worker
-- was lost (no heartbeat for DeadAfter) spends no retry; tasks count the
-- attempts in a row that were lost, so that a step that keeps killing its
-- worker fails after its lost limit. NULL means none (the common case:
-- nothing to write). LOST events record each lost attempt.
ALTER TABLE {{schema}}.tasks ADD COLUMN lost int;

ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED', 'WAITING', 'UPGRADED', 'LOST')) NOT VALID;
ALTER TABLE {{schema}}.events VALIDATE CONSTRAINT events_type_check;
