-- Lanes (a workflow's runs of one tenant) and the last block each was
-- given, for fair queuing (lanes.go, internal/core/fairq).

-- name: ensureLanes
-- Lanes of new runs, in the order of $1/$2 (sorted by the caller), with
-- the group of their tenant. (Unlike tenants' groups, lanes use no
-- sequence: the lanes of a batch that fails on an existing run leave no
-- gaps, and need no guard.)
INSERT INTO {{schema}}.lanes (workflow, tenant, grp)
SELECT u.workflow, u.tenant, t.grp
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(workflow, tenant, ord)
JOIN {{schema}}.tenants t ON t.name = u.tenant
ORDER BY u.ord
ON CONFLICT (workflow, tenant) DO NOTHING;

-- name: lockLanes
SELECT l.workflow, l.tenant, l.grp, l.last_block
FROM {{schema}}.lanes l JOIN unnest($1::text[], $2::text[]) AS u(workflow, tenant)
  ON l.workflow = u.workflow AND l.tenant = u.tenant
ORDER BY l.workflow, l.tenant FOR UPDATE OF l;

-- name: updateLanes
UPDATE {{schema}}.lanes l SET last_block = u.last_block
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(workflow, tenant, last_block)
WHERE l.workflow = u.workflow AND l.tenant = u.tenant;
