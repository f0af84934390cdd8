-- No store changes the periods meanwhile (pgstore's historyTx takes this
-- lock): a period made after this migration read them would be left
-- behind.
SELECT pg_advisory_xact_lock(hashtextextended('durable history ' || (SELECT nspname FROM pg_namespace WHERE oid = '{{schema}}'::regnamespace), 0));
ALTER TABLE {{schema}}.workers DROP COLUMN schema_level;
-- Back to plain tables: every period's rows move into the default
-- partitions, which become the tables again.
DO $$
DECLARE
  p record;
  t text;
  i record;
BEGIN
  -- The partitions of a period a drop detached but did not drop yet
  -- (pgstore's dropGone): their runs had expired.
  FOR i IN SELECT c.relname FROM pg_class c
           WHERE c.relnamespace = '{{schema}}'::regnamespace AND c.relkind = 'r'
             AND c.relname ~ '^(runs|tasks|events)_p[0-9]{8}t[0-9]{6}_gone$' LOOP
    EXECUTE format('DROP TABLE {{schema}}.%I', i.relname);
  END LOOP;
  -- The constraints a period's creation left (pgstore's freeDefaults):
  -- on the plain tables they would refuse the runs of that period's range
  -- once the clock reaches it. The partitioned tables' first.
  FOR i IN SELECT r.relname, c.conname FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
           WHERE r.relnamespace = '{{schema}}'::regnamespace
             AND r.relname IN ('runs', 'tasks', 'events', 'runs_default', 'tasks_default', 'events_default')
             AND c.contype = 'c' AND c.conname LIKE '%\_default\_free\_p%'
           ORDER BY r.relkind = 'p' DESC LOOP
    EXECUTE format('ALTER TABLE {{schema}}.%I DROP CONSTRAINT IF EXISTS %I', i.relname, i.conname);
  END LOOP;
  FOR p IN SELECT suffix FROM {{schema}}.history_partitions LOOP
    FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events'] LOOP
      EXECUTE format('ALTER TABLE {{schema}}.%I DETACH PARTITION {{schema}}.%I', t, t || '_' || p.suffix);
    END LOOP;
  END LOOP;
  FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events'] LOOP
    EXECUTE format('ALTER TABLE {{schema}}.%I DETACH PARTITION {{schema}}.%I', t, t || '_default');
  END LOOP;
  FOR p IN SELECT suffix FROM {{schema}}.history_partitions LOOP
    FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events'] LOOP
      EXECUTE format('INSERT INTO {{schema}}.%I SELECT * FROM {{schema}}.%I', t || '_default', t || '_' || p.suffix);
      EXECUTE format('DROP TABLE {{schema}}.%I', t || '_' || p.suffix);
    END LOOP;
  END LOOP;
  FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events'] LOOP
    EXECUTE format('DROP TABLE {{schema}}.%I', t);
    EXECUTE format('ALTER TABLE {{schema}}.%I RENAME TO %I', t || '_default', t);
    FOR i IN SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             WHERE x.indrelid = format('{{schema}}.%I', t)::regclass AND c.relname LIKE t || '\_default%' LOOP
      EXECUTE format('ALTER INDEX {{schema}}.%I RENAME TO %I', i.relname, t || substr(i.relname, length(t || '_default') + 1));
    END LOOP;
  END LOOP;
END
$$;
DROP TABLE {{schema}}.history_partitions;
DROP FUNCTION {{schema}}.take_idem_key();
DROP TABLE {{schema}}.idem_keys;
CREATE UNIQUE INDEX runs_idem_key_idx ON {{schema}}.runs (workflow, tenant, idem_key) WHERE idem_key IS NOT NULL;
CREATE OR REPLACE FUNCTION {{schema}}.delete_tasks_of_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {{schema}}.tasks t USING gone g WHERE t.run_id = g.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER runs_delete_tasks AFTER DELETE ON {{schema}}.runs
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.delete_tasks_of_runs();
