-- durable 003: operating runs: cancel and replay, lists, stats, retention.
--
-- Settling a run is the hottest update of the runs table (one per run), so
-- it stays a HOT update: no index of runs covers a column that changes when
-- a run completes (status, finished_at), and pages keep room for the new
-- row version (fillfactor). Measured on `durable bench --scenario single`:
-- indexes on those columns made every settlement write a new entry into
-- every index of runs, 19% fewer runs/s. See docs/design.md, "Lists, stats
-- and retention".

-- A run can be cancelled; a replay leaves a REPLAYED event on each task it
-- resets.
ALTER TABLE {{schema}}.runs DROP CONSTRAINT runs_status_check;
ALTER TABLE {{schema}}.runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'));
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED'));

-- Room on each page for the settled version of its runs (new pages only:
-- no rewrite).
ALTER TABLE {{schema}}.runs SET (fillfactor = 50);

-- unsuccessful is true while a run is FAILED or CANCELLED. It changes only
-- when a run fails, is cancelled or is replayed, never when it completes, so
-- the partial indexes on it leave completions HOT.
ALTER TABLE {{schema}}.runs ADD COLUMN unsuccessful boolean NOT NULL DEFAULT false;
UPDATE {{schema}}.runs SET unsuccessful = true WHERE status = 'FAILED';

-- Lists, newest first, by keyset on (created_at, id): every run, a
-- tenant's, a workflow's (columns a run never changes), and the failed or
-- cancelled ones, which are few among many.
CREATE INDEX runs_created_idx ON {{schema}}.runs (created_at, id);
CREATE INDEX runs_tenant_created_idx ON {{schema}}.runs (tenant, created_at, id);
CREATE INDEX runs_workflow_created_idx ON {{schema}}.runs (workflow, created_at, id);
CREATE INDEX runs_unsuccessful_idx ON {{schema}}.runs (created_at, id) WHERE unsuccessful;
CREATE INDEX runs_tenant_unsuccessful_idx ON {{schema}}.runs (tenant, created_at, id) WHERE unsuccessful;

-- The runs in flight are not kept in a table of their own: each has a task
-- in the ready queue, waiting for a timer, running or incoming, so lists of
-- running runs and the stats find them from those (see pgstore's
-- inflightRuns), and no run pays a row written and deleted for it.

-- Settled runs counted by the minute they settled in, workflow, tenant and
-- status, so that the stats read a few rows per minute of their window,
-- however many runs settled. Each transaction adds to the rows of its
-- connection's shard, so that concurrent transactions rarely wait for one
-- another's row; retention merges the shards of closed minutes. Minutes
-- are whole minutes since the Unix epoch, whatever the session's time zone
-- (as pgstore's minuteOf and dag.Minute compute them).
CREATE TABLE {{schema}}.run_counts (
    minute   timestamptz NOT NULL,
    workflow text COLLATE "C" NOT NULL,
    tenant   text COLLATE "C" NOT NULL,
    status   text NOT NULL,
    shard    smallint NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (minute, workflow, tenant, status, shard)
);
INSERT INTO {{schema}}.run_counts (minute, workflow, tenant, status, shard, n)
SELECT to_timestamp(floor(extract(epoch FROM finished_at) / 60) * 60), workflow, tenant, status, 0, count(*)
FROM {{schema}}.runs WHERE finished_at IS NOT NULL
GROUP BY 1, 2, 3, 4;

-- Retention removes shapes no run uses any more; used_at is when a store
-- last made sure a shape is there, so that a shape about to be used again is
-- not removed under it. The index serves that check and the foreign key.
CREATE INDEX runs_shape_idx ON {{schema}}.runs (shape_id);
ALTER TABLE {{schema}}.shapes ADD COLUMN used_at timestamptz NOT NULL DEFAULT now();

-- When a task became ready, for the age of the oldest ready task (stats).
ALTER TABLE {{schema}}.ready ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now();
