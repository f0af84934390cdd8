-- durable 007: steps that wait for events, signals, child runs and the
-- items of map steps (see docs/design.md, "Waits, child runs and maps").
--
-- As in 004, every index added here is partial, over the rows that use the
-- feature, so that runs without waits cost nothing more.

ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_kind_check;
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_kind_check
    CHECK (kind IN ('step', 'sleep', 'on_failure', 'event', 'child', 'map', 'item')) NOT VALID;
ALTER TABLE {{schema}}.tasks VALIDATE CONSTRAINT tasks_kind_check;
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('PENDING', 'QUEUED', 'RUNNING', 'SLEEPING', 'WAITING',
                     'COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')) NOT VALID;
ALTER TABLE {{schema}}.tasks VALIDATE CONSTRAINT tasks_state_check;
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_type_check;
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_type_check
    CHECK (type IN ('QUEUED', 'STARTED', 'COMPLETED', 'FAILED', 'RETRYING', 'SKIPPED', 'SLEEPING', 'WOKEN',
                    'CANCELLED', 'REPLAYED', 'WAITING')) NOT VALID;
ALTER TABLE {{schema}}.events VALIDATE CONSTRAINT events_type_check;

-- wait_key: what a WAITING event step waits for (an event key, or a
-- signal's name after a \x01 mark; see dag.SignalKey). child_id: the child
-- run a child step started last. items, items_left: a map step's items,
-- and those not completed yet. item, item_input: an item's number and
-- input. An item's name is "~step[n]", which sorts after every step's
-- name, so that loading a run's steps (name < '~') reads none of its items;
-- its idx is its map step's.
ALTER TABLE {{schema}}.tasks
    ADD COLUMN wait_key text COLLATE "C",
    ADD COLUMN child_id uuid,
    ADD COLUMN items integer,
    ADD COLUMN items_left integer,
    ADD COLUMN item integer,
    ADD COLUMN item_input bytea;

-- Every WAITING task, by tenant (the runs in flight, the stats) and wait
-- key (the tasks an event is for).
CREATE INDEX tasks_waiting_idx ON {{schema}}.tasks (tenant, wait_key) WHERE state = 'WAITING';

-- A child run's parent: the run, the task waiting for it, and the child's
-- step whose output is its result. Lists of a run's children read the
-- partial index.
ALTER TABLE {{schema}}.runs
    ADD COLUMN parent_id uuid,
    ADD COLUMN parent_step text COLLATE "C",
    ADD COLUMN parent_result text COLLATE "C";
CREATE INDEX runs_parent_idx ON {{schema}}.runs (parent_id, created_at, id) WHERE parent_id IS NOT NULL;

-- Events (run_id NULL) and signals (run_id set), as sent. Events are kept
-- for a wait that begins later and looks back (WaitSpec.Lookback) until
-- the leader prunes them (Store.PruneEvents); signals go with their run.
CREATE TABLE {{schema}}.messages (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant  text COLLATE "C" NOT NULL,
    key     text COLLATE "C" NOT NULL,
    run_id  uuid,
    payload bytea,
    sent_at timestamptz NOT NULL
);
CREATE INDEX messages_event_idx ON {{schema}}.messages (tenant, key, sent_at, id) WHERE run_id IS NULL;
CREATE INDEX messages_sent_idx ON {{schema}}.messages (sent_at, id) WHERE run_id IS NULL;
CREATE INDEX messages_signal_idx ON {{schema}}.messages (run_id, key, id) WHERE run_id IS NOT NULL;

-- Messages for runs, written by the transition (or the sent event) that
-- leaves them and applied to their run by a transition of its own
-- (dag.Message): an event for a waiting task, a child run's settlement
-- for its parent's task, the cancellation of a child whose parent gave it
-- up. A row exists until it is applied; the lock of its run orders the
-- transitions applying it.
CREATE TABLE {{schema}}.inbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       uuid NOT NULL,
    kind         text NOT NULL CONSTRAINT inbox_kind_check CHECK (kind IN ('event', 'child', 'cancel')),
    step         text COLLATE "C",
    token        bigint,
    message_id   bigint,
    child_id     uuid,
    status       text,
    result       text COLLATE "C",
    result_state text,
    error        text,
    payload      bytea
);
CREATE INDEX inbox_run_idx ON {{schema}}.inbox (run_id, id);
