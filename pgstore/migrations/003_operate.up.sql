-- durable 003: operating runs: cancel and replay, lists, stats, retention.

-- A run can be cancelled; a replay leaves a REPLAYED event on each task it
-- resets.
ALTER TABLE {{schema}}.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE {{schema}}.runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'));
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED'));

-- Lists, newest first, by keyset on (created_at, id): every run, a
-- tenant's, and the two kinds an operator looks for that are few among
-- many, runs in flight and runs that failed or were cancelled. The first two
-- are on columns a run never changes.
CREATE INDEX runs_created_idx ON {{schema}}.runs (created_at, id);
CREATE INDEX runs_tenant_created_idx ON {{schema}}.runs (tenant, created_at, id);
CREATE INDEX runs_inflight_idx ON {{schema}}.runs (created_at, id) WHERE finished_at IS NULL;
CREATE INDEX runs_unsuccessful_idx ON {{schema}}.runs (created_at, id) WHERE status IN ('FAILED', 'CANCELLED');

-- Retention removes shapes no run uses any more; used_at is when a store
-- last made sure a shape is there, so that a shape about to be used again is
-- not removed under it.
CREATE INDEX runs_shape_idx ON {{schema}}.runs (shape_id);
ALTER TABLE {{schema}}.shapes ADD COLUMN used_at timestamptz NOT NULL DEFAULT now();

-- When a task became ready, for the age of the oldest ready task (stats).
ALTER TABLE {{schema}}.ready ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now();
