-- The history's periods (migration 017; history.go): the partitions of
-- runs, tasks and events, one set per period of run ids [lo, hi).

-- name: historyNow
-- The database's time, and whether a worker's engine predates the
-- partitioned history ($1: the migration that made it): the leader then
-- creates no period (history.go). Not only the live workers: one that
-- froze past its DeadAfter may come back, with statements that assume one
-- table. A worker that stops removes its record; the leader removes those
-- of workers not seen for a day.
SELECT now(), EXISTS (SELECT 1 FROM {{schema}}.workers WHERE schema_level < $1);

-- name: historyPeriods
SELECT lo, hi, suffix FROM {{schema}}.history_partitions ORDER BY lo;

-- name: insertHistoryPeriod
INSERT INTO {{schema}}.history_partitions (lo, hi, suffix) VALUES ($1, $2, $3);

-- name: deleteHistoryPeriod
DELETE FROM {{schema}}.history_partitions WHERE lo = $1;

-- name: defaultHolds
-- Whether the default partitions hold rows of the run ids [$1, $2).
SELECT EXISTS (SELECT 1 FROM {{schema}}.runs_default WHERE id >= $1 AND id < $2)
    OR EXISTS (SELECT 1 FROM {{schema}}.tasks_default WHERE run_id >= $1 AND run_id < $2)
    OR EXISTS (SELECT 1 FROM {{schema}}.events_default WHERE run_id >= $1 AND run_id < $2);

-- name: lockHistory
-- The history's advisory lock ($1 names it, with the schema): one store at
-- a time creates or drops periods.
SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0));

-- fragment: lockHistoryTasks
-- Attaching or detaching a period's partitions takes the partitioned
-- tables exclusively (not the weaker lock ATTACH needs): a transaction that
-- holds one of them from before keeps the partitions it saw then for its
-- next statements, and would miss the rows a store writes into the new
-- partitions (a claim taking a ready row whose task it then does not
-- find). The statements that name a period's partitions go on meanwhile.
--
-- tasks first, as the claims take it (claim, in ready.sql: tasks, then
-- runs): taking runs first, a change held it while it waited for the tasks
-- of a claim under way, which waited for runs, until the change's
-- lock_timeout (historyLock), with every statement queued behind them. A
-- transaction that takes runs before tasks (a create or a transition whose
-- runs no period the store knows holds: they name the partitioned tables)
-- can still wait for the change while holding runs: lockHistory waits for
-- the locks after this one only briefly (historyLockRest), then gives way
-- and tries again.
LOCK TABLE ONLY {{schema}}.tasks IN ACCESS EXCLUSIVE MODE

-- fragment: lockHistoryParents
-- The other partitioned tables, after tasks (lockHistoryTasks).
LOCK TABLE ONLY {{schema}}.runs, ONLY {{schema}}.events IN ACCESS EXCLUSIVE MODE

-- fragment: lockHistoryDefaults
-- The default partitions, after the partitioned tables (no claim starts
-- then), in the order of the transitions that name them (lockRuns, then
-- the tasks, then the events): ATTACH reads them (they must hold none of
-- the period's rows) and DETACH changes their constraint.
LOCK TABLE {{schema}}.runs_default, {{schema}}.tasks_default, {{schema}}.events_default IN ACCESS EXCLUSIVE MODE

-- fragment: lockHistoryTables
-- The whole history, partitions included, for a period whose rows move: a
-- statement planned before the move would not find them. Taken after
-- the partitioned tables, so in the transitions' order.
LOCK TABLE {{schema}}.runs, {{schema}}.tasks, {{schema}}.events IN ACCESS EXCLUSIVE MODE

-- fragment: keptRuns
-- The runs of a detached period's partitions ({{period}} is their suffix)
-- to keep: in flight, or created or settled at the cutoff $1 or after
-- (store.Store.PruneRuns). A read-only statement of its own, so that
-- PostgreSQL may scan the partition in parallel: the one scan of a drop,
-- made under the partitioned tables' lock; it counts the partition's runs
-- on the way.
SELECT coalesce(array_agg(id) FILTER (WHERE finished_at IS NULL OR finished_at >= $1 OR created_at >= $1), '{}'),
       count(*)
FROM {{schema}}.runs_{{period}}

-- fragment: dropPeriod
-- A period's partitions, detached ({{period}} is their suffix), with the
-- run ids [$1, $2): the runs to keep ($3, keptRuns) go back into runs,
-- which puts them in the default partition now that their range has none,
-- with their tasks and events; the keys, signals and inbox rows of the
-- others are deleted.
WITH kept AS (
  SELECT DISTINCT id FROM unnest($3::uuid[]) AS k (id)
), runs_moved AS (
  INSERT INTO {{schema}}.runs SELECT r.* FROM {{schema}}.runs_{{period}} r JOIN kept k ON k.id = r.id
), tasks_moved AS (
  INSERT INTO {{schema}}.tasks SELECT t.* FROM {{schema}}.tasks_{{period}} t JOIN kept k ON k.id = t.run_id
), events_moved AS (
  INSERT INTO {{schema}}.events SELECT e.* FROM {{schema}}.events_{{period}} e JOIN kept k ON k.id = e.run_id
), keys_gone AS (
  DELETE FROM {{schema}}.idem_keys x WHERE x.run_id >= $1 AND x.run_id < $2 AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.id = x.run_id)
), signals_gone AS (
  DELETE FROM {{schema}}.messages m
  WHERE m.run_id >= $1 AND m.run_id < $2 AND m.run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.id = m.run_id)
), inbox_gone AS (
  DELETE FROM {{schema}}.inbox i WHERE i.run_id >= $1 AND i.run_id < $2 AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.id = i.run_id)
)
SELECT count(*) FROM kept

-- name: goneTables
-- The tables of periods detached and renamed by a drop whose second
-- transaction, the one dropping them, did not happen (history.go,
-- dropGone).
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind = 'r' AND NOT c.relispartition
  AND c.relname ~ '^(runs|tasks|events)_p[0-9]{8}t[0-9]{6}_gone$';

-- name: tableGrants
-- The rights granted on the partitioned tables of the schema $1, but their
-- owner's, as (table, privilege, grantee): a period's partitions get them
-- too (preparePeriod), for the statements that name them directly.
SELECT c.relname::text, a.privilege_type::text,
       CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(c.relacl) a
WHERE n.nspname = $1 AND c.relname IN ('runs', 'tasks', 'events') AND a.grantee <> c.relowner
ORDER BY 1, 2, 3;

-- name: freeConstraints
-- The constraints of the default partitions of the schema $1 that exclude
-- a period's run ids (history.go, freeDefaults), with their tables; and of
-- the partitioned tables, first, and the periods' partitions: migration
-- 017 made the partitioned tables LIKE tables that held one (before it
-- dropped them itself), their partitions inherit it, and a period's
-- tables are made LIKE them.
SELECT r.relname::text, c.conname::text FROM pg_constraint c
JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
WHERE n.nspname = $1 AND r.relname ~ '^(runs|tasks|events)(_default|_p[0-9]{8}t[0-9]{6})?$'
  AND c.contype = 'c' AND c.conname LIKE '%\_default\_free\_p%'
ORDER BY r.relkind = 'p' DESC, 1, 2;
