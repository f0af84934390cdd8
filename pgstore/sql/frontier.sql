-- The claimers' frontiers (fair queuing): a row per claimer, with the
-- highest block it claimed and the workflows it serves. The claim
-- advances its row (claim, in ready.sql).

-- name: readFrontiers
-- Every claimer's frontier; fairq.Frontiers computes each workflow's from
-- them. The table holds a row per claimer, and the leader prunes the rows
-- that decide no workflow's frontier.
SELECT block, workflows FROM {{schema}}.frontier;

-- name: pruneFrontier
-- The rows whose deletion changes no workflow's frontier: for each
-- workflow a row serves another row serving it is ahead (by block, then
-- shard, so that of two rows tied the later shard stays), and it is not
-- the highest row of all. leaderCheck (tasks.sql) tells whether there are
-- any, by the same condition: a change to one goes to the other.
DELETE FROM {{schema}}.frontier r
WHERE NOT EXISTS (
  SELECT 1 FROM unnest(r.workflows) AS w(workflow)
  WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.frontier r2
    WHERE w.workflow = ANY(r2.workflows) AND (r2.block, r2.shard) > (r.block, r.shard)))
AND EXISTS (SELECT 1 FROM {{schema}}.frontier r3 WHERE (r3.block, r3.shard) > (r.block, r.shard));
