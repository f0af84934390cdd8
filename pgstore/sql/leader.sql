-- Who leads (elector.go): the leader's advisory lock decides; the row
-- says who holds it, for ListWorkers.

-- name: recordLeader
-- Written on the connection that holds the lock, as soon as it does.
INSERT INTO {{schema}}.leader (one, worker, pid, since) VALUES (true, $1, pg_backend_pid(), now())
ON CONFLICT (one) DO UPDATE SET worker = excluded.worker, pid = excluded.pid, since = excluded.since;
