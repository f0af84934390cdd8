-- durable 008: the registry of workers (see store.WorkerRegistry and
-- docs/design.md, "Live workers").
--
-- One row per engine, upserted at its start and every
-- dag.WorkerRefresh(dead_after), deleted at its graceful stop. A row is
-- live while last_seen is within its dead_after (dag.WorkerLive, judged on
-- the database's clock); the leader deletes rows not seen for a day. The
-- table holds as many rows as there are workers: it needs no index but
-- its key.
CREATE TABLE {{schema}}.workers (
    id           text COLLATE "C" PRIMARY KEY,
    host         text NOT NULL DEFAULT '',
    version      text NOT NULL DEFAULT '',
    -- Sorted names of the workflows the worker serves.
    workflows    text[] COLLATE "C" NOT NULL DEFAULT '{}',
    concurrency  integer NOT NULL,
    in_flight    integer NOT NULL,
    leader       boolean NOT NULL DEFAULT false,
    -- The worker's liveness window (Config.DeadAfter), in microseconds.
    dead_after   bigint NOT NULL CHECK (dead_after > 0),
    started_at   timestamptz NOT NULL,
    last_seen    timestamptz NOT NULL
);
