-- The leader's lease (elector.go): one row, whose term counts the
-- leaderships and whose expires_at (the database's clock) ends the
-- current one unless its leader renews it. Every statement is one round
-- trip in its own transaction: nothing depends on a session.

-- name: acquireLease
-- Takes the lease for worker $1 for $2 microseconds when it has expired
-- (or was given up), or when it names $1 (a process restarted under its
-- dead predecessor's worker ID: the predecessor's term is fenced out, were
-- it still running), with the next term, and returns that term (NULL when
-- the lease is held) and how many microseconds the lease read has left
-- (0 when expired): a candidate waits that long, or a lease if shorter,
-- before it tries again. A candidate that finds the lease held writes
-- nothing. An UPDATE of the row waits for the fenced transactions holding
-- it (fence), so a takeover follows the last write of the previous leader.
WITH won AS (
    UPDATE {{schema}}.leader SET term = term + 1, worker = $1, since = now(),
        expires_at = now() + make_interval(secs => $2::bigint / 1e6)
    WHERE one AND (expires_at <= now() OR worker = $1)
    RETURNING term
)
SELECT (SELECT term FROM won),
       coalesce((SELECT CASE WHEN expires_at > now() THEN (extract(epoch FROM expires_at - now()) * 1e6)::bigint ELSE 0 END
                 FROM {{schema}}.leader WHERE one), 0);

-- name: renewLease
-- Renews the lease of term $1 for $2 microseconds, if it is still that
-- term's and has not expired, and refreshes the leader's worker record
-- (last_seen) with it; returns the number of leases renewed (0 or 1).
WITH renewed AS (
    UPDATE {{schema}}.leader SET expires_at = now() + make_interval(secs => $2::bigint / 1e6)
    WHERE one AND term = $1 AND expires_at > now()
    RETURNING worker
), touched AS (
    UPDATE {{schema}}.workers w SET last_seen = now() FROM renewed WHERE w.id = renewed.worker
)
SELECT count(*) FROM renewed;

-- name: releaseLease
-- Gives up the lease of term $1 (a leader stopping): it expires now, and a
-- notification on channel $2 tells the candidates listening to take it at
-- once.
WITH released AS (
    UPDATE {{schema}}.leader SET expires_at = now()
    WHERE one AND term = $1 AND expires_at > now()
    RETURNING term
)
SELECT pg_notify($2, 'leader') FROM released;

-- name: fence
-- The first statement of a leader-only write made under a term: see the
-- function (migration 014).
SELECT {{schema}}.fence($1);
