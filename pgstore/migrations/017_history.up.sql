-- durable 017: the history (runs, tasks, events) in time partitions, so
-- that retention drops whole periods instead of deleting rows (issue #32;
-- docs/design.md, "Deletes or partitions", and docs/operating.md,
-- "Retention").
--
-- runs is partitioned by its id, tasks and events by their run's id, over
-- the same ranges: the engine's run ids are UUIDv7 (or laid out as one,
-- dag.TimeOrderedID), so a range of ids is a period of creation times. The
-- leader creates each period's partitions ahead of time and drops them once
-- every run in them has expired, moving the runs still kept (in flight, or
-- settled too recently) into the default partition first (pgstore's
-- partitions.go). history_partitions lists the periods, for the stores that
-- address a period's tables directly.
--
-- The tables as they are become the default partitions, without a rewrite:
-- their rows (and runs whose ids are not time-ordered: a caller's own
-- WithRunID, UUIDv4) stay there and are deleted row by row, as before.
--
-- Indexes keep their names on the partitioned tables; the default
-- partitions' take a _default infix, but for runs_pkey: a unique_violation
-- names the partition's index, and engines released before this migration
-- know a run id taken by that name (the periods' partitions have
-- runs_<suffix>_pkey; the partitioned table's own is runs_id_pkey).

-- The tables in the order the claims take them (tasks, then runs), so
-- that a claim under way never waits for the migration while holding what
-- the migration waits for.
LOCK TABLE {{schema}}.tasks, {{schema}}.runs, {{schema}}.events IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER runs_delete_tasks ON {{schema}}.runs;

-- A constraint a period's creation left on a default partition (its
-- range excluded: pgstore's freeDefaults) goes first, should the tables
-- have been through 017 and back by code that kept it: the partitioned
-- tables are made LIKE them, constraints included.
DO $$
DECLARE
  t text;
  i record;
BEGIN
  FOR i IN SELECT r.relname, c.conname FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
           WHERE r.relnamespace = '{{schema}}'::regnamespace AND r.relname IN ('runs', 'tasks', 'events')
             AND c.contype = 'c' AND c.conname LIKE '%\_default\_free\_p%' LOOP
    EXECUTE format('ALTER TABLE {{schema}}.%I DROP CONSTRAINT %I', i.relname, i.conname);
  END LOOP;
  FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events'] LOOP
    EXECUTE format('ALTER TABLE {{schema}}.%I RENAME TO %I', t, t || '_default');
    FOR i IN SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             WHERE x.indrelid = format('{{schema}}.%I', t || '_default')::regclass AND c.relname <> 'runs_pkey' LOOP
      EXECUTE format('ALTER INDEX {{schema}}.%I RENAME TO %I', i.relname, t || '_default' || substr(i.relname, length(t) + 1));
    END LOOP;
  END LOOP;
END
$$;

-- Idempotency keys: a unique index of a partitioned table must hold its
-- partition key, so the keys of runs are unique in a table of their own,
-- filled by a trigger of runs, and whose primary key keeps the name of the
-- unique index it replaces (the name the engines look for in a
-- unique_violation). Only runs with a key write to it.
CREATE TABLE {{schema}}.idem_keys (
    workflow text COLLATE "C" NOT NULL,
    tenant   text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    run_id   uuid NOT NULL,
    CONSTRAINT runs_idem_key_idx PRIMARY KEY (workflow, tenant, key)
);
CREATE INDEX idem_keys_run_idx ON {{schema}}.idem_keys (run_id);
INSERT INTO {{schema}}.idem_keys (workflow, tenant, key, run_id)
SELECT workflow, tenant, idem_key, id FROM {{schema}}.runs_default WHERE idem_key IS NOT NULL;
DROP INDEX {{schema}}.runs_default_idem_key_idx;

CREATE TABLE {{schema}}.runs (LIKE {{schema}}.runs_default INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (id);
ALTER TABLE {{schema}}.runs ADD CONSTRAINT runs_id_pkey PRIMARY KEY (id);
ALTER TABLE {{schema}}.runs ADD CONSTRAINT runs_shape_id_fkey FOREIGN KEY (shape_id) REFERENCES {{schema}}.shapes (id);
CREATE INDEX runs_created_idx ON {{schema}}.runs (created_at, id);
CREATE INDEX runs_deadline_idx ON {{schema}}.runs (deadline_at, id) WHERE deadline_at IS NOT NULL;
CREATE INDEX runs_idem_key_created_idx ON {{schema}}.runs (idem_key, created_at, id) WHERE idem_key IS NOT NULL;
CREATE INDEX runs_parent_idx ON {{schema}}.runs (parent_id, created_at, id) WHERE parent_id IS NOT NULL;
CREATE INDEX runs_shape_idx ON {{schema}}.runs (shape_id);
CREATE INDEX runs_tenant_created_idx ON {{schema}}.runs (tenant, created_at, id);
CREATE INDEX runs_tenant_unsuccessful_idx ON {{schema}}.runs (tenant, created_at, id) WHERE unsuccessful;
CREATE INDEX runs_unsuccessful_idx ON {{schema}}.runs (created_at, id) WHERE unsuccessful;
CREATE INDEX runs_workflow_created_idx ON {{schema}}.runs (workflow, created_at, id);
ALTER TABLE {{schema}}.runs ATTACH PARTITION {{schema}}.runs_default DEFAULT;

CREATE TABLE {{schema}}.tasks (LIKE {{schema}}.tasks_default INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (run_id);
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY (run_id, name);
CREATE INDEX tasks_due_at_idx ON {{schema}}.tasks (due_at, run_id, idx) WHERE due_at IS NOT NULL;
CREATE INDEX tasks_running_idx ON {{schema}}.tasks (tenant) WHERE state = 'RUNNING';
CREATE INDEX tasks_timeout_idx ON {{schema}}.tasks (timeout_at, run_id, idx) WHERE timeout_at IS NOT NULL;
CREATE INDEX tasks_waiting_idx ON {{schema}}.tasks (tenant, wait_key) WHERE state = 'WAITING';
ALTER TABLE {{schema}}.tasks ATTACH PARTITION {{schema}}.tasks_default DEFAULT;

CREATE TABLE {{schema}}.events (LIKE {{schema}}.events_default INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (run_id);
ALTER TABLE {{schema}}.events ADD CONSTRAINT events_pkey PRIMARY KEY (run_id, id);
ALTER TABLE {{schema}}.events ATTACH PARTITION {{schema}}.events_default DEFAULT;

-- A run's idempotency key is taken before the run is written: a key taken
-- by another run (committed, or by a transaction that then commits: the
-- insert waits for it) fails the insert with a unique_violation of
-- runs_idem_key_idx, or, when the transaction set durable.skip_taken_keys
-- (CreateRunsTx, inside a caller's transaction that must not abort), skips
-- the run. Engines released before this migration insert runs the same
-- way and get the same error.
CREATE FUNCTION {{schema}}.take_idem_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {{schema}}.idem_keys (workflow, tenant, key, run_id)
  VALUES (NEW.workflow, NEW.tenant, NEW.idem_key, NEW.id) ON CONFLICT DO NOTHING;
  IF FOUND OR EXISTS (SELECT 1 FROM {{schema}}.idem_keys
                      WHERE workflow = NEW.workflow AND tenant = NEW.tenant AND key = NEW.idem_key AND run_id = NEW.id) THEN
    RETURN NEW; -- taken now, or by this run before (moved to the default partition: history.go)
  END IF;
  IF current_setting('durable.skip_taken_keys', true) = 'on' THEN
    RETURN NULL;
  END IF;
  RAISE unique_violation USING CONSTRAINT = 'runs_idem_key_idx', TABLE = 'idem_keys', SCHEMA = '{{schema}}',
    MESSAGE = 'duplicate key value violates unique constraint "runs_idem_key_idx"',
    DETAIL = format('Key (workflow, tenant, idem_key)=(%s, %s, %s) already exists.', NEW.workflow, NEW.tenant, NEW.idem_key);
END
$$;
CREATE TRIGGER runs_take_idem_key BEFORE INSERT ON {{schema}}.runs
  FOR EACH ROW WHEN (NEW.idem_key IS NOT NULL) EXECUTE FUNCTION {{schema}}.take_idem_key();

-- Deleting runs (row by row: retention of the default partition, or an
-- operator's DELETE) deletes their tasks and frees their keys.
CREATE OR REPLACE FUNCTION {{schema}}.delete_tasks_of_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {{schema}}.tasks t USING gone g WHERE t.run_id = g.id;
  -- Every key pointing at a run deleted, whether the run holds it or not
  -- (an engine before 017 whose insert took a key, then skipped its run
  -- for an ID another transaction took: the key is left pointing there).
  DELETE FROM {{schema}}.idem_keys k USING gone g WHERE k.run_id = g.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER runs_delete_tasks AFTER DELETE ON {{schema}}.runs
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.delete_tasks_of_runs();

-- The periods that have partitions: runs_<suffix>, tasks_<suffix> and
-- events_<suffix> hold the runs whose ids are in [lo, hi), and their tasks
-- and events. Written in the transactions that create and drop them.
CREATE TABLE {{schema}}.history_partitions (
    lo     uuid PRIMARY KEY,
    hi     uuid NOT NULL CONSTRAINT history_partitions_range_check CHECK (hi > lo),
    suffix text COLLATE "C" NOT NULL UNIQUE
);

-- The roles granted rights on the tables keep them: on the partitioned
-- tables (the tables renamed to _default keep theirs), and, as on runs, on
-- the keys' and the periods' tables (the triggers write the keys with the
-- rights of the role that inserts or deletes a run). A period's partitions
-- get them when they are made (pgstore's preparePeriod).
DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT t.dst, a.privilege_type,
                  CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
           FROM (VALUES ('runs_default', 'runs'), ('tasks_default', 'tasks'), ('events_default', 'events'),
                        ('runs_default', 'idem_keys'), ('runs_default', 'history_partitions')) AS t(src, dst)
           JOIN pg_class c ON c.oid = format('{{schema}}.%I', t.src)::regclass
           CROSS JOIN LATERAL aclexplode(c.relacl) a
           WHERE a.grantee <> c.relowner LOOP
    EXECUTE format('GRANT %s ON {{schema}}.%I TO %s', g.privilege_type, g.dst, g.grantee);
  END LOOP;
END
$$;

-- The newest migration the engine of each worker knows: the leader
-- creates no period while a live worker's engine predates this migration
-- (0: it does not write the column), whose statements assume one table.
ALTER TABLE {{schema}}.workers ADD COLUMN schema_level integer NOT NULL DEFAULT 0;
