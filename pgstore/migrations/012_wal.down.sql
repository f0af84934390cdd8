DROP TRIGGER runs_delete_tasks ON {{schema}}.runs;
DROP FUNCTION {{schema}}.delete_tasks_of_runs();
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES {{schema}}.runs (id) ON DELETE CASCADE;
ALTER TABLE {{schema}}.tasks SET (fillfactor = 80);
ALTER TABLE {{schema}}.runs SET (fillfactor = 50);
