-- durable 004: flow control: idempotency keys, priorities, run deadlines,
-- step and queue timeouts.
--
-- Every index added here is partial, over rows that use the feature, so
-- that runs and tasks that do not use it cost no index entry, and settling
-- a run or finishing a task stays a HOT update (see 003).

-- A run's idempotency key is unique per workflow and tenant; it goes with
-- the run (retention).
ALTER TABLE {{schema}}.runs ADD COLUMN idem_key text COLLATE "C";
CREATE UNIQUE INDEX runs_idem_key_idx ON {{schema}}.runs (workflow, tenant, idem_key) WHERE idem_key IS NOT NULL;

-- The priority of a run's tasks within its tenant's queue (0 is the default).
ALTER TABLE {{schema}}.runs ADD COLUMN priority smallint NOT NULL DEFAULT 0
    CONSTRAINT runs_priority_check CHECK (priority BETWEEN 0 AND 3);

-- When the run fails if it has not settled; cleared when it settles, so
-- that the index holds the runs whose deadline is still to come.
ALTER TABLE {{schema}}.runs ADD COLUMN deadline_at timestamptz;
CREATE INDEX runs_deadline_idx ON {{schema}}.runs (deadline_at, id) WHERE deadline_at IS NOT NULL;

-- timeout_at: when a ready task fails for want of a worker, or a running
-- attempt for running too long (see store.Task.TimeoutAt). timeout_us: the
-- step's attempt timeout in microseconds, for the claim to set timeout_at.
ALTER TABLE {{schema}}.tasks ADD COLUMN timeout_at timestamptz;
ALTER TABLE {{schema}}.tasks ADD COLUMN timeout_us bigint;
CREATE INDEX tasks_timeout_idx ON {{schema}}.tasks (timeout_at, run_id, idx) WHERE timeout_at IS NOT NULL;

-- Ready and incoming tasks carry their run's priority. Only tasks above
-- the default are indexed by lane: a claim that takes a task of a lane
-- with higher ones takes the highest instead (see claim.go).
ALTER TABLE {{schema}}.ready ADD COLUMN priority smallint NOT NULL DEFAULT 0;
CREATE INDEX ready_priority_idx ON {{schema}}.ready (workflow, tenant, priority DESC, id) WHERE priority > 0;
ALTER TABLE {{schema}}.incoming ADD COLUMN priority smallint NOT NULL DEFAULT 0;
