-- durable 005: concurrency keys
-- and rate limits. See internal/flow and docs/design.md, "Concurrency keys
-- and rate limits". Every access is by primary key, so the number of keys
-- does not matter; runs without caps or limits touch none of these tables.

-- Each task's keys, fixed when its run is created; NULL when its step has
-- no cap (ckey) or no rate limit (rkey). Written only for keyed runs.
ALTER TABLE {{schema}}.tasks ADD COLUMN ckey text COLLATE "C", ADD COLUMN rkey text COLLATE "C";

-- Slots held per concurrency key: tasks admitted to the ready queue or
-- RUNNING. A row exists while slots are held or tasks are parked; its lock
-- orders every transition that admits, parks, promotes or releases for the
-- key.
CREATE TABLE {{schema}}.concurrency_slots (
    key  text COLLATE "C" PRIMARY KEY,
    held integer NOT NULL CONSTRAINT concurrency_slots_held_check CHECK (held >= 0)
);

-- Parked tasks: QUEUED, claimable but for their key's cap, in FIFO order
-- per key (seq). A task is in ready or here, never both.
CREATE TABLE {{schema}}.concurrency_waiting (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key      text COLLATE "C" NOT NULL,
    run_id   uuid NOT NULL,
    name     text COLLATE "C" NOT NULL,
    workflow text COLLATE "C" NOT NULL,
    tenant   text COLLATE "C" NOT NULL,
    -- The run's priority, for the ready row it gets when promoted.
    priority smallint NOT NULL DEFAULT 0,
    UNIQUE (run_id, name)
);
CREATE INDEX concurrency_waiting_key_idx ON {{schema}}.concurrency_waiting (key, seq);
CREATE INDEX concurrency_waiting_tenant_idx ON {{schema}}.concurrency_waiting (tenant);

-- Admissions per rate key and fixed window; older windows of a key are
-- deleted when a newer one is used.
CREATE TABLE {{schema}}.rate_limits (
    key          text COLLATE "C" NOT NULL,
    window_start timestamptz NOT NULL,
    used         integer NOT NULL CONSTRAINT rate_limits_used_check CHECK (used >= 0),
    PRIMARY KEY (key, window_start)
);

-- A task admitted under a rate limit may start only within the window that
-- counted it: its ready row holds the window's end, claims pass it over
-- after that, and the leader's timer loop admits it again (in the window
-- then current, or it waits for the next). NULL for every other task.
ALTER TABLE {{schema}}.ready ADD COLUMN rate_until timestamptz;
CREATE INDEX ready_rate_until_idx ON {{schema}}.ready (rate_until, run_id, name) WHERE rate_until IS NOT NULL;
