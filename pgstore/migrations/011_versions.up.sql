-- Versions of workflows (see docs/semantics.md, "Versions and deploys"). A
-- run is pinned to the version of its workflow it started with; the queue
-- rows of its tasks carry that version, so that a claim takes only the
-- versions its engine serves. Runs recorded before this migration have
-- version '', which every engine serving their workflow claims.
ALTER TABLE {{schema}}.runs ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.ready ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.incoming ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {{schema}}.concurrency_waiting ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';

-- The versions recorded: each shape row is of one version (its JSON says
-- which too).
ALTER TABLE {{schema}}.shapes ADD COLUMN version text COLLATE "C" NOT NULL DEFAULT '';
UPDATE {{schema}}.shapes SET version = coalesce(shape->>'version', '');
CREATE INDEX shapes_workflow_idx ON {{schema}}.shapes (workflow, version);

-- The versions a worker moves to one it serves (Workflow.Accepts).
ALTER TABLE {{schema}}.workers ADD COLUMN accepts text[] COLLATE "C" NOT NULL DEFAULT '{}';

ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED', 'WAITING', 'UPGRADED')) NOT VALID;
ALTER TABLE {{schema}}.events VALIDATE CONSTRAINT events_type_check;
CREATE INDEX incoming_run_idx ON {{schema}}.incoming (run_id);
