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

-- The frontier of each workflow: the highest block claimed by each claimer
-- (shard) serving it; a claim advances the rows of every workflow its
-- claimer serves, and the leader prunes rows below each workflow's highest.
-- Every known workflow starts at the old, global frontier.
ALTER TABLE {{schema}}.frontier RENAME TO frontier_001;
ALTER TABLE {{schema}}.frontier_001 RENAME CONSTRAINT frontier_pkey TO frontier_001_pkey;
CREATE TABLE {{schema}}.frontier (
    workflow text COLLATE "C" NOT NULL,
    shard    text COLLATE "C" NOT NULL,
    block    bigint NOT NULL,
    PRIMARY KEY (workflow, shard)
);
INSERT INTO {{schema}}.frontier (workflow, shard, block)
SELECT w.workflow, '', f.block
FROM (SELECT DISTINCT workflow FROM {{schema}}.shapes) w,
     (SELECT max(block) AS block FROM {{schema}}.frontier_001) f
WHERE f.block IS NOT NULL;
DROP TABLE {{schema}}.frontier_001;

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
