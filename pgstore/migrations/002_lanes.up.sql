-- durable 002: fair queuing per workflow, and timers in firing order.
--
-- Fair order is kept per workflow (see docs/fair-queuing.md): a lane is one
-- tenant's place in one workflow's queue, and each workflow has its own
-- frontier. Before, one frontier for every workflow let a fast workflow push
-- it far ahead, so that a new tenant of a slow workflow waited behind that
-- workflow's whole backlog.

-- One lane per workflow and tenant: the tenant's group (copied from tenants)
-- and the last block the lane placed a task in, NULL before its first.
CREATE TABLE {{schema}}.lanes (
    workflow   text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    grp        bigint NOT NULL CONSTRAINT lanes_grp_check CHECK (grp >= 0 AND grp < 1048576),
    last_block bigint,
    PRIMARY KEY (workflow, tenant)
);

-- Runs in flight keep their tenants' places: each of their lanes continues
-- after the block its tenant last used.
INSERT INTO {{schema}}.lanes (workflow, tenant, grp, last_block)
SELECT DISTINCT r.workflow, r.tenant, t.grp, t.last_block
FROM {{schema}}.runs r JOIN {{schema}}.tenants t ON t.name = r.tenant
WHERE r.finished_at IS NULL;

ALTER TABLE {{schema}}.tenants DROP COLUMN last_block;

-- Each claimer's frontier row also records the workflows it serves: the
-- frontier of a workflow is the highest block of the claimers serving it.
-- Existing rows count for every known workflow, which starts each at the
-- old, global frontier.
ALTER TABLE {{schema}}.frontier ADD COLUMN workflows text[] NOT NULL DEFAULT '{}';
UPDATE {{schema}}.frontier
SET workflows = coalesce((SELECT array_agg(DISTINCT workflow ORDER BY workflow) FROM {{schema}}.shapes), '{}');

-- A tenant has one group, and a lane in each workflow: its tasks in two
-- workflows can share a block, and so an id. Ids are unique within a
-- workflow's queue, and a task's claim tokens (the ids of its ready rows)
-- still only ever grow.
ALTER TABLE {{schema}}.ready DROP CONSTRAINT ready_pkey;
ALTER TABLE {{schema}}.ready ADD PRIMARY KEY (id, workflow);

-- Timers fire in (due_at, run_id, idx) order; with the index on due_at alone
-- a LIMIT over many timers due at one instant read all of them to sort.
DROP INDEX {{schema}}.tasks_due_at_idx;
CREATE INDEX tasks_due_at_idx ON {{schema}}.tasks (due_at, run_id, idx) WHERE due_at IS NOT NULL;
