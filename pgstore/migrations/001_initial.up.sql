-- durable: initial schema. {{schema}} is replaced by the quoted schema name.
--
-- Names, tenants and workflows are compared bytewise (COLLATE "C"): it is
-- faster than a locale's collation, and orders them as Go does.

-- The DAG shape of runs, recorded once per distinct shape. id is the first
-- 16 bytes of the SHA-256 of the shape's canonical JSON.
CREATE TABLE {{schema}}.shapes (
    id         uuid PRIMARY KEY,
    workflow   text NOT NULL,
    shape      jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {{schema}}.runs (
    id          uuid PRIMARY KEY,
    workflow    text COLLATE "C" NOT NULL,
    tenant      text COLLATE "C" NOT NULL,
    shape_id    uuid NOT NULL REFERENCES {{schema}}.shapes (id),
    status      text NOT NULL
        CONSTRAINT runs_status_check CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED')),
    input       bytea,
    failed_step text,
    error       text,
    created_at  timestamptz NOT NULL,
    finished_at timestamptz
) WITH (fillfactor = 90);

-- One row per task of a run. idx is the task's position in the run's shape
-- (the on-failure task comes last), so tasks load in shape order and timers
-- fire in a deterministic order.
CREATE TABLE {{schema}}.tasks (
    run_id      uuid NOT NULL REFERENCES {{schema}}.runs (id) ON DELETE CASCADE,
    name        text COLLATE "C" NOT NULL,
    -- The run's tenant, copied so that per-tenant caps count RUNNING tasks
    -- through the partial index below without joining runs.
    tenant      text COLLATE "C" NOT NULL,
    idx         integer NOT NULL CONSTRAINT tasks_idx_check CHECK (idx >= 0),
    kind        text NOT NULL
        CONSTRAINT tasks_kind_check CHECK (kind IN ('step', 'sleep', 'on_failure')),
    state       text NOT NULL
        CONSTRAINT tasks_state_check CHECK (state IN ('PENDING', 'QUEUED', 'RUNNING', 'SLEEPING',
                                                      'COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    attempt     integer NOT NULL DEFAULT 0 CONSTRAINT tasks_attempt_check CHECK (attempt >= 0),
    token       bigint NOT NULL DEFAULT 0,
    worker      text COLLATE "C",
    due_at      timestamptz,
    output      bytea,
    error       text,
    started_at  timestamptz,
    finished_at timestamptz,
    -- The last heartbeat of the current claim: a claim is alive while its
    -- holder vouches for it (see docs/design.md, "Heartbeats").
    heartbeat_at timestamptz,
    -- The task's latest events of the happy path, kept here instead of in
    -- events (the row is written by the same transition anyway): the latest
    -- QUEUED event without detail (id, time, attempt), the latest STARTED
    -- event (id; its time and attempt are started_at and attempt), and the
    -- COMPLETED event (id; finished_at, attempt). When a later transition
    -- supersedes one of them it is moved to events first. See
    -- docs/design.md, "The event log".
    q_id        bigint,
    q_at        timestamptz,
    q_attempt   integer,
    s_id        bigint,
    c_id        bigint,
    PRIMARY KEY (run_id, name)
) WITH (fillfactor = 80);

-- Timers: sleeping tasks and retry backoffs.
CREATE INDEX tasks_due_at_idx ON {{schema}}.tasks (due_at) WHERE due_at IS NOT NULL;
-- Running tasks: rescue of dead workers and per-tenant concurrency caps.
CREATE INDEX tasks_running_idx ON {{schema}}.tasks (tenant) WHERE state = 'RUNNING';

-- The ready queue: a row exists exactly while its task is QUEUED and
-- claimable. id is the task's fair-queue id, which doubles as the claim token.
CREATE TABLE {{schema}}.ready (
    id       bigint PRIMARY KEY CONSTRAINT ready_id_check CHECK (id > 0),
    run_id   uuid NOT NULL,
    name     text COLLATE "C" NOT NULL,
    workflow text COLLATE "C" NOT NULL,
    tenant   text COLLATE "C" NOT NULL,
    UNIQUE (run_id, name)
);

-- Root tasks of runs created inside a caller's transaction wait here until
-- an engine gives them fair-queue ids, in a short transaction of its own, so
-- that a caller's long transaction never holds fair-queue locks.
CREATE TABLE {{schema}}.incoming (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id   uuid NOT NULL,
    name     text COLLATE "C" NOT NULL,
    workflow text COLLATE "C" NOT NULL,
    tenant   text COLLATE "C" NOT NULL
);

-- Fair-queue groups: one per tenant, assigned in order, at most 2^20.
CREATE SEQUENCE {{schema}}.tenant_groups AS bigint MINVALUE 0 MAXVALUE 1048575 START 0 NO CYCLE;

CREATE TABLE {{schema}}.tenants (
    name       text COLLATE "C" PRIMARY KEY,
    grp        bigint NOT NULL UNIQUE CONSTRAINT tenants_grp_check CHECK (grp >= 0 AND grp < 1048576),
    -- The last fair-queue block this tenant enqueued into; NULL before its first task.
    last_block bigint
);

-- The highest fair-queue block claimed so far (fairq.FirstBlock initially).
-- The frontier is the highest block of any row: each claimer advances its
-- own row, so that claims never wait for each other; the leader prunes rows
-- below the maximum.
CREATE TABLE {{schema}}.frontier (
    shard text COLLATE "C" PRIMARY KEY,
    block bigint NOT NULL
);
INSERT INTO {{schema}}.frontier (shard, block) VALUES ('', 1);

-- Event ids: each transaction takes one value after locking its runs, and
-- numbers its events value·2^20 + k, so ids follow the order of commits on
-- each run.
CREATE SEQUENCE {{schema}}.event_blocks AS bigint MINVALUE 1 START 1;

-- No foreign key to runs: claims insert STARTED events while transitions hold
-- the run row, and the key-share locks of a foreign key check would turn
-- those row locks into multixacts on the hottest path.
CREATE TABLE {{schema}}.events (
    run_id  uuid NOT NULL,
    id      bigint NOT NULL,
    step    text COLLATE "C" NOT NULL,
    type    text NOT NULL
        CONSTRAINT events_type_check CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING',
                                                     'SKIPPED', 'SLEEPING', 'WOKEN', 'CANCELLED')),
    attempt integer NOT NULL,
    at      timestamptz NOT NULL,
    detail  text,
    due_at  timestamptz,
    PRIMARY KEY (run_id, id)
);
