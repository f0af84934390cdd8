-- The shapes of runs (the table holds the versions of workflows too).

-- name: loadShapes
SELECT id, shape FROM {{schema}}.shapes WHERE id = ANY($1::uuid[]);

-- name: insertShapes
-- A shape already there gets its used_at refreshed, so that retention
-- leaves it alone while this store trusts it (shapeTrust).
INSERT INTO {{schema}}.shapes (id, workflow, shape, version)
SELECT id, workflow, shape::jsonb, coalesce(shape::jsonb->>'version', '') FROM unnest($1::uuid[], $2::text[], $3::text[]) AS s(id, workflow, shape)
ON CONFLICT (id) DO UPDATE SET used_at = now()
WHERE shapes.used_at < now() - interval '{{shapeTrustSeconds}} seconds';

-- name: listVersions
-- The versions recorded, newest first per workflow.
SELECT workflow, version, shape, created_at FROM {{schema}}.shapes
WHERE $1::text IS NULL OR workflow = $1 ORDER BY workflow, created_at DESC, id;

-- name: pruneShapes
DELETE FROM {{schema}}.shapes s
WHERE s.used_at < now() - $1::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.shape_id = s.id);
