-- durable 010: who holds leadership, and schedules declared in code.
--
-- Leadership (see store.WorkerRegistry and docs/design.md, "Live workers").
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

-- Schedules declared in code (see store.ScheduleDeclarer and
-- docs/semantics.md, "Declared schedules"): declared marks them (the
-- declarations of a workflow replace its declared schedules, and never
-- touch those created through the API); declared_paused is the paused
-- state the declaration says, which paused follows whenever the
-- declaration changes. The few declared schedules of a workflow are read
-- with its schedules' rows at an engine's start; no index is needed.
ALTER TABLE {{schema}}.schedules
    ADD COLUMN declared        boolean NOT NULL DEFAULT false,
    ADD COLUMN declared_paused boolean NOT NULL DEFAULT false;
