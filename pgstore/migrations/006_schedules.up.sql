-- durable 006: cron schedules (see store.Scheduler and docs/semantics.md).
--
-- A schedule is a row whose next_at is the next slot to fire: the leader
-- waits for the earliest and fires due rows with FOR UPDATE SKIP LOCKED,
-- creating the slot's run and moving next_at in one transaction. The run's
-- id is derived from (schedule id, slot), so a slot fired twice finds its
-- run in runs' primary key: exactly once by key.
CREATE TABLE {{schema}}.schedules (
    tenant      text NOT NULL,
    name        text NOT NULL,
    id          uuid NOT NULL UNIQUE,
    workflow    text NOT NULL,
    input       bytea,
    cron        text NOT NULL,
    time_zone   text NOT NULL DEFAULT '',
    shape       text NOT NULL,
    paused      boolean NOT NULL DEFAULT false,
    -- NULL while paused, or when the schedule is broken (error is set).
    next_at     timestamptz,
    last_slot   timestamptz,
    last_run_id uuid,
    error       text,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, name)
);

-- The due schedules, earliest first; its minimum is the leader's one
-- statement per wake while nothing is due.
CREATE INDEX schedules_due_idx ON {{schema}}.schedules (next_at) WHERE NOT paused AND next_at IS NOT NULL;
