-- The use of each rate-limit key per window (flow.go, internal/flow).

-- name: lockRates
-- Counters are created on first use and locked in key order: the upsert
-- takes the row lock whether it inserts or updates.
INSERT INTO {{schema}}.rate_limits AS l (key, window_start, used)
SELECT key, w, 0 FROM unnest($1::text[], $2::timestamptz[]) AS u(key, w) ORDER BY key, w
ON CONFLICT (key, window_start) DO UPDATE SET used = l.used
RETURNING key, window_start, used;

-- name: writeRates
UPDATE {{schema}}.rate_limits l SET used = u.used
FROM unnest($1::text[], $2::timestamptz[], $3::int[]) AS u(key, w, used)
WHERE l.key = u.key AND l.window_start = u.w;

-- name: pruneRates
DELETE FROM {{schema}}.rate_limits l WHERE ctid = ANY (ARRAY (
  SELECT o.ctid FROM unnest($1::text[], $2::timestamptz[]) AS u(key, w)
  CROSS JOIN LATERAL (SELECT l2.ctid FROM {{schema}}.rate_limits l2 WHERE l2.key = u.key AND l2.window_start < u.w) o));
