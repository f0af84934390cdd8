-- The workers' records (workers.go): what each serves and runs, and when
-- it was last seen. Liveness is judged on the database's clock.

-- name: registerWorker
-- An upsert; the start time is set when the worker has just started
-- ($10), kept otherwise.
INSERT INTO {{schema}}.workers AS w (id, host, version, workflows, concurrency, in_flight, leader, dead_after, started_at, last_seen, accepts,
                                     schema_level)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9::timestamptz, now()), coalesce($9::timestamptz, now()), $11, $12)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, version = excluded.version, workflows = excluded.workflows, accepts = excluded.accepts,
    schema_level = excluded.schema_level,
    concurrency = excluded.concurrency, in_flight = excluded.in_flight, leader = excluded.leader,
    dead_after = excluded.dead_after, last_seen = excluded.last_seen,
    started_at = CASE WHEN $10::boolean THEN excluded.started_at ELSE w.started_at END;

-- name: removeWorker
DELETE FROM {{schema}}.workers WHERE id = $1;

-- name: listWorkers
-- Every worker (a row with the time alone when there is none), and
-- whether it is the leader: the worker holding the leader's lease while
-- it has not expired (on the database's clock, whatever $1 says).
SELECT n.now, id, host, version, workflows, concurrency, in_flight, leader, dead_after, started_at, last_seen, accepts,
       coalesce(w.id = l.worker, false)
FROM (SELECT coalesce($1::timestamptz, now()) AS now) n
LEFT JOIN {{schema}}.workers w ON true
LEFT JOIN (SELECT worker FROM {{schema}}.leader WHERE one AND expires_at > now()) l ON true
ORDER BY w.id;

-- name: staleWorkers
-- The records not seen for $2 microseconds (dag.WorkerPruneAfter), as
-- candidates: dag.WorkerPrunable decides.
WITH n AS (SELECT coalesce($1::timestamptz, now()) AS now)
SELECT id, last_seen, dead_after, n.now FROM {{schema}}.workers, n
WHERE last_seen <= n.now - make_interval(secs => $2::bigint / 1e6);

-- name: deleteWorkers
-- The records staleWorkers found and PruneWorkers chose, unless they were
-- refreshed in between.
DELETE FROM {{schema}}.workers w USING unnest($1::text[], $2::timestamptz[]) AS c(id, seen)
WHERE w.id = c.id AND w.last_seen = c.seen;
