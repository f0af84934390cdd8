-- durable 003, reverted. Cancelled runs and REPLAYED events must be gone
-- first: the checks of 002 refuse them.
ALTER TABLE {{schema}}.ready DROP COLUMN queued_at;
ALTER TABLE {{schema}}.shapes DROP COLUMN used_at;
DROP INDEX {{schema}}.runs_shape_idx;
DROP TABLE {{schema}}.run_counts;
DROP INDEX {{schema}}.runs_tenant_unsuccessful_idx;
DROP INDEX {{schema}}.runs_unsuccessful_idx;
DROP INDEX {{schema}}.runs_workflow_created_idx;
DROP INDEX {{schema}}.runs_tenant_created_idx;
DROP INDEX {{schema}}.runs_created_idx;
ALTER TABLE {{schema}}.runs DROP COLUMN unsuccessful;
ALTER TABLE {{schema}}.runs SET (fillfactor = 90);
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN', 'CANCELLED'));
ALTER TABLE {{schema}}.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE {{schema}}.runs ADD CONSTRAINT runs_status_check CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED'));
