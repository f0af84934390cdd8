-- Messages: events (run_id NULL, for every task waiting for their tenant
-- and key) and signals (to one run). See waits.go for how events and waits
-- meet under a transaction advisory lock on the event's tenant and key.

-- name: firstEvents
-- The first event each beginning wait may receive: of its tenant and key,
-- sent at or after its lookback's start, past the skip first ones (whose
-- payloads it refused).
SELECT u.ord, m.payload
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[]) WITH ORDINALITY AS u(tenant, key, since, skip, ord)
CROSS JOIN LATERAL (
  SELECT payload FROM {{schema}}.messages
  WHERE run_id IS NULL AND tenant = u.tenant AND key = u.key AND sent_at >= u.since
  ORDER BY sent_at, id OFFSET u.skip LIMIT 1) m;

-- name: firstSignals
-- The first signal of each name a beginning wait of a run may receive:
-- the first sent to the run, past the skip first ones (whose payloads it
-- refused).
SELECT u.ord, m.payload
FROM unnest($1::uuid[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(run_id, key, skip, ord)
CROSS JOIN LATERAL (
  SELECT payload FROM {{schema}}.messages
  WHERE run_id = u.run_id AND key = u.key ORDER BY id OFFSET u.skip LIMIT 1) m;

-- name: sendEvents
-- Records events (their keys locked) and leaves each a message for every
-- task waiting for its key, in the order of the events: the first message
-- of a task is the one it receives. The waiting tasks of each event are
-- probed by key (OFFSET 0 keeps the subquery a probe rather than a join
-- over every waiting task).
WITH m AS (
  INSERT INTO {{schema}}.messages (tenant, key, payload, sent_at)
  SELECT u.tenant, u.key, u.payload, coalesce($4, clock_timestamp())
  FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS u(tenant, key, payload, ord) ORDER BY u.ord
  RETURNING id, tenant, key, payload
), i AS (
  INSERT INTO {{schema}}.inbox (run_id, kind, step, token, message_id, payload)
  SELECT w.run_id, 'event', w.name, w.token, m.id, m.payload
  FROM m CROSS JOIN LATERAL (
    SELECT t.run_id, t.name, t.token FROM {{schema}}.tasks t
    WHERE t.tenant = m.tenant AND t.wait_key = m.key AND t.state = 'WAITING' OFFSET 0) w
  ORDER BY m.id, w.run_id, w.name
  RETURNING id, run_id, message_id
)
SELECT m.id, NULL::bigint, NULL::uuid FROM m
UNION ALL
SELECT i.message_id, i.id, i.run_id FROM i;

-- name: insertSignal
INSERT INTO {{schema}}.messages (tenant, key, run_id, payload, sent_at) VALUES ($1, $2, $3, $4, $5);

-- name: pruneEvents
DELETE FROM {{schema}}.messages WHERE id = ANY (ARRAY (
  SELECT id FROM {{schema}}.messages
  WHERE run_id IS NULL AND sent_at < coalesce($1, now()) - $2::bigint * interval '1 microsecond'
  ORDER BY sent_at, id LIMIT $3));
