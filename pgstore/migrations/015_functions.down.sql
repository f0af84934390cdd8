DELETE FROM {{schema}}.runs r WHERE EXISTS (SELECT 1 FROM {{schema}}.tasks t WHERE t.run_id = r.id AND t.kind = 'func');
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_kind_check;
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_kind_check
    CHECK (kind IN ('step', 'sleep', 'on_failure', 'event', 'child', 'map', 'item'));
