-- durable 012: fewer bytes of WAL per run and per task (issue #23; the
-- figures are in docs/performance.md, "Where the WAL goes").

-- Every settlement is a HOT update only if the run's page has room for the
-- settled version, which is a little larger than the first (status,
-- finished_at). At fillfactor 50 one settlement in 16 found none in
-- `bench --scenario single`, and wrote an entry into each of the five
-- indexes of runs, on index pages not touched since the last checkpoint:
-- 197 bytes of WAL per run on average, full-page images mostly. At 40
-- every settlement was HOT (new pages only: no rewrite).
ALTER TABLE {{schema}}.runs SET (fillfactor = 40);

-- A task's row is written three times or more (created, claimed, finished;
-- in a DAG also enqueued), and none of those updates is HOT (tasks'
-- partial indexes are on state). At fillfactor 80 most of them found no
-- room on the row's page: the new version went to another page, which
-- logs a lock of the old version and the whole new tuple. At 40 most new
-- versions stay on their page (the update then logs only the bytes that
-- changed; how many fit depends on pruning the versions before, so on the
-- oldest snapshot of the server): 122 bytes of WAL less per run in
-- `bench --scenario single`, 132 per task in `--scenario dag`, on a quiet
-- server. New pages only: no rewrite.
ALTER TABLE {{schema}}.tasks SET (fillfactor = 40);

-- No foreign key from tasks to runs: checking it locked each new run (FOR
-- KEY SHARE, a WAL record of 54 bytes per run created) and ran a query per
-- task inserted. The store writes a run before its tasks, in the same
-- transaction, and adds tasks to a run only under its lock, which
-- retention skips. What the key's cascade did, deleting the tasks of the
-- runs deleted, a statement trigger does, once per statement and at no cost
-- to inserts: for retention (pruneRuns), for the retention of engines not
-- yet upgraded during a rolling deploy (their pruneRuns relied on the
-- cascade), and for an operator's own DELETE. The events never had a key,
-- for the same lock.
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_run_id_fkey;
CREATE FUNCTION {{schema}}.delete_tasks_of_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {{schema}}.tasks t USING gone g WHERE t.run_id = g.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER runs_delete_tasks AFTER DELETE ON {{schema}}.runs
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.delete_tasks_of_runs();
