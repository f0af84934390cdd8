-- durable 010: who holds leadership (see store.WorkerRegistry and
-- docs/design.md, "Live workers").
--
-- One row: the worker that last took the leader's advisory lock and the
-- backend (pid) of its election connection, written by that connection as
-- soon as it holds the lock. A worker is listed as the leader only while
-- that backend holds the lock (pg_locks), so a leader whose session died is
-- never shown beside the next one, whatever its worker record says.
CREATE TABLE {{schema}}.leader (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    worker  text COLLATE "C" NOT NULL,
    pid     integer NOT NULL,
    since   timestamptz NOT NULL
);
