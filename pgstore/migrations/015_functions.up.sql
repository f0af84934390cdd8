-- durable 015: durable functions (see docs/workflows.md, "Durable
-- functions"). A function's body is a task of kind 'func'; the calls it
-- makes are its records, items of the body named "~body[seq:name]",
-- whose kinds are those of steps ('step', 'sleep', 'event', 'child'):
-- nothing else in the schema changes.
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_kind_check;
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_kind_check
    CHECK (kind IN ('step', 'sleep', 'on_failure', 'event', 'child', 'map', 'item', 'func')) NOT VALID;
ALTER TABLE {{schema}}.tasks VALIDATE CONSTRAINT tasks_kind_check;
