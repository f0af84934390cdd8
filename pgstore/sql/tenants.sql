-- Tenants and their groups (fair queuing; see lanes.sql).

-- name: ensureTenants
-- New tenants get their groups in the order of $1 (sorted by the caller),
-- and only when no run ID of the batch is taken ($2): the batch fails on
-- it, or it is a duplicate (and create adds the lanes of the other runs),
-- so that sequential calls leave no gaps in the groups.
INSERT INTO {{schema}}.tenants (name, grp)
SELECT n.name, nextval('{{schema}}.tenant_groups')
FROM unnest($1::text[]) WITH ORDINALITY AS n(name, ord)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.tenants t WHERE t.name = n.name)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs WHERE id = ANY($2::uuid[]))
ORDER BY n.ord
ON CONFLICT (name) DO NOTHING;
